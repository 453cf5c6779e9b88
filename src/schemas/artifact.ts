import { z } from 'zod'
import { canonicalJson, sha256Hex } from '../hash/index.ts'
import { ContentExtraction } from './extraction.ts'
import { SearchRubric } from './search-rubric.ts'

export const ARTIFACT_SCHEMA_VERSION = '1.0'
export const RM_API_VERSION = '1.0'
/** The key of the rubric used for prompts an artifact has never seen. */
export const DEFAULT_RUBRIC_KEY = '__default__'

/** Where an artifact came from: enough to find and re-run the search that produced it. */
export const ArtifactProvenance = z.object({
  source_run_id: z.string().min(1),
  source_session_id: z.string().min(1),
  dataset_sha256: z.string().min(1),
  config_hash: z.string().min(1),
  settings_hash: z.string().min(1),
  search_output_sha256: z.string().min(1),
  /**
   * Set when the artifact was converted from another system's artifact (`reward-harness import`): which format, the
   * original's id and the sha256 of the imported file. Optional, so the ids of every other artifact stay as they were.
   */
  imported: z
    .object({
      format: z.literal('autosr'),
      artifact_id: z.string().min(1),
      file_sha256: z.string().regex(/^[0-9a-f]{64}$/, 'file_sha256 is 64 hex digits'),
    })
    .optional(),
})
export type ArtifactProvenance = z.infer<typeof ArtifactProvenance>

/**
 * Everything scoring needs to grade as the search did: the verifier model and its sampling, the
 * prompt locale, content extraction and the grade scale.
 */
export const ArtifactRuntime = z.object({
  backend: z.enum(['mock', 'openai']),
  verifier_model: z.string().min(1),
  /**
   * The OpenAI-compatible endpoint the source system graded with, when it recorded one (an imported autosr artifact).
   * A record, not a routing rule: the edge grades where the deployment's `llm` (or `RM_LLM_BASE_URL`) says, so an
   * artifact file never chooses where the Worker sends its API key. `export --format autosr` writes it back.
   */
  base_url: z.url({ protocol: /^https?$/, message: 'base_url must be an http(s) URL' }).optional(),
  temperature: z.number().min(0).max(2),
  max_tokens: z.number().int().positive(),
  seed: z.number().int(),
  locale: z.enum(['en', 'zh']),
  extraction: ContentExtraction,
  grade_max: z.number().int().min(1).max(100),
  allow_na: z.boolean(),
  num_votes: z.number().int().min(1).max(15),
  /**
   * How the verifier grades (RunConfig.judging): `verdicts` asks each criterion as Yes or No, the grade its
   * probability, as the search that made the artifact did; absent: `grades`, one call for every criterion.
   */
  judging: z.enum(['grades', 'verdicts']).optional(),
})
export type ArtifactRuntime = z.infer<typeof ArtifactRuntime>

/** A rubric whose weights are all positive-or-zero with at least one positive: a usable scorer. */
const DeployableRubric = SearchRubric.refine((rubric) => rubric.criteria.some((criterion) => criterion.weight > 0), {
  message: 'a rubric needs at least one criterion with a positive weight',
})

/**
 * An RM artifact without its id: what the id is the hash of.
 * @example RmArtifactBody.parse(body)
 */
export const RmArtifactBody = z.object({
  schema_version: z.literal(ARTIFACT_SCHEMA_VERSION, {
    message: `schema_version must be "${ARTIFACT_SCHEMA_VERSION}"`,
  }),
  kind: z.literal('rubric'),
  created_at_utc: z.string().min(1),
  provenance: ArtifactProvenance,
  /** Per-prompt rubrics, keyed by prompt id; `__default__` (if present) serves unseen prompts. */
  rubrics: z
    .record(z.string().min(1).max(256), DeployableRubric)
    .refine((rubrics) => Object.keys(rubrics).length > 0, { message: 'an artifact needs at least one rubric' }),
  runtime: ArtifactRuntime,
  scoring_policy: z.object({
    score: z.literal('weighted_mean_of_grades'),
    normalization: z.object({ method: z.literal('identity'), range: z.tuple([z.literal(0), z.literal(1)]) }),
  }),
  compatibility: z.object({ artifact_type: z.literal('rm'), min_rm_api_version: z.string() }),
})
export type RmArtifactBody = z.infer<typeof RmArtifactBody>

