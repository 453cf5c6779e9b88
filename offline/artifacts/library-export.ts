/**
 * `reward-harness export --library <dir>`: a judge-library checkpoint (e.g. `<evolve out>/checkpoints/best`, see
 * offline/library) becomes a content-addressed library artifact (`kind: 'library'`, src/schemas/artifact.ts) the
 * edge serves with `/rm/<target>/score` (workers/artifacts/library.ts: win rate against a reference response, both
 * orders — the GRPO scalar of RewardHarness §4.5).
 *
 * The artifact carries every entry (name, kind, description, when_to_use, body, sha256 of its SKILL.md), the registry
 * hash, provenance from the evolution log when one is found (`<dir>/../../evolution-log.jsonl` or `--evolution-log`:
 * the log's sha256, best iteration, its validation accuracy, iterations run, dataset sha256) and a runtime snapshot
 * (backend, model, locale, temperature, max_tokens, seed, tool-call budget). `created_at_utc` is the log line's
 * timestamp (else registry.json's modification time), never "now": the same checkpoint and log always give the same id.
 */
import { createHash } from 'node:crypto'
import { readFile, stat } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { canonicalJson, sha256Hex } from '../../src/hash/index.ts'
import { buildRegistry, entryList, libraryHash, type Library } from '../../src/library/index.ts'
import {
  artifactId,
  ARTIFACT_SCHEMA_VERSION,
  LibraryArtifact,
  LibraryArtifactBody,
  type LibraryArtifactRuntime,
  RM_API_VERSION,
  type LibraryArtifactProvenance,
} from '../../src/schemas/artifact.ts'
import { EvolutionLogEntry } from '../../src/schemas/index.ts'
import { loadLibrary } from '../library/index.ts'
import { writeFileAtomic } from '../search/atomic.ts'
import { MOCK_MODEL } from '../search/backend.ts'
import { ArtifactInputError } from './errors.ts'

/** Options of `export --library` (strings as the CLI passes them; numbers accepted too). */
export interface LibraryExportOptions {
  library: string
  out: string
  /** The evolution log; default `<library>/../../evolution-log.jsonl` when it exists. `false`: none. */
  evolutionLog?: string | false
  backend?: string
  model?: string
  locale?: string
  temperature?: string | number
  maxTokens?: string | number
  seed?: string | number
  maxToolCalls?: string | number
}

/** What `export --library` did. */
export interface LibraryExportResult {
  artifact: LibraryArtifact
  out: string
  library_dir: string
  evolution_log: string | null
  /** Why provenance fields are null, when they are. */
  notes: string[]
}

/**
 * The artifact file text: indented JSON, `artifact_id` first, final newline.
 * @example formatLibraryArtifact(artifact).startsWith('{\n  "artifact_id": "rm_') // true
 */
function formatLibraryArtifact(artifact: LibraryArtifact): string {
  const { artifact_id, ...body } = artifact
  return `${JSON.stringify({ artifact_id, ...body }, null, 2)}\n`
}

function numberOption(
  name: string,
  raw: string | number | undefined,
  fallback: number,
  check: (value: number) => boolean,
  rule: string,
): number {
  if (raw === undefined) return fallback
  const value = typeof raw === 'number' ? raw : Number(raw)
  if (!Number.isFinite(value) || !check(value))
    throw new ArtifactInputError('invalid_option', `--${name} must be ${rule}, not ${JSON.stringify(raw)}`)
  return value
}

async function readLog(path: string): Promise<{ lines: EvolutionLogEntry[]; sha256: string }> {
  const text = await readFile(path, 'utf8')
  const lines: EvolutionLogEntry[] = []
  for (const [index, line] of text.split('\n').entries()) {
    if (!line.trim()) continue
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch {
      throw new ArtifactInputError('invalid_library', `${path}: line ${index + 1} is not JSON`)
    }
    const parsed = EvolutionLogEntry.safeParse(value)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      const field = issue?.path.join('.') || '(root)'
      throw new ArtifactInputError('invalid_library', `${path}: line ${index + 1}: ${field}: ${issue?.message}`)
    }
    lines.push(parsed.data)
  }
  return { lines, sha256: createHash('sha256').update(text).digest('hex') }
}

