/**
 * One `reward-harness search` run, end to end: dataset → backend → cached, counted role models → roles →
 * `runSearch` with checkpoints (and `--resume`) → the output JSON with `run_manifest` and `usage`, written
 * atomically → run records. Ctrl-C (SIGINT/SIGTERM) aborts the search through its AbortSignal; the last
 * checkpoint stays, and the result says how to resume.
 */
import { readFile } from 'node:fs/promises'
import { arch, platform } from 'node:os'
import { AppError } from '../../src/errors/index.ts'
import { DatasetError, readJsonDocument } from '../../src/datasets/index.ts'
import {
  configHash,
  hashHex,
  runSearch,
  type SearchOutput,
  type SearchState,
  type SearchStats,
} from '../../src/search/index.ts'
import {
  createSearchRoles,
  DEFAULT_PRESET_KEY,
  parsePresetRubrics,
  type SearchRoleName,
} from '../../src/search/roles/index.ts'
import type { SearchRubric } from '../../src/schemas/search-rubric.ts'
import { loadDataset } from '../datasets/load.ts'
import { writeFileAtomic } from './atomic.ts'
import { type Backend, type BackendOptions, createBackend } from './backend.ts'
import { CheckpointStore, describeChanges, loadResumeCheckpoint, type CheckpointFile } from './checkpoints.ts'
import { cliCommand } from '../cli/command.ts'
import { SearchInputError, SearchInterrupted } from './errors.ts'
import { SearchModels, type RoleCounters } from './models.ts'
import type { SearchCliOptions } from './options.ts'
import { SEARCH_ROLES } from './roles.ts'
import { ProgressBar, ProgressTracker } from './progress.ts'
import {
  gitSnapshot,
  newRunId,
  normaliseArgv,
  recordPaths,
  REPO_ROOT,
  replayScript,
  sessionIdOf,
  settingsHash,
  shellQuote,
  writeRunRecords,
} from './records.ts'

/** Where a run reports and what it may touch besides its files. */
export interface SearchRunEnvironment {
  /** The CLI's arguments (after the program name), for the run records and the resume hint. */
  argv: readonly string[]
  cwd: string
  /** Progress bar and notes (stderr). */
  stderr: (text: string) => void
  /** Draw the progress bar (stderr is a TTY and --json is off). */
  progress: boolean
  /** Install SIGINT/SIGTERM handlers that interrupt the run (the CLI process does). */
  handleSignals: boolean
  /** Where API-key variables are looked up. */
  env: Record<string, string | undefined>
}

/** Usage of a run: per role, in total, the search engine's own counters, the reply cache and the endpoints. */
interface RunUsage {
  backend: 'mock' | 'openai'
  /** Per role: requests, cache hits, backend calls, failures, unusable replies, tokens (+ HTTP attempts on openai). */
  roles: Record<
    SearchRoleName,
    RoleCounters & { attempts?: number; retries?: number; failures?: Record<string, number> }
  >
  total: RoleCounters & { attempts?: number; retries?: number; failures?: Record<string, number> }
  /** Role calls the engine made and its memo hits (label judges are not LLM calls). */
  engine: SearchStats
  cache: {
    dirs: string[]
    hits: number
    misses: number
    joins: number
    entries: number
    forgotten: number
    loaded: number
  } | null
  /** Per endpoint (openai): HTTP attempts, outcomes, tokens, cap and peak in flight, health. */
  endpoints: Record<string, Record<string, unknown>> | null
}

interface BestRubricSummary {
  prompt_id: string
  rubric_id: string
  criteria: number
  score: number
  best_candidate_id: string
}

/** What `--json` prints (and the text summary is made of). */
export interface SearchRunSummary {
  status: 'completed' | 'interrupted'
  /** What interrupted the run (interrupted only). */
  interrupted_by?: SearchInterrupted['by']
  run_id: string
  session_id: string
  resumed_from: string | null
  output: string | null
  run_records: { manifest: string; replay: string }
  checkpoints: { directory: string; latest: string | null; written: number }
  /** The command that continues an interrupted run (interrupted only). */
  resume_command?: string
  backend: { resolved: 'mock' | 'openai'; models: Record<SearchRoleName, string>; judge: string }
  config_hash: string
  seconds: number
  best_rubrics: BestRubricSummary[]
  /** Prompts the search went on without, and why (the model's replies for them stayed unusable). */
  dropped_prompts: { prompt_id: string; reason: string }[]
  usage: RunUsage
}

