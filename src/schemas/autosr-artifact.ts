/**
 * The RM artifact of autosr (the Python Reward Harness this project replaces; reference autosr.md §1.6, rules of
 * `rm/data_models.py` and the RM server's startup) as `reward-harness import --from autosr` reads it. The checks are
 * autosr's own — non-blank `artifact_id`, `source_run_id`, `dataset_hash` and `config_hash`, a non-empty `rubric`, and
 * a `runtime_snapshot` that is either `{}` or has `seed` (an integer), `extraction`, `candidate_extraction` and an
 * `llm` with all ten keys — plus the rubric rules of §1.2 (non-blank and unique criterion ids, weights ≥ 0, votes ≥ 1).
 * Where autosr's loader fills a default (`source_session_id`, a rubric's `grading_protocol`, a criterion's weight and
 * lists, the extraction keys), so does this schema. Unknown keys are kept (autosr ignores them too).
 */
import { z } from 'zod'

const NonBlank = z.string().refine((text) => text.trim().length > 0, 'must not be blank')

/** The ten keys autosr's RM server requires in `runtime_snapshot.llm` (its `RUNTIME_LLM_KEYS`). */
const AutosrLlmSnapshot = z.looseObject({
  base_url: NonBlank,
  timeout: z.number().positive(),
  max_retries: z.number().int().min(0),
  retry_backoff_base: z.number().min(0),
  retry_backoff_max: z.number().min(0),
  retry_jitter: z.number().min(0),
  fail_soft: z.boolean(),
  default_model: NonBlank,
  /** null or blank: the default model grades (autosr's fallback). */
  verifier_model: z.string().nullable(),
  /** null: autosr's built-in prompts, which are English. */
  prompt_language: z.string().nullable(),
})

/** The verifier's prompt extraction: `identity`, `tag` (`xml` is an alias), or `regex` with a pattern. */
const AutosrExtraction = z.looseObject({
  strategy: z.string().default('identity'),
  tag_name: z.string().default('content'),
  pattern: z.string().nullable().default(null),
  join_separator: z.string().default('\n\n'),
})

/** The verifier's candidate extraction: `answer` (autosr's default) or `identity`. */
const AutosrCandidateExtraction = z.looseObject({
  strategy: z.string().default('answer'),
  join_separator: z.string().default('\n\n'),
})

/** A complete runtime snapshot: what the autosr RM server builds its verifier from. */
const AutosrRuntimeSnapshot = z.looseObject({
  seed: z.number().int(),
  extraction: AutosrExtraction,
  candidate_extraction: AutosrCandidateExtraction,
  llm: AutosrLlmSnapshot,
})
export type AutosrRuntimeSnapshot = z.infer<typeof AutosrRuntimeSnapshot>

const AutosrCriterion = z.looseObject({
  criterion_id: NonBlank,
  text: NonBlank,
  weight: z.number().min(0).default(1),
  criterion_type: z.string().nullable().default(null),
  check_points: z.array(z.string()).default([]),
  positive_examples: z.array(z.string()).default([]),
  negative_examples: z.array(z.string()).default([]),
})

const AutosrGradingProtocol = z.looseObject({
  output_format: z.string().default('json'),
  allow_na: z.boolean().default(true),
  num_votes: z.number().int().min(1).default(3),
  /** Ignored by autosr: its votes are always averaged. */
  vote_method: z.string().default('majority'),
  strict_json: z.boolean().default(true),
})

/** One prompt's rubric (autosr §1.2). */
export const AutosrRubric = z.looseObject({
  rubric_id: NonBlank,
  criteria: z
    .array(AutosrCriterion)
    .min(1, 'must have at least one criterion')
    .superRefine((criteria, context) => {
      const seen = new Set<string>()
      for (const [index, criterion] of criteria.entries()) {
        if (seen.has(criterion.criterion_id))
          context.addIssue({
            code: 'custom',
            path: [index, 'criterion_id'],
            message: `criterion id "${criterion.criterion_id}" is used twice`,
          })
        seen.add(criterion.criterion_id)
      }
    }),
  grading_protocol: AutosrGradingProtocol.default({
    output_format: 'json',
    allow_na: true,
    num_votes: 3,
    vote_method: 'majority',
    strict_json: true,
  }),
  metadata: z.record(z.string(), z.unknown()).default({}),
})
export type AutosrRubric = z.infer<typeof AutosrRubric>

/**
 * An autosr RM artifact as its loader accepts it; an empty `runtime_snapshot` parses as undefined (autosr writes `{}`
 * when the search output had no run manifest, and its RM server then refuses to start).
 * @example const artifact = AutosrRmArtifact.parse(JSON.parse(text)); artifact.runtime_snapshot?.llm.base_url
 */
export const AutosrRmArtifact = z.looseObject({
  schema_version: z.literal('1.0', { message: 'must be "1.0"' }).default('1.0'),
  artifact_id: NonBlank,
  created_at_utc: NonBlank,
  source_session_id: NonBlank.default('unknown'),
  source_run_id: NonBlank.default('unknown_run'),
  dataset_hash: NonBlank,
  config_hash: NonBlank,
  rubric: z
    .record(z.string(), AutosrRubric)
    .refine((rubrics) => Object.keys(rubrics).length > 0, 'must include at least one prompt rubric'),
  scoring_policy: z.record(z.string(), z.unknown()).default({}),
  normalization: z.record(z.string(), z.unknown()).default({}),
  compatibility: z.record(z.string(), z.unknown()).default({}),
  runtime_snapshot: z.preprocess(
    (value) => (isRecord(value) && Object.keys(value).length === 0 ? undefined : value),
    AutosrRuntimeSnapshot.optional(),
  ),
})
export type AutosrRmArtifact = z.infer<typeof AutosrRmArtifact>

/**
 * True when a parsed JSON document has the shape of an autosr RM artifact (a `rubric` map, no `kind` or `rubrics`),
 * not of this project's: deploy and `export --artifact` use it to convert or point at `import --from autosr`.
 * @example looksLikeAutosrArtifact({ schema_version: '1.0', rubric: {} }) // true
 */
export function looksLikeAutosrArtifact(document: unknown): boolean {
  return isRecord(document) && isRecord(document.rubric) && !('kind' in document) && !('rubrics' in document)
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