/**
 * A versioned, content-addressed reward-model artifact.
 * @example const artifact = RmArtifact.parse(JSON.parse(text)); await verifyArtifactId(artifact)
 */
export const RmArtifact = RmArtifactBody.extend({
  artifact_id: z.string().regex(/^rm_[0-9a-f]{64}$/, 'artifact_id must be "rm_" and 64 hex digits'),
})
export type RmArtifact = z.infer<typeof RmArtifact>

/**
 * The content address of an artifact body (rubric or library): `rm_` + sha256 of its canonical JSON.
 * @example const id = await artifactId(body) // 'rm_3fa1…'
 */
export async function artifactId(body: AnyRmArtifactBody): Promise<string> {
  return `rm_${await sha256Hex(canonicalJson(body))}`
}

/**
 * True when the artifact's id is the hash of its content (it was not edited after export).
 * @example if (!(await verifyArtifactId(artifact))) throw new Error('tampered')
 */
export async function verifyArtifactId(artifact: AnyRmArtifact): Promise<boolean> {
  const { artifact_id: id, ...body } = artifact
  return id === (await artifactId(body as AnyRmArtifactBody))
}

/**
 * The rubric an artifact scores a prompt with: its own, else the default, else none.
 * @example rubricForPrompt(artifact, 'p_math_trains')
 */
export function rubricForPrompt(
  artifact: Pick<RmArtifact, 'rubrics'>,
  promptId: string,
): { rubric: SearchRubric; fallback: boolean } | undefined {
  const own = Object.hasOwn(artifact.rubrics, promptId) ? artifact.rubrics[promptId] : undefined
  if (own && promptId !== DEFAULT_RUBRIC_KEY) return { rubric: own, fallback: false }
  const fallback = artifact.rubrics[DEFAULT_RUBRIC_KEY]
  return fallback ? { rubric: fallback, fallback: true } : undefined
}

/** A deployment of an artifact to a target, kept at the edge; rollback re-activates `previous_artifact_id`. */
export const DeployRecord = z.object({
  deploy_id: z.string(),
  target: z.string(),
  artifact_id: z.string(),
  previous_artifact_id: z.string().nullable(),
  deployed_by: z.string(),
  deployed_at: z.string(),
  action: z.enum(['deploy', 'rollback']),
  dataset_sha256: z.string(),
  config_hash: z.string(),
})
export type DeployRecord = z.infer<typeof DeployRecord>

/** Deployment targets are path segments: `/rm/<target>/…`. */
export const TargetName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'a target is 1–64 lower-case letters, digits, _ or -')

/** One judge-library entry as shipped in a library artifact: its SKILL.md parts and that document's sha256. */
const LibraryArtifactEntry = z.object({
  name: z.string().regex(/^[a-z0-9]+(-[a-z0-9]+)*$/, 'an entry name is lowercase kebab-case'),
  kind: z.enum(['skill', 'tool']),
  description: z.string().min(1),
  when_to_use: z.string().min(1).optional(),
  body: z.string().min(1),
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'sha256 is 64 hex digits'),
})

/** Where a library artifact came from: the library directory's registry and, when found, its evolution log. */
export const LibraryArtifactProvenance = z.object({
  library_id: z.string().min(1),
  /** sha256 of the canonical JSON of the library's schema-v2 registry (names, kinds, paths, per-entry hashes). */
  registry_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** The library-state hash the evolution log records (`libraryHash`). */
  library_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  evolution_log_sha256: z.string().nullable(),
  best_iteration: z.number().int().nonnegative().nullable(),
  best_val_accuracy: z.number().min(0).max(1).nullable(),
  iterations: z.number().int().nonnegative().nullable(),
  dataset_sha256: z.string().nullable(),
})
export type LibraryArtifactProvenance = z.infer<typeof LibraryArtifactProvenance>