/**
 * Runs a search as the CLI does and returns its summary; throws `SearchInputError` (exit 2) for bad input,
 * `DatasetError` (exit 2) for a bad dataset, and other errors (exit 1) for failures.
 * @example
 * const summary = await runSearchCommand(await readSearchOptions(opts), { argv, cwd: process.cwd(), stderr: (t) =>
 * process.stderr.write(t), progress: false, handleSignals: true, env: process.env }) summary.status // 'completed'
 */
export async function runSearchCommand(
  options: SearchCliOptions,
  environment: SearchRunEnvironment,
): Promise<SearchRunSummary> {
  const started = Date.now()
  const runId = newRunId(new Date(started))
  const inputs = await loadInputs(options, environment, runId)
  const backend = await createBackend(backendOptionsOf(options, environment))
  const controller = new AbortController()
  const removeSignals = environment.handleSignals
    ? installSignalHandlers(controller, environment.stderr)
    : () => undefined
  let models: SearchModels | undefined
  let run: SearchRun | undefined
  try {
    models = await openModels(options, backend, controller)
    run = await prepareRun({ options, environment, started, runId, inputs, backend, models, controller })
    return await executeRun(run)
  } finally {
    run?.bar?.finish()
    removeSignals()
    await models?.close().catch(() => undefined)
    await backend.close()
  }
}

/** What a run reads before anything is started: the dataset, preset rubrics and the checkpoint to resume. */
interface RunInputs {
  loaded: Awaited<ReturnType<typeof loadDataset>>
  presets: { rubrics: Map<string, SearchRubric>; sha256: string } | null
  resume: Awaited<ReturnType<typeof loadResumeCheckpoint>> | null
  sessionId: string
}

/** Everything one run holds while it searches, for the steps below. */
interface SearchRun {
  options: SearchCliOptions
  environment: SearchRunEnvironment
  started: number
  runId: string
  inputs: RunInputs
  backend: Backend
  models: SearchModels
  controller: AbortController
  roles: ReturnType<typeof createSearchRoles>
  hash: string
  settings: Record<string, unknown>
  settingsDigest: string
  store: CheckpointStore
  tracker: ProgressTracker
  bar?: ProgressBar
  paths: ReturnType<typeof recordPaths>
  normalisedArgv: string[]
}

/** Reads the dataset, the preset rubrics (with the --preset-strict check) and the checkpoint of --resume. */
async function loadInputs(
  options: SearchCliOptions,
  environment: SearchRunEnvironment,
  runId: string,
): Promise<RunInputs> {
  const loaded = await loadDataset(
    environment.cwd === process.cwd() ? options.datasetArg : options.dataset,
    options.datasetFormat ? { format: options.datasetFormat } : {},
  )
  const presets = options.presetRubrics ? await readPresets(options.presetRubrics, options.gradeMax) : null
  if (presets && options.presetStrict && !presets.rubrics.has(DEFAULT_PRESET_KEY)) {
    const index = loaded.dataset.prompts.findIndex((item) => !presets.rubrics.has(item.prompt_id))
    if (index >= 0) {
      throw new SearchInputError(
        `--preset-strict: ${options.presetRubrics} has no rubric for prompts[${index}] ` +
          `(prompt_id "${loaded.dataset.prompts[index]!.prompt_id}") and no "${DEFAULT_PRESET_KEY}"`,
      )
    }
  }
  const resume = options.resume
    ? await loadResumeCheckpoint(options.resume, options.checkpointDir, environment.cwd)
    : null
  return { loaded, presets, resume, sessionId: resume?.checkpoint.session_id ?? sessionIdOf(runId) }
}

