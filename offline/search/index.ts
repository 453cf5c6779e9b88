/**
 * The offline search runner behind `reward-harness search`: flags ↔ SearchConfig (options), backend and per-role
 * models (backend), the reply cache with per-role accounting (models), checkpoints and resume (checkpoints), run
 * records and the replay script (records), the progress bar (progress), and one run end to end (run).
 */
export { writeFileAtomic } from './atomic.ts'
export {
  createBackend,
  mergePoolUsage,
  MOCK_MODEL,
  type Backend,
  type BackendOptions,
  type EndpointRecord,
  type PoolReport,
} from './backend.ts'
export {
  CHECKPOINT_KIND,
  CHECKPOINT_VERSION,
  checkpointName,
  CheckpointStore,
  describeChanges,
  listCheckpoints,
  loadResumeCheckpoint,
  type CheckpointFile,
} from './checkpoints.ts'
export { SearchInputError, SearchInterrupted, type InterruptCause } from './errors.ts'
export { cacheDirFor, SearchModels, type ModelsUsage, type RoleCounters } from './models.ts'
export {
  addSearchOptions,
  CONFIG_KNOBS,
  finiteNumber,
  flagOf,
  integer,
  readSearchOptions,
  resolveSearchConfig,
  type KnobSpec,
  type SearchCliOptions,
} from './options.ts'
export { type BackendChoice, SEARCH_ROLES } from './roles.ts'
export { ProgressBar, ProgressTracker, type ProgressCounts } from './progress.ts'
export {
  gitSnapshot,
  newRunId,
  normaliseArgv,
  PATH_FLAGS,
  recordPaths,
  REPO_ROOT,
  replayScript,
  sessionIdOf,
  shellQuote,
  writeRunRecords,
} from './records.ts'
export {
  runSearchCommand,
  type BestRubricSummary,
  type RunUsage,
  type SearchRunEnvironment,
  type SearchRunSummary,
} from './run.ts'
export { formatSummary } from './summary.ts'
