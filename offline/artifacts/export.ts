/**
 * `reward-harness export`: a search output (autosr §1.3 with its run manifest, §1.4) becomes a content-addressed RM
 * artifact (src/schemas/artifact.ts; autosr §1.6 with the §8 fixes: per-prompt rubrics plus a `__default__` for unseen
 * prompts, the sampling settings carried in the runtime snapshot).
 *
 * Export refuses (ArtifactInputError → exit 2) an output that does not match its own run manifest: no manifest; a
 * `config_hash` or `settings_hash` that is not the hash of the manifest's `config_snapshot` / `settings` (recomputed
 * with the search's own functions); rubric prompt ids that differ from the dataset's (its prompt count in the manifest,
 * its prompt ids when recorded, and the dataset file itself when it is still where the manifest says with the recorded
 * sha256); rubrics that fail the rubric schema or could not score (no positive weight, repeated criterion ids).
 *
 * The artifact depends on the search output file alone: `created_at_utc` is the run's finish time, so the same file
 * always gives a byte-identical artifact (and the same `artifact_id`).
 */
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { z } from 'zod'
import { datasetHash } from '../../src/datasets/index.ts'
import {
  ARTIFACT_SCHEMA_VERSION,
  ArtifactRuntime,
  artifactId,
  DEFAULT_RUBRIC_KEY,
  RM_API_VERSION,
  AnyRmArtifact,
  RmArtifact,
  RmArtifactBody,
  verifyArtifactId,
  type ArtifactProvenance,
} from '../../src/schemas/artifact.ts'
import { looksLikeAutosrArtifact } from '../../src/schemas/autosr-artifact.ts'
import { configHash, SearchConfig } from '../../src/search/index.ts'
import { settingsHash } from '../search/records.ts'
import { ContentExtraction } from '../../src/schemas/extraction.ts'
import { SearchRubric } from '../../src/schemas/search-rubric.ts'
import { loadDataset } from '../datasets/load.ts'
import { writeFileAtomic } from '../search/atomic.ts'
import {
  parseDefaultRubricChoice,
  resolveDefaultRubric,
  type DefaultRubricReport,
  type SearchedRubric,
} from './default-rubric.ts'
import { ArtifactInputError, checkJsonSafety } from './errors.ts'
import { issuesOf, pathText } from './issues.ts'

/** The runtime's temperature when the search ran on the mock backend (no sampling): the search CLI's default. */
const MOCK_TEMPERATURE = 0
/** The runtime's max_tokens when the search ran on the mock backend: the search CLI's default `--max-tokens`. */
const MOCK_MAX_TOKENS = 2048

/** The parts of a run manifest (offline/search/run.ts) export reads; the rest passes through untouched. */
const ManifestCore = z.looseObject({
  status: z.string().optional(),
  run_id: z.string().min(1),
  created_at_utc: z.string().min(1).optional(),
  finished_at_utc: z.string().min(1).optional(),
  dataset: z.looseObject({
    sha256: z.string().min(1),
    path: z.string().optional(),
    format: z.enum(['json', 'jsonl']).optional(),
    prompts: z.number().int().nonnegative().optional(),
    prompt_ids: z.array(z.string()).optional(),
  }),
  seed: z.number().int(),
  config_snapshot: z.record(z.string(), z.unknown()),
  config_hash: z.string().min(1),
  settings: z.record(z.string(), z.unknown()),
  settings_hash: z.string().min(1),
  harness: z.looseObject({ session_id: z.string().min(1) }),
})
type ManifestCore = z.infer<typeof ManifestCore>

/** The settings (offline/search/run.ts `runSettings`) the runtime snapshot is made of. */
const RuntimeSettings = z.looseObject({
  backend: z.enum(['mock', 'openai']),
  models: z.looseObject({ verifier: z.string().min(1) }),
  temperature: z.number().min(0).max(2).nullable(),
  max_tokens: z.number().int().positive().nullable(),
  locale: z.enum(['en', 'zh']),
  grade_max: z.number().int().min(1).max(100),
  allow_na: z.boolean(),
  rubric_votes: z.number().int().min(1).max(15),
  judging: z.enum(['grades', 'verdicts']).optional(),
  extraction: ContentExtraction,
})

/** What the checks found (printed by `export --json`). */
interface ExportChecks {
  config_hash: string
  settings_hash: string
  /** How the rubrics' prompt ids were checked against the dataset: its file, its recorded ids, or its prompt count. */
  dataset_prompts: Array<'file' | 'ids' | 'count'>
  /** Why the dataset file was not used, when it was not. */
  dataset_file_note: string | null
}