/** The backend's options from the command line (the sampling seed is the search seed). */
function backendOptionsOf(options: SearchCliOptions, environment: SearchRunEnvironment): BackendOptions {
  return {
    backend: options.backend,
    endpoints: options.endpoints,
    ...(options.endpointsFile ? { endpointsFile: options.endpointsFile } : {}),
    ...(options.baseUrl ? { baseUrl: options.baseUrl } : {}),
    ...(options.apiKeyEnv ? { apiKeyEnv: options.apiKeyEnv } : {}),
    maxConcurrency: options.maxConcurrency,
    ...(options.model ? { model: options.model } : {}),
    models: options.models,
    temperature: options.temperature,
    maxTokens: options.maxTokens,
    timeoutMs: options.timeoutMs,
    maxAttempts: options.maxAttempts,
    seed: options.config.seed,
    mockNoise: options.mockNoise,
    ...(options.mockLatencyMs ? { mockLatencyMs: options.mockLatencyMs } : {}),
    secrets: environment.env,
  }
}

/** The cached, counted role models; `--abort-after-calls` interrupts the run like Ctrl-C after that many calls. */
function openModels(options: SearchCliOptions, backend: Backend, controller: AbortController): Promise<SearchModels> {
  return SearchModels.open({
    models: backend.models,
    cacheDir: options.cacheDir,
    signal: controller.signal,
    onCall: (total) => {
      if (options.abortAfterCalls !== undefined && total >= options.abortAfterCalls && !controller.signal.aborted)
        controller.abort(new SearchInterrupted('abort-after-calls'))
    },
  })
}

/** Builds the roles, checks a resume against them, opens the checkpoint store and draws the progress bar. */
async function prepareRun(
  run: Pick<
    SearchRun,
    'options' | 'environment' | 'started' | 'runId' | 'inputs' | 'backend' | 'models' | 'controller'
  >,
): Promise<SearchRun> {
  const { options, inputs, backend, models } = run
  const { loaded, presets, resume } = inputs
  const config = options.config
  const roles = createSearchRoles({
    modelsByRole: models.byRole(),
    backend: backend.resolved === 'mock' ? 'mock' : 'llm',
    dataset: loaded.dataset,
    locale: options.locale,
    gradeMax: options.gradeMax,
    allowNa: options.allowNa,
    numVotes: options.rubricVotes,
    judging: options.judging,
    extraction: options.extraction,
    retry: { maxAttempts: options.roleAttempts },
    ...(presets ? { presets: { rubrics: presets.rubrics, strict: options.presetStrict } } : {}),
    ...(backend.resolved === 'mock' && options.mockNoise > 0 ? { mockNoise: options.mockNoise } : {}),
  })
  const hash = configHash(config)
  const settings = runSettings(options, backend, roles.judgeChoice.kind, presets?.sha256 ?? null)
  const settingsDigest = settingsHash(settings)
  if (resume) {
    const current = { sha256: loaded.sha256, path: loaded.path, configHash: hash, config, settingsHash: settingsDigest }
    checkResumable(resume, { ...current, settings })
  }
  const store = await CheckpointStore.open(options.checkpointDir, inputs.sessionId, { keep: options.keepCheckpoints })
  const steps = config.mode === 'iterative' ? config.iterations : config.generations
  const tracker = new ProgressTracker(loaded.dataset.prompts.length, steps)
  let bar: ProgressBar | undefined
  if (run.environment.progress) {
    bar = new ProgressBar(tracker, () => {
      const { total } = models.usage()
      return { calls: total.calls, cache_hits: total.cache_hits }
    })
    bar.draw()
  }
  const paths = recordPaths(options.output, run.runId)
  const normalisedArgv = normaliseArgv(run.environment.argv, run.environment.cwd)
  return {
    ...run,
    roles,
    hash,
    settings,
    settingsDigest,
    store,
    tracker,
    ...(bar ? { bar } : {}),
    paths,
    normalisedArgv,
  }
}

