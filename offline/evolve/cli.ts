/**
 * The `evolve` command's work: read the options, build the backend, run the evolution. Loaded only when the command
 * runs.
 */
import { loadDataset } from '../datasets/load.ts'
import { MockChatModel } from '../../src/llm/mock.ts'
import type { ChatModel } from '../../src/llm/types.ts'
import type { Locale } from '../../src/prompts/index.ts'
import { createBackend, MOCK_MODEL } from '../search/backend.ts'
import { loadLibrary } from '../library/index.ts'
import { CachedChatModel, type CacheStats } from '../llm/cache.ts'
import { join } from 'node:path'
import { pairItems } from '../../src/evolve/index.ts'
import { datasetImageRegistry, missingImageFiles } from './images.ts'
import { EvolveInputError, runEvolve, type EvolveSummary } from './run.ts'

export interface EvolveCliOptions {
  dataset: string
  out: string
  iterations: string
  backend: string
  endpoint?: string[]
  model?: string
  seed: string
  valFraction: string
  exploreMargin: string
  pruneEvery: string
  library?: string
  locale: string
  concurrency: string
  /** Completion token limit of every model call (default 2048). */
  maxTokens?: string
  /** Time limit of one HTTP attempt in ms (default 120000); a slow local judge needs more. */
  timeoutMs?: string
  /** `both` (default) or `one`: judge each item in both presentation orders, or A/B only. */
  orders?: string
  /** Sample size of the tool-prompt check (default 4; 0 = off). */
  toolCheck?: string
  /** Reply cache directory (default `<out>/cache`); `false` (from --no-cache) turns it off. */
  cache?: boolean
  cacheDir?: string
}

function number(name: string, text: string, check: (value: number) => boolean, rule: string): number {
  const value = Number(text)
  if (!Number.isFinite(value) || !check(value))
    throw new EvolveInputError(`--${name} must be ${rule}, not ${JSON.stringify(text)}`)
  return value
}

/**
 * Runs `reward-harness evolve` with parsed commander options.
 * @example await runEvolveCommand({ dataset: 'offline/evolve/fixtures/pairs-demo.json', out: 'runs/a', iterations: '2',
 *   backend: 'mock', seed: '42', valFraction: '0.34', exploreMargin: '0.075', pruneEvery: '0', locale: 'en',
 * concurrency: '4' }, console.error)
 */
export async function runEvolveCommand(
  options: EvolveCliOptions,
  log: (line: string) => void,
  showProgress = false,
): Promise<EvolveSummary & { cache: (CacheStats & { dir: string }) | null }> {
  const settings = readSettings(options)
  const { dataset, sha256, images } = await loadPairDataset(options.dataset)
  const opened = await openModel(options, settings)
  let model = opened.model
  let cache: CachedChatModel | undefined
  const cacheDir = options.cacheDir ?? join(options.out, 'cache')
  if (options.cache !== false) {
    cache = await CachedChatModel.open({ dir: cacheDir, model })
    model = cache
  }
  try {
    const summary = await runEvolve({
      model,
      dataset,
      datasetSha256: sha256,
      outDir: options.out,
      ...settings,
      images,
      judge: { locale: options.locale as Locale },
      ...(options.library ? { initialLibrary: await loadLibrary(options.library) } : {}),
      log,
      showProgress,
    })
    return { ...summary, cache: cache ? { dir: cacheDir, ...cache.stats() } : null }
  } finally {
    await cache?.close()
    await opened.close()
  }
}

/** The numeric and named options, checked in flag order; a bad one is an EvolveInputError naming its flag. */
function readSettings(options: EvolveCliOptions) {
  const integerAtLeast = (min: number) => (v: number) => Number.isInteger(v) && v >= min
  const iterations = number('iterations', options.iterations, integerAtLeast(0), 'an integer ≥ 0')
  const seed = number('seed', options.seed, Number.isInteger, 'an integer')
  const valFraction = number('val-fraction', options.valFraction, (v) => v > 0 && v < 1, 'in (0, 1)')
  const exploreMargin = number('explore-margin', options.exploreMargin, (v) => v >= 0 && v <= 1, 'in [0, 1]')
  const pruneEvery = number('prune-every', options.pruneEvery, integerAtLeast(0), 'an integer ≥ 0')
  const concurrency = number('concurrency', options.concurrency, integerAtLeast(1), 'an integer ≥ 1')
  if (options.locale !== 'en' && options.locale !== 'zh') throw new EvolveInputError('--locale must be en or zh')
  if (!['mock', 'openai', 'auto'].includes(options.backend))
    throw new EvolveInputError('--backend must be mock, openai or auto')
  const orders = options.orders ?? 'both'
  if (orders !== 'both' && orders !== 'one')
    throw new EvolveInputError(`--orders must be both or one, not ${JSON.stringify(orders)}`)
  const toolCheckSample = number('tool-check', options.toolCheck ?? '4', integerAtLeast(0), 'an integer ≥ 0')
  const maxTokens = number('max-tokens', options.maxTokens ?? '2048', integerAtLeast(1), 'an integer ≥ 1')
  const timeoutMs = number('timeout-ms', options.timeoutMs ?? '120000', integerAtLeast(1), 'an integer ≥ 1')
  return {
    iterations,
    seed,
    valFraction,
    exploreMargin,
    pruneEvery,
    concurrency,
    orders,
    toolCheckSample,
    maxTokens,
    timeoutMs,
  } as const
}

/** The dataset and its images: registered as handles now, files checked now, read only when a request needs them. */
async function loadPairDataset(path: string) {
  const { dataset, sha256 } = await loadDataset(path)
  const images = datasetImageRegistry(path)
  pairItems(dataset, images)
  const missing = await missingImageFiles(images, path)
  if (missing.length > 0)
    throw new EvolveInputError(
      `${path}: ${missing.length} image file${missing.length > 1 ? 's' : ''} not found ` +
        `(paths are relative to the dataset file): ${missing.slice(0, 5).join('; ')}`,
    )
  return { dataset, sha256, images }
}

/** The judge model: the mock, or an OpenAI-compatible endpoint pool (auto: openai when endpoints are given). */
async function openModel(
  options: EvolveCliOptions,
  settings: { concurrency: number; seed: number; maxTokens: number; timeoutMs: number },
): Promise<{ model: ChatModel; close: () => Promise<void> }> {
  const endpoints = options.endpoint ?? []
  if (options.backend === 'mock' || (options.backend === 'auto' && endpoints.length === 0))
    return { model: new MockChatModel(MOCK_MODEL), close: async () => {} }
  if (endpoints.length === 0) throw new EvolveInputError('--backend openai needs at least one --endpoint')
  const backend = await createBackend({
    backend: 'openai',
    endpoints,
    maxConcurrency: settings.concurrency,
    ...(options.model ? { model: options.model } : {}),
    models: {},
    temperature: 0,
    maxTokens: settings.maxTokens,
    timeoutMs: settings.timeoutMs,
    maxAttempts: 3,
    seed: settings.seed,
    mockNoise: 0,
  })
  return { model: backend.models.judge, close: backend.close }
}