/**
 * Builds a library artifact (without writing it) from a loaded library and what export found around it.
 * @example const artifact = await buildLibraryArtifact(lib, { createdAtUtc: '2026-01-01T00:00:00Z', runtime, provenance
 *   })
 */
async function buildLibraryArtifact(
  library: Library,
  context: {
    createdAtUtc: string
    runtime: LibraryArtifactRuntime
    provenance: Omit<LibraryArtifactProvenance, 'library_id' | 'registry_sha256' | 'library_sha256'>
  },
): Promise<LibraryArtifact> {
  const registry = await buildRegistry(library)
  const entries = entryList(library).map((entry) => ({
    name: entry.name,
    kind: entry.kind,
    description: entry.description,
    ...(entry.kind === 'tool' ? { when_to_use: entry.when_to_use ?? entry.description } : {}),
    body: entry.body,
    sha256: registry.entries[entry.name]!.sha256,
  }))
  const body = LibraryArtifactBody.parse({
    schema_version: ARTIFACT_SCHEMA_VERSION,
    kind: 'library',
    created_at_utc: context.createdAtUtc,
    entries,
    provenance: {
      library_id: library.id,
      registry_sha256: await sha256Hex(canonicalJson(registry)),
      library_sha256: await libraryHash(library),
      ...context.provenance,
    },
    runtime: context.runtime,
    scoring_policy: {
      score: 'pairwise_win_rate_vs_reference',
      orders: 'both',
      outcome_values: { win: 1, tie: 0.5, loss: 0 },
      normalization: { method: 'identity', range: [0, 1] },
    },
    compatibility: { artifact_type: 'rm', min_rm_api_version: RM_API_VERSION },
  })
  return LibraryArtifact.parse({ ...body, artifact_id: await artifactId(body) })
}

/**
 * Exports the library in `options.library` to a library artifact at `options.out` (written atomically). Refuses
 * (ArtifactInputError → exit 2) a directory without registry.json, a library whose documents do not match its
 * registry, an empty library, bad runtime options, or an unreadable evolution log that was named explicitly.
 * @example const { artifact } = await exportLibraryArtifact({ library: 'runs/a/checkpoints/best', out:
 *   'out/lib-rm.json' })
 */
export async function exportLibraryArtifact(options: LibraryExportOptions): Promise<LibraryExportResult> {
  const dir = options.library
  const { library, registryMtime } = await loadExportedLibrary(dir)
  const hash = await libraryHash(library)
  const notes: string[] = []
  const logPath = await findEvolutionLog(options, dir)
  const found = logPath ? await provenanceFromLog(logPath, hash, notes) : undefined
  if (!logPath) notes.push('no evolution log found: provenance has only the registry')
  const provenance = found?.provenance ?? {
    evolution_log_sha256: null,
    best_iteration: null,
    best_val_accuracy: null,
    iterations: null,
    dataset_sha256: null,
  }
  const runtime = runtimeOf(options, found?.seed)
  const createdAtUtc = found?.stamp || registryMtime
  const artifact = await buildLibraryArtifact(library, { createdAtUtc, runtime, provenance })
  await writeFileAtomic(options.out, formatLibraryArtifact(artifact))
  return { artifact, out: options.out, library_dir: dir, evolution_log: logPath, notes }
}

/** The library directory to export, refused without a registry or entries; its registry's mtime dates it. */
async function loadExportedLibrary(dir: string): Promise<{ library: Library; registryMtime: string }> {
  let registryStat: Awaited<ReturnType<typeof stat>>
  try {
    registryStat = await stat(join(dir, 'registry.json'))
  } catch {
    throw new ArtifactInputError(
      'invalid_library',
      `--library ${dir}: no registry.json there (expected a library directory such as <evolve out>/checkpoints/best)`,
    )
  }
  let library: Library
  try {
    library = await loadLibrary(dir)
  } catch (error) {
    throw new ArtifactInputError('invalid_library', `--library ${dir}: ${(error as Error).message}`)
  }
  if (Object.keys(library.entries).length === 0)
    throw new ArtifactInputError('invalid_library', `--library ${dir}: the library has no entries`)
  return { library, registryMtime: registryStat.mtime.toISOString() }
}