/** Searches (checkpointing as it goes), then writes the output and run records; an interruption is a result. */
async function executeRun(run: SearchRun): Promise<SearchRunSummary> {
  const { options, inputs, store, controller, models } = run
  const { loaded, resume, sessionId } = inputs
  let stats: SearchStats | undefined
  try {
    const result = await runSearch(loaded.dataset, run.roles, options.config, {
      signal: controller.signal,
      ...(resume ? { resumeFrom: resume.checkpoint.state } : {}),
      onProgress: (event) => {
        run.tracker.update(event)
        run.bar?.draw()
      },
      onCheckpoint: async (state: SearchState) => {
        await store.save({
          session_id: sessionId,
          run_id: run.runId,
          dataset: { path: loaded.path, sha256: loaded.sha256 },
          config_hash: run.hash,
          config: options.config,
          settings_hash: run.settingsDigest,
          settings: run.settings,
          state,
        })
      },
    })
    stats = result.stats
    run.bar?.finish()
    if (result.status !== 'completed' || !result.output) throw new Error('the search stopped without an output')
    await models.flush()
    const manifest = await writeRecords(run, 'completed', result.stats)
    const output: SearchOutput = {
      ...result.output,
      run_manifest: manifest,
      usage: usageOf(models, run.backend, result.stats) as unknown as Record<string, unknown>,
    }
    await writeFileAtomic(options.output, `${JSON.stringify(output, null, 2)}\n`)
    return summaryOf(run, 'completed', result.stats, output)
  } catch (error) {
    run.bar?.finish()
    return finishFailed(run, error, stats)
  }
}

/** An interrupted run writes its records and says how to resume; any other failure is rethrown, named. */
async function finishFailed(run: SearchRun, error: unknown, stats: SearchStats | undefined): Promise<SearchRunSummary> {
  const { controller, models, inputs, store } = run
  const reason = controller.signal.aborted ? controller.signal.reason : undefined
  if (reason instanceof SearchInterrupted) {
    await models.settle(2_000)
    await models.flush().catch(() => undefined)
    const spent = stats ?? NO_STATS
    await writeRecords(run, 'interrupted', spent)
    const resumeArgv = [...run.normalisedArgv, '--resume', inputs.sessionId]
    return {
      ...summaryOf(run, 'interrupted', spent, null),
      interrupted_by: reason.by,
      resume_command: [cliCommand(run.environment.cwd), ...resumeArgv.map(shellQuote)].join(' '),
    }
  }
  if (error instanceof AppError && error.code === 'invalid_request' && !(error instanceof DatasetError))
    throw new SearchInputError(error.message)
  if (error instanceof DatasetError) throw error
  const message = error instanceof Error ? error.message : String(error)
  const hint = store.latest ? ` (the last checkpoint is kept; continue with --resume ${inputs.sessionId})` : ''
  throw new Error(`search failed: ${message}${hint}`, { cause: error })
}

/** The engine's counters of a run interrupted before its first result. */
const NO_STATS: SearchStats = {
  verifier_calls: 0,
  grade_memo_hits: 0,
  invalid_grades: 0,
  judge_calls: 0,
  judge_memo_hits: 0,
  proposer_calls: 0,
  proposer_refused: 0,
  initializer_calls: 0,
}

/** Writes the run manifest and the replay script; returns the manifest (the output embeds it). */
async function writeRecords(run: SearchRun, status: 'completed' | 'interrupted', stats: SearchStats) {
  const manifest = await manifestOf(run, status, stats)
  const replay = replayScript({ runId: run.runId, argv: run.normalisedArgv, apiKeyEnvs: run.backend.apiKeyEnvs })
  await writeRunRecords(run.paths, manifest, replay)
  return manifest
}

/** The run manifest: what ran, on what, with which settings and code, and what it cost. */
async function manifestOf(run: SearchRun, status: 'completed' | 'interrupted', stats: SearchStats) {
  const { options, environment, inputs, backend, store } = run
  const { loaded, resume } = inputs
  return {
    schema_version: '1.0',
    kind: 'reward-harness.search-run',
    status,
    run_id: run.runId,
    created_at_utc: new Date(run.started).toISOString(),
    finished_at_utc: new Date().toISOString(),
    workspace: { repo_root: REPO_ROOT, cwd: environment.cwd },
    dataset: {
      path: loaded.path,
      sha256: loaded.sha256,
      format: loaded.format,
      shape: loaded.shape,
      prompts: loaded.dataset.prompts.length,
      candidates: loaded.dataset.prompts.reduce((sum, item) => sum + item.candidates.length, 0),
    },
    output: { path: options.output },
    backend: backendRecord(run),
    seed: options.config.seed,
    config_snapshot: options.config,
    config_hash: run.hash,
    settings: run.settings,
    settings_hash: run.settingsDigest,
    code_snapshot: await gitSnapshot(),
    runtime: { node_version: process.version, platform: platform(), arch: arch() },
    command: { raw_argv: [...environment.argv], normalized_argv: run.normalisedArgv },
    harness: {
      session_id: inputs.sessionId,
      is_resumed: resume !== null,
      resume_source: resume?.file ?? null,
      checkpoint_dir: store.directory,
      checkpoints_written: store.written,
      latest_checkpoint: store.latest,
    },
    cache: options.cacheDir === null ? null : { dir: options.cacheDir },
    records: { manifest: run.paths.manifest, replay: run.paths.replay },
    usage: usageOf(run.models, backend, stats),
  }
}