/** An artifact built from a search output, and how. */
export interface BuiltArtifact {
  artifact: RmArtifact
  /** The artifact file's exact text (what `export` writes). */
  text: string
  default_rubric: DefaultRubricReport | null
  checks: ExportChecks
}

/** What `export` did. */
export interface ExportResult extends Omit<BuiltArtifact, 'text'> {
  out: string
  search_output: string
}

/**
 * The artifact file text of an artifact: indented JSON with `artifact_id` first, and a final newline.
 * @example formatArtifact(artifact).startsWith('{\n  "artifact_id": "rm_') // true
 */
export function formatArtifact(artifact: RmArtifact): string {
  const { artifact_id, ...body } = artifact
  return `${JSON.stringify({ artifact_id, ...body }, null, 2)}\n`
}

/**
 * Builds an artifact from the text of a search output file, refusing (ArtifactInputError) an output that does not
 * match its run manifest. `name` names the file in messages.
 * @example const { artifact } = await buildArtifact(await readFile('out/best.json', 'utf8'), { name: 'out/best.json' })
 */
export async function buildArtifact(
  text: string,
  options: { name: string; defaultRubric?: string; checkDatasetFile?: boolean },
): Promise<BuiltArtifact> {
  const name = options.name
  const document = parseSearchOutputText(text, name)

  const manifest = parseManifest(document.run_manifest, name)
  const checks = checkHashes(manifest, name)
  const runtime = runtimeOf(manifest, name)
  const entries = parseBestRubrics(document, name)
  const datasetChecks = await checkPromptIds(manifest, entries, document, name, options.checkDatasetFile ?? true)

  const choice = parseDefaultRubricChoice(
    options.defaultRubric,
    entries.map((entry) => entry.prompt_id),
  )
  const chosen = await resolveDefaultRubric(choice, entries, { gradeMax: runtime.grade_max })

  const rubrics: Record<string, SearchRubric> = {}
  for (const entry of [...entries].sort((a, b) => (a.prompt_id < b.prompt_id ? -1 : a.prompt_id > b.prompt_id ? 1 : 0)))
    rubrics[entry.prompt_id] = entry.rubric
  if (chosen) rubrics[DEFAULT_RUBRIC_KEY] = chosen.rubric

  const provenance: ArtifactProvenance = {
    source_run_id: manifest.run_id,
    source_session_id: manifest.harness.session_id,
    dataset_sha256: manifest.dataset.sha256,
    config_hash: manifest.config_hash,
    settings_hash: manifest.settings_hash,
    search_output_sha256: createHash('sha256').update(text, 'utf8').digest('hex'),
  }
  const createdAt = manifest.finished_at_utc ?? manifest.created_at_utc
  if (!createdAt)
    throw new ArtifactInputError(
      'invalid_manifest',
      `refusing to export ${name}: run_manifest has neither finished_at_utc nor created_at_utc`,
    )
  const parsed = RmArtifactBody.safeParse({
    schema_version: ARTIFACT_SCHEMA_VERSION,
    kind: 'rubric',
    created_at_utc: createdAt,
    provenance,
    rubrics,
    runtime,
    scoring_policy: { score: 'weighted_mean_of_grades', normalization: { method: 'identity', range: [0, 1] } },
    compatibility: { artifact_type: 'rm', min_rm_api_version: RM_API_VERSION },
  })
  if (!parsed.success) {
    throw new ArtifactInputError(
      'invalid_artifact',
      `refusing to export ${name}: the artifact built from it is invalid`,
      issuesOf(parsed.error, (path) => pathText(path)),
    )
  }
  const artifact = RmArtifact.parse({ artifact_id: await artifactId(parsed.data), ...parsed.data })
  return {
    artifact,
    text: formatArtifact(artifact),
    default_rubric: chosen?.report ?? null,
    checks: { ...checks, ...datasetChecks },
  }
}

/** The search output's JSON object, refused when it is not JSON, not an object, or has no run manifest. */
function parseSearchOutputText(text: string, name: string): Record<string, unknown> {
  let document: unknown
  try {
    document = JSON.parse(text.startsWith('\uFEFF') ? text.slice(1) : text)
  } catch (error) {
    throw new ArtifactInputError(
      'invalid_json',
      `${name}: not a JSON file (${error instanceof Error ? error.message : String(error)})`,
    )
  }
  if (!isRecord(document))
    throw new ArtifactInputError(
      'invalid_search_output',
      `${name}: expected a search output object ({best_rubrics, best_objective_scores, run_manifest})`,
    )
  if (document.run_manifest === undefined || document.run_manifest === null) {
    throw new ArtifactInputError(
      'missing_manifest',
      `refusing to export ${name}: it has no run_manifest, so nothing ties its rubrics to a dataset, a config and ` +
        `settings (export the output of \`reward-harness search\` as written)`,
    )
  }
  return document
}