/** The evolution log given, or the one two levels above the library (an evolve run's layout); none when off. */
async function findEvolutionLog(options: LibraryExportOptions, dir: string): Promise<string | null> {
  if (options.evolutionLog === false) return null
  const candidate = options.evolutionLog ?? resolve(dir, '..', '..', 'evolution-log.jsonl')
  const exists = await stat(candidate).then(
    (s) => s.isFile(),
    () => false,
  )
  if (exists) return candidate
  if (options.evolutionLog !== undefined)
    throw new ArtifactInputError('unreadable_file', `--evolution-log ${candidate}: cannot read the file`)
  return null
}

/**
 * What the evolution log says of the library with content hash `hash`: its iteration and accuracy (as the best,
 * or as the state an iteration ended in), the run's seed and the time it was logged. Why a field is unknown goes
 * to `notes`; an empty log gives nothing.
 */
async function provenanceFromLog(
  logPath: string,
  hash: string,
  notes: string[],
): Promise<{ provenance: LogProvenance; seed: number; stamp: string } | undefined> {
  const log = await readLog(logPath)
  const last = log.lines.at(-1)
  if (!last) {
    notes.push(`${logPath} is empty`)
    return undefined
  }
  let bestIteration: number | null = null
  let bestAccuracy: number | null = null
  let stamp = last.timestamp
  if (last.best_library_sha256 === hash) {
    bestIteration = last.best_iteration
    bestAccuracy = last.best_val_accuracy
  } else {
    // Not the best library of the log (say, checkpoints/iter-2): the last iteration that ended in this state.
    const match = [...log.lines].reverse().find((line) => line.library_sha256 === hash)
    if (match) {
      bestIteration = match.iteration
      bestAccuracy = match.state_val_accuracy
      stamp = match.timestamp
      notes.push(`the library is not the log's best; iteration ${match.iteration} ended in this state`)
    } else
      notes.push(
        `the evolution log never records this library's state (${hash.slice(0, 12)}…): ` +
          'iteration and accuracy unknown',
      )
  }
  const provenance = {
    evolution_log_sha256: log.sha256,
    best_iteration: bestIteration,
    best_val_accuracy: bestAccuracy,
    iterations: last.iteration,
    dataset_sha256: last.settings.dataset_sha256,
  }
  return { provenance, seed: last.settings.seed, stamp }
}

type LogProvenance = Omit<LibraryArtifactProvenance, 'library_id' | 'registry_sha256' | 'library_sha256'>

/** The runtime the edge judges with: backend, model, locale and sampling, checked (seed: the run's by default). */
function runtimeOf(options: LibraryExportOptions, logSeed: number | undefined): LibraryArtifactRuntime {
  const backend = options.backend ?? 'mock'
  if (backend !== 'mock' && backend !== 'openai')
    throw new ArtifactInputError('invalid_option', `--backend must be mock or openai, not ${JSON.stringify(backend)}`)
  if (backend === 'openai' && !options.model)
    throw new ArtifactInputError(
      'invalid_option',
      '--backend openai needs --model (the judge model the edge will call)',
    )
  const locale = options.locale ?? 'en'
  if (locale !== 'en' && locale !== 'zh')
    throw new ArtifactInputError('invalid_option', `--locale must be en or zh, not ${JSON.stringify(locale)}`)
  const runtime: LibraryArtifactRuntime = {
    backend,
    model: options.model ?? MOCK_MODEL,
    locale,
    temperature: numberOption('temperature', options.temperature, 0, (v) => v >= 0 && v <= 2, 'in [0, 2]'),
    max_tokens: numberOption(
      'max-tokens',
      options.maxTokens,
      2048,
      (v) => Number.isInteger(v) && v > 0,
      'a positive integer',
    ),
    seed: numberOption('seed', options.seed, logSeed ?? 0, Number.isInteger, 'an integer'),
    max_tool_calls: numberOption(
      'max-tool-calls',
      options.maxToolCalls,
      3,
      (v) => Number.isInteger(v) && v >= 0 && v <= 16,
      'an integer in [0, 16]',
    ),
  }
  return runtime
}