/** The manifest's backend: models, judge, endpoints, which API-key variables are set, and the HTTP settings. */
function backendRecord(run: SearchRun) {
  const { options, backend, roles, environment } = run
  return {
    requested: backend.requested,
    resolved: backend.resolved,
    models: backend.modelNames,
    judge: { kind: roles.judgeChoice.kind, reason: roles.judgeChoice.reason },
    endpoints: backend.endpoints,
    api_key_env: backend.apiKeyEnvs,
    api_key_present: Object.fromEntries(backend.apiKeyEnvs.map((name) => [name, Boolean(environment.env[name])])),
    ...(backend.resolved === 'openai'
      ? {
          temperature: options.temperature,
          max_tokens: options.maxTokens ?? null,
          timeout_ms: options.timeoutMs,
          max_attempts: options.maxAttempts,
        }
      : {}),
    role_attempts: options.roleAttempts,
  }
}

/** What `--json` prints of a run. */
function summaryOf(
  run: SearchRun,
  status: 'completed' | 'interrupted',
  stats: SearchStats,
  output: SearchOutput | null,
): SearchRunSummary {
  const { backend, store } = run
  return {
    status,
    run_id: run.runId,
    session_id: run.inputs.sessionId,
    resumed_from: run.inputs.resume?.file ?? null,
    output: output ? run.options.output : null,
    run_records: { manifest: run.paths.manifest, replay: run.paths.replay },
    checkpoints: { directory: store.directory, latest: store.latest, written: store.written },
    backend: { resolved: backend.resolved, models: backend.modelNames, judge: run.roles.judgeChoice.kind },
    config_hash: run.hash,
    seconds: Math.round((Date.now() - run.started) / 100) / 10,
    best_rubrics: (output?.best_rubrics ?? []).map((entry) => ({
      prompt_id: entry.prompt_id,
      rubric_id: entry.rubric.rubric_id,
      criteria: entry.rubric.criteria.length,
      score: entry.score,
      best_candidate_id: entry.best_candidate_id,
    })),
    dropped_prompts: output?.search_diagnostics.dropped_prompts ?? [],
    usage: usageOf(run.models, backend, stats),
  }
}

/** The settings besides the search config that change answers: a resume must use the same ones. */
function runSettings(
  options: SearchCliOptions,
  backend: Backend,
  judge: string,
  presetsSha256: string | null,
): Record<string, unknown> {
  return {
    backend: backend.resolved,
    models: backend.modelNames,
    judge,
    temperature: backend.resolved === 'openai' ? options.temperature : null,
    max_tokens: backend.resolved === 'openai' ? (options.maxTokens ?? null) : null,
    mock_noise: backend.resolved === 'mock' ? options.mockNoise : null,
    locale: options.locale,
    grade_max: options.gradeMax,
    allow_na: options.allowNa,
    rubric_votes: options.rubricVotes,
    // Only when it differs from the default, so the settings hash of a search before verdicts stays its own.
    ...(options.judging === 'verdicts' ? { judging: 'verdicts' } : {}),
    extraction: options.extraction,
    preset_rubrics: presetsSha256 === null ? null : { sha256: presetsSha256, strict: options.presetStrict },
  }
}