/** What judging with the library needs: the judge model and its sampling, the prompt locale, the tool-call budget. */
export const LibraryArtifactRuntime = z.object({
  backend: z.enum(['mock', 'openai']),
  model: z.string().min(1),
  locale: z.enum(['en', 'zh']),
  temperature: z.number().min(0).max(2),
  max_tokens: z.number().int().positive(),
  seed: z.number().int(),
  max_tool_calls: z.number().int().min(0).max(16),
})
export type LibraryArtifactRuntime = z.infer<typeof LibraryArtifactRuntime>

/**
 * A judge-library artifact without its id. Scoring policy (RewardHarness §4.5, a documented design choice): the
 * library judge is pairwise, so a response's scalar reward is its win rate against a reference response, judged in
 * both orders (win 1, tie 0.5, loss 0; failed orders are left out and counted, never read as ties).
 * @example LibraryArtifactBody.parse(body)
 */
export const LibraryArtifactBody = z.object({
  schema_version: z.literal(ARTIFACT_SCHEMA_VERSION, {
    message: `schema_version must be "${ARTIFACT_SCHEMA_VERSION}"`,
  }),
  kind: z.literal('library'),
  created_at_utc: z.string().min(1),
  entries: z
    .array(LibraryArtifactEntry)
    .refine((entries) => new Set(entries.map((entry) => entry.name)).size === entries.length, {
      message: 'entry names must be unique',
    }),
  provenance: LibraryArtifactProvenance,
  runtime: LibraryArtifactRuntime,
  scoring_policy: z.object({
    score: z.literal('pairwise_win_rate_vs_reference'),
    orders: z.literal('both'),
    outcome_values: z.object({ win: z.literal(1), tie: z.literal(0.5), loss: z.literal(0) }),
    normalization: z.object({ method: z.literal('identity'), range: z.tuple([z.literal(0), z.literal(1)]) }),
  }),
  compatibility: z.object({ artifact_type: z.literal('rm'), min_rm_api_version: z.string() }),
})
export type LibraryArtifactBody = z.infer<typeof LibraryArtifactBody>

/**
 * A content-addressed judge-library artifact (`kind: 'library'`).
 * @example const artifact = LibraryArtifact.parse(JSON.parse(text))
 */
export const LibraryArtifact = LibraryArtifactBody.extend({
  artifact_id: z.string().regex(/^rm_[0-9a-f]{64}$/, 'artifact_id must be "rm_" and 64 hex digits'),
})
export type LibraryArtifact = z.infer<typeof LibraryArtifact>

/**
 * Any artifact the edge serves: the rubric kind (`RmArtifact`) or the library kind, told apart by `kind`.
 * @example const artifact = AnyRmArtifact.parse(raw); if (artifact.kind === 'library') artifact.entries
 */
export const AnyRmArtifact = z.discriminatedUnion('kind', [RmArtifact, LibraryArtifact])
export type AnyRmArtifact = z.infer<typeof AnyRmArtifact>
/** Any artifact body (without its id). */
export type AnyRmArtifactBody = RmArtifactBody | LibraryArtifactBody

/**
 * The provenance fields deploy records and storage columns carry, for either kind.
 * @example artifactOrigin(artifact).dataset_sha256
 */
export function artifactOrigin(artifact: AnyRmArtifact): {
  source_run_id: string
  source_session_id: string
  dataset_sha256: string
  config_hash: string
} {
  if (artifact.kind === 'rubric') {
    const { source_run_id, source_session_id, dataset_sha256, config_hash } = artifact.provenance
    return { source_run_id, source_session_id, dataset_sha256, config_hash }
  }
  const p = artifact.provenance
  return {
    source_run_id: `library:${p.library_id}`,
    source_session_id: p.evolution_log_sha256 ?? 'none',
    dataset_sha256: p.dataset_sha256 ?? 'unknown',
    config_hash: p.registry_sha256,
  }
}