/**
 * Reads a search output file, builds its artifact and writes it atomically to `out` (directories are created).
 * @example const result = await exportArtifact({ searchOutput: 'out/best.json', out: 'out/rm.json' });
 *   result.artifact.artifact_id // 'rm_…'
 */
export async function exportArtifact(options: {
  searchOutput: string
  out: string
  defaultRubric?: string
  checkDatasetFile?: boolean
}): Promise<ExportResult> {
  let text: string
  try {
    text = await readFile(options.searchOutput, 'utf8')
  } catch (error) {
    throw new ArtifactInputError(
      'unreadable_file',
      `--search-output ${options.searchOutput}: cannot read the file ` +
        `(${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    )
  }
  const built = await buildArtifact(text, {
    name: options.searchOutput,
    ...(options.defaultRubric === undefined ? {} : { defaultRubric: options.defaultRubric }),
    ...(options.checkDatasetFile === undefined ? {} : { checkDatasetFile: options.checkDatasetFile }),
  })
  await writeFileAtomic(options.out, built.text)
  return {
    artifact: built.artifact,
    default_rubric: built.default_rubric,
    checks: built.checks,
    out: options.out,
    search_output: options.searchOutput,
  }
}

/**
 * Reads and checks an artifact file as deploy does before uploading: JSON, the artifact schema, and an `artifact_id`
 * that is the hash of the content (an artifact edited after export is refused).
 * @example const artifact = await readArtifactFile('out/rm.json') // throws ArtifactInputError when invalid
 */
export async function readArtifactFile(path: string): Promise<AnyRmArtifact> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    throw new ArtifactInputError(
      'unreadable_file',
      `--artifact ${path}: cannot read the file (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    )
  }
  let document: unknown
  try {
    document = JSON.parse(text.startsWith('\uFEFF') ? text.slice(1) : text)
  } catch (error) {
    throw new ArtifactInputError(
      'invalid_json',
      `--artifact ${path}: not a JSON file (${error instanceof Error ? error.message : String(error)})`,
    )
  }
  checkJsonSafety(document, `--artifact ${path}`)
  return checkArtifact(document, path)
}

/**
 * Checks a parsed artifact document: the schema, and its id against its content.
 * @example const artifact = await checkArtifact(JSON.parse(text), 'rm.json')
 */
async function checkArtifact(document: unknown, name: string): Promise<AnyRmArtifact> {
  if (looksLikeAutosrArtifact(document))
    throw new ArtifactInputError(
      'autosr_artifact',
      `${name}: this is an autosr artifact: run reward-harness import --from autosr ${name} --out <file> to convert ` +
        "it to this project's artifact",
    )
  const parsed = AnyRmArtifact.safeParse(document)
  if (!parsed.success)
    throw new ArtifactInputError(
      'invalid_artifact',
      `${name}: not a valid RM artifact`,
      issuesOf(parsed.error, (path) => pathText(path)),
    )
  const artifact = parsed.data
  const duplicates =
    artifact.kind !== 'rubric'
      ? []
      : Object.entries(artifact.rubrics).flatMap(([key, rubric]) =>
          duplicateCriteria(rubric).map((id) => `rubrics.${key}.criteria: criterion id "${id}" is used twice`),
        )
  if (duplicates.length)
    throw new ArtifactInputError('invalid_artifact', `${name}: not a valid RM artifact`, duplicates)
  if (!(await verifyArtifactId(artifact))) {
    const { artifact_id: _id, ...body } = artifact
    throw new ArtifactInputError(
      'artifact_id_mismatch',
      `${name}: artifact_id ${artifact.artifact_id} is not the hash of the content (${await artifactId(body)}); was ` +
        `the file edited after export?`,
    )
  }
  return artifact
}

// ---------------------------------------------------------------------------------------------
// Checks

function parseManifest(raw: unknown, name: string): ManifestCore {
  const parsed = ManifestCore.safeParse(raw)
  if (!parsed.success)
    throw new ArtifactInputError(
      'invalid_manifest',
      `refusing to export ${name}: its run_manifest lacks what an artifact needs`,
      issuesOf(parsed.error, (path) => `run_manifest.${pathText(path)}`),
    )
  if (parsed.data.status !== undefined && parsed.data.status !== 'completed') {
    throw new ArtifactInputError(
      'invalid_manifest',
      `refusing to export ${name}: the run did not complete (run_manifest.status "${parsed.data.status}")`,
    )
  }
  return parsed.data
}

/** Recomputes both hashes with the search's own functions (configHash, settingsHash). */
function checkHashes(manifest: ManifestCore, name: string): Pick<ExportChecks, 'config_hash' | 'settings_hash'> {
  const config = manifest.config_snapshot as unknown as SearchConfig
  const recomputedConfig = configHash(config)
  const recomputedSettings = settingsHash(manifest.settings)
  const issues: string[] = []
  if (recomputedConfig !== manifest.config_hash)
    issues.push(
      `run_manifest.config_hash is ${manifest.config_hash}, but run_manifest.config_snapshot hashes to ` +
        `${recomputedConfig}`,
    )
  if (recomputedSettings !== manifest.settings_hash)
    issues.push(
      `run_manifest.settings_hash is ${manifest.settings_hash}, but run_manifest.settings hashes to ` +
        `${recomputedSettings}`,
    )
  if (issues.length) {
    throw new ArtifactInputError(
      'manifest_mismatch',
      `refusing to export ${name}: its run manifest does not match itself (edited after the search?)`,
      issues,
    )
  }
  const config_ = SearchConfig.safeParse(manifest.config_snapshot)
  if (!config_.success)
    throw new ArtifactInputError(
      'invalid_manifest',
      `refusing to export ${name}: run_manifest.config_snapshot is not a search config`,
      issuesOf(config_.error, (path) => `run_manifest.config_snapshot.${pathText(path)}`),
    )
  if (config_.data.seed !== manifest.seed)
    throw new ArtifactInputError(
      'manifest_mismatch',
      `refusing to export ${name}: run_manifest.seed ${manifest.seed} differs from run_manifest.config_snapshot.seed ` +
        `${config_.data.seed}`,
    )
  return { config_hash: recomputedConfig, settings_hash: recomputedSettings }
}

function runtimeOf(manifest: ManifestCore, name: string): ArtifactRuntime {
  const settings = RuntimeSettings.safeParse(manifest.settings)
  if (!settings.success) {
    throw new ArtifactInputError(
      'invalid_manifest',
      `refusing to export ${name}: run_manifest.settings lacks what scoring needs`,
      issuesOf(settings.error, (path) => `run_manifest.settings.${pathText(path)}`),
    )
  }
  const s = settings.data
  const configVotes = (manifest.config_snapshot as { num_votes?: unknown }).num_votes
  const runtime = ArtifactRuntime.safeParse({
    backend: s.backend,
    verifier_model: s.models.verifier,
    temperature: s.temperature ?? MOCK_TEMPERATURE,
    max_tokens: s.max_tokens ?? MOCK_MAX_TOKENS,
    seed: manifest.seed,
    locale: s.locale,
    extraction: s.extraction,
    grade_max: s.grade_max,
    allow_na: s.allow_na,
    // The votes the search's evaluator used: the config's override, else the rubrics' default.
    num_votes: typeof configVotes === 'number' ? configVotes : s.rubric_votes,
    ...(s.judging === 'verdicts' ? { judging: 'verdicts' } : {}),
  })
  if (!runtime.success)
    throw new ArtifactInputError(
      'invalid_manifest',
      `refusing to export ${name}: its settings do not make a runtime snapshot`,
      issuesOf(runtime.error, (path) => `runtime.${pathText(path)}`),
    )
  return runtime.data
}

function parseBestRubrics(document: Record<string, unknown>, name: string): SearchedRubric[] {
  if (!Array.isArray(document.best_rubrics))
    throw new ArtifactInputError('invalid_search_output', `refusing to export ${name}: best_rubrics is not a list`)
  if (document.best_rubrics.length === 0)
    throw new ArtifactInputError('invalid_search_output', `refusing to export ${name}: best_rubrics is empty`)
  const issues: string[] = []
  const entries: SearchedRubric[] = []
  const seen = new Set<string>()
  for (const [index, raw] of (document.best_rubrics as unknown[]).entries()) {
    const promptId = isRecord(raw) && typeof raw.prompt_id === 'string' ? raw.prompt_id : undefined
    const place = `best_rubrics[${index}]${promptId === undefined ? '' : ` (prompt_id "${promptId}")`}`
    if (!isRecord(raw)) {
      issues.push(`${place}: expected an object {prompt_id, rubric, score}`)
      continue
    }
    if (promptId === undefined || promptId.length === 0) {
      issues.push(`${place}.prompt_id: expected a non-empty string`)
      continue
    }
    if (promptId === DEFAULT_RUBRIC_KEY) {
      issues.push(`${place}.prompt_id: "${DEFAULT_RUBRIC_KEY}" is reserved for the default rubric`)
      continue
    }
    if (seen.has(promptId)) {
      issues.push(`${place}.prompt_id: "${promptId}" has two entries`)
      continue
    }
    seen.add(promptId)
    const rubric = SearchRubric.safeParse(raw.rubric)
    if (!rubric.success) {
      issues.push(...issuesOf(rubric.error, (path) => `${place}.rubric${path.length ? `.${pathText(path)}` : ''}`))
      continue
    }
    if (!rubric.data.criteria.some((criterion) => criterion.weight > 0))
      issues.push(`${place}.rubric.criteria: no criterion has a positive weight, so the rubric cannot score`)
    for (const id of duplicateCriteria(rubric.data))
      issues.push(`${place}.rubric.criteria: criterion id "${id}" is used twice`)
    if (typeof raw.score !== 'number' || !Number.isFinite(raw.score))
      issues.push(`${place}.score: expected a finite number`)
    entries.push({
      prompt_id: promptId,
      rubric: rubric.data,
      score: typeof raw.score === 'number' ? raw.score : Number.NEGATIVE_INFINITY,
    })
  }
  if (issues.length)
    throw new ArtifactInputError(
      'invalid_rubric',
      `refusing to export ${name}: ${issues.length === 1 ? 'a rubric is' : 'rubrics are'} invalid`,
      issues,
    )
  return entries
}

async function checkPromptIds(
  manifest: ManifestCore,
  entries: readonly SearchedRubric[],
  document: Record<string, unknown>,
  name: string,
  checkFile: boolean,
): Promise<Pick<ExportChecks, 'dataset_prompts' | 'dataset_file_note'>> {
  const rubricIds = entries.map((entry) => entry.prompt_id).sort()
  const issues: string[] = []
  const compare = (expected: readonly string[], what: string) => {
    const want = new Set(expected)
    const have = new Set(rubricIds)
    const missing = [...want].filter((id) => !have.has(id)).sort()
    const extra = [...have].filter((id) => !want.has(id)).sort()
    if (missing.length) issues.push(`${what} has prompts without a rubric: ${missing.join(', ')}`)
    if (extra.length) issues.push(`best_rubrics has prompts that are not in ${what}: ${extra.join(', ')}`)
  }
  if (isRecord(document.best_objective_scores))
    compare(Object.keys(document.best_objective_scores), 'best_objective_scores')
  const used: ExportChecks['dataset_prompts'] = []
  const { dataset } = manifest
  if (dataset.prompts !== undefined) {
    used.push('count')
    if (dataset.prompts !== rubricIds.length)
      issues.push(
        `run_manifest.dataset.prompts is ${dataset.prompts}, but best_rubrics has ${rubricIds.length} prompts`,
      )
  }
  if (dataset.prompt_ids !== undefined) {
    used.push('ids')
    compare(dataset.prompt_ids, 'run_manifest.dataset.prompt_ids')
  }
  let note: string | null = null
  if (!checkFile) note = 'not checked (disabled)'
  else if (!dataset.path) note = 'the manifest names no dataset file'
  else {
    let text: string | undefined
    try {
      text = await readFile(dataset.path, 'utf8')
    } catch {
      note = `${dataset.path} is not readable here`
    }
    if (text !== undefined) {
      if ((await datasetHash(text)) !== dataset.sha256)
        note = `${dataset.path} has changed since the search (its sha256 differs from the manifest's)`
      else {
        const loaded = await loadDataset(dataset.path, dataset.format ? { format: dataset.format } : {})
        used.push('file')
        compare(
          loaded.dataset.prompts.map((item) => item.prompt_id),
          `the dataset ${dataset.path}`,
        )
      }
    }
  }
  if (issues.length)
    throw new ArtifactInputError(
      'manifest_mismatch',
      `refusing to export ${name}: its rubrics do not match the dataset of its run manifest`,
      issues,
    )
  return { dataset_prompts: used, dataset_file_note: note }
}

// ---------------------------------------------------------------------------------------------
// Helpers

function duplicateCriteria(rubric: SearchRubric): string[] {
  const ids = rubric.criteria.map((criterion) => criterion.criterion_id)
  return [...new Set(ids.filter((id, index) => ids.indexOf(id) !== index))]
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