function checkResumable(
  resume: { file: string; checkpoint: CheckpointFile },
  current: {
    sha256: string
    path: string
    configHash: string
    config: object
    settingsHash: string
    settings: Record<string, unknown>
  },
): void {
  const { checkpoint, file } = resume
  if (checkpoint.dataset?.sha256 !== current.sha256) {
    throw new SearchInputError(
      `--resume: the dataset differs from the checkpoint's (${file}): sha256 ` +
        `${String(checkpoint.dataset?.sha256).slice(0, 12)}… of ${checkpoint.dataset?.path} then, ` +
        `${current.sha256.slice(0, 12)}… of ${current.path} now`,
    )
  }
  if (checkpoint.config_hash !== current.configHash) {
    const changes = describeChanges(
      checkpoint.config as unknown as Record<string, unknown>,
      current.config as Record<string, unknown>,
    )
    throw new SearchInputError(
      `--resume: the search config differs from the checkpoint's (${file}): ` +
        `${changes.join('; ') || 'config hash mismatch'}; run with the same settings to resume`,
    )
  }
  if (checkpoint.settings_hash !== current.settingsHash) {
    const changes = describeChanges(checkpoint.settings ?? {}, current.settings)
    throw new SearchInputError(
      `--resume: the role/backend settings differ from the checkpoint's (${file}): ` +
        `${changes.join('; ') || 'settings hash mismatch'}; run with the same settings to resume`,
    )
  }
}

async function readPresets(
  file: string,
  gradeMax: number,
): Promise<{ rubrics: Map<string, SearchRubric>; sha256: string }> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    throw new SearchInputError(
      `--preset-rubrics ${file}: cannot read the file ` +
        `(${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    )
  }
  try {
    const document = readJsonDocument(text, 'json', file)
    const rubrics = parsePresetRubrics(document.format === 'json' ? document.value : undefined, { gradeMax })
    if (rubrics.size === 0)
      throw new Error('no rubric found (expected {"best_rubrics": [...]}, {"rubrics": [...]} or {prompt_id: rubric})')
    return { rubrics, sha256: hashHex(text) }
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    throw new SearchInputError(
      error instanceof DatasetError ? `--preset-rubrics ${message}` : `--preset-rubrics ${file}: ${message}`,
    )
  }
}

function usageOf(models: SearchModels, backend: Backend, stats: SearchStats): RunUsage {
  const own = models.usage()
  const pool = backend.poolUsage()
  const http = (name: string) => {
    const counters = name === '*' ? pool?.total : pool?.roles[name]
    return pool
      ? {
          attempts: counters?.calls ?? 0,
          retries: counters?.retries ?? 0,
          failures: { ...(counters?.failures ?? {}) } as Record<string, number>,
        }
      : {}
  }
  return {
    backend: backend.resolved,
    roles: Object.fromEntries(
      SEARCH_ROLES.map((role) => [role, { ...own.roles[role], ...http(role) }]),
    ) as RunUsage['roles'],
    total: { ...own.total, ...http('*') },
    engine: stats,
    cache: own.cache
      ? {
          dirs: own.cache.dirs,
          hits: own.cache.hits,
          misses: own.cache.misses,
          joins: own.cache.joins,
          entries: own.cache.entries,
          forgotten: own.cache.forgotten,
          loaded: own.cache.loaded,
        }
      : null,
    endpoints: pool
      ? Object.fromEntries(
          Object.entries(pool.endpoints).map(([name, endpoint]) => [
            name,
            {
              base_url: endpoint.base_url,
              model: endpoint.model,
              max_concurrency: endpoint.max_concurrency,
              peak_outstanding: endpoint.peak_outstanding,
              calls: endpoint.calls,
              ok: endpoint.ok,
              failures: endpoint.failures,
              retries: endpoint.retries,
              prompt_tokens: endpoint.prompt_tokens,
              completion_tokens: endpoint.completion_tokens,
              healthy: endpoint.healthy,
              taken_out: endpoint.taken_out,
              restored: endpoint.restored,
            },
          ]),
        )
      : null,
  }
}

/**
 * SIGINT/SIGTERM abort the run once (the last checkpoint stays); a second signal exits at once with 130.
 * Returns the function that removes the handlers.
 */
function installSignalHandlers(controller: AbortController, note: (text: string) => void): () => void {
  const handler = (signal: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      note(`\n${signal} again: exiting now\n`)
      process.exit(130)
    }
    note(`\n${signal}: stopping the search; the last checkpoint is kept (press Ctrl-C again to exit at once)\n`)
    controller.abort(new SearchInterrupted(signal === 'SIGTERM' ? 'SIGTERM' : 'SIGINT'))
  }
  process.on('SIGINT', handler)
  process.on('SIGTERM', handler)
  return () => {
    process.off('SIGINT', handler)
    process.off('SIGTERM', handler)
  }
}
