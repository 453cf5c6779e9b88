/**
 * autosr's per-prompt rubrics (reference autosr.md §1.2) and this project's (`SearchRubric`), both ways. The two
 * criterion shapes are the same fields; the differences are the grading protocol and the grade scale:
 *
 * - autosr keeps `num_votes` and `allow_na` per rubric; this project's artifact has one of each for all its rubrics,
 *   so on import rubrics that disagree are refused, and on export every rubric gets the artifact's.
 * - autosr's verifier grades 0–5 (`grade_scale_max` 5, with its own normalization); this project's grades are integers
 *   0..grade_max. Import uses 5; export states both scales in each rubric's `metadata.reward_harness`, which import
 *   reads back so a round trip keeps the scale the rubric was searched on.
 */
import { DEFAULT_RUBRIC_KEY } from '../../src/schemas/artifact.ts'
import type { AutosrRmArtifact, AutosrRubric } from '../../src/schemas/autosr-artifact.ts'
import { CRITERION_TYPES, Criterion, type SearchRubric } from '../../src/schemas/search-rubric.ts'
import { issuesOf, pathText } from './issues.ts'

/** The scale autosr's verifier prompt states (`grade_scale_max`). */
const AUTOSR_GRADE_MAX = 5
/** The metadata key where `export --format autosr` states this project's grade scale. */
const SCALE_KEY = 'reward_harness'
/** The longest prompt id this project's artifact keys a rubric by. */
const MAX_PROMPT_ID = 256

/** The grading protocol every imported rubric shares: the artifact's runtime carries it too. */
interface SharedProtocol {
  grade_max: number
  allow_na: boolean
  num_votes: number
}

/**
 * This project's rubrics from an autosr artifact's `rubric` map, with the protocol they share; or every reason they
 * cannot be (each naming its `rubric.<prompt_id>.…` field).
 * @example const { value, issues } = rubricsFromAutosr(autosr.rubric)
 */
export function rubricsFromAutosr(rubricMap: AutosrRmArtifact['rubric']): {
  value?: { rubrics: Record<string, SearchRubric>; protocol: SharedProtocol }
  issues: string[]
  notes: string[]
} {
  const issues: string[] = []
  const notes: string[] = []
  const entries = Object.entries(rubricMap).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  const protocol: SharedProtocol = {
    grade_max: sharedValue(entries, 'metadata.reward_harness.grade_max', scaleOf, issues) ?? AUTOSR_GRADE_MAX,
    allow_na: sharedValue(entries, 'grading_protocol.allow_na', (rubric) => rubric.grading_protocol.allow_na, issues)!,
    num_votes: sharedValue(entries, 'grading_protocol.num_votes', (r) => r.grading_protocol.num_votes, issues)!,
  }
  const rubrics: Record<string, SearchRubric> = {}
  for (const [promptId, rubric] of entries) {
    const converted = rubricFromAutosr(promptId, rubric, protocol, issues, notes)
    if (converted) rubrics[promptId] = converted
  }
  return issues.length > 0 ? { issues, notes } : { value: { rubrics, protocol }, issues, notes }
}

/**
 * The one value every rubric has for a field (undefined when none has it); a rubric that differs from the first is an
 * issue naming its field.
 */
function sharedValue<T>(
  entries: ReadonlyArray<[string, AutosrRubric]>,
  field: string,
  read: (rubric: AutosrRubric) => T | undefined,
  issues: string[],
): T | undefined {
  const [firstId, first] = entries[0]!
  const expected = read(first)
  for (const [promptId, rubric] of entries.slice(1)) {
    const value = read(rubric)
    if (value !== expected)
      issues.push(
        `rubric.${promptId}.${field}: ${String(value ?? 'absent')}, but rubric.${firstId} has ` +
          `${String(expected ?? 'absent')}: this project's artifact has one ${field.split('.').pop()} for every rubric`,
      )
  }
  return expected
}

/** The grade scale `export --format autosr` recorded in a rubric's metadata, if any (malformed counts as none). */
function scaleOf(rubric: AutosrRubric): number | undefined {
  const marker = rubric.metadata[SCALE_KEY]
  if (typeof marker !== 'object' || marker === null) return undefined
  const gradeMax = (marker as Record<string, unknown>).grade_max
  return typeof gradeMax === 'number' && Number.isInteger(gradeMax) && gradeMax >= 1 && gradeMax <= 100
    ? gradeMax
    : undefined
}

function rubricFromAutosr(
  promptId: string,
  rubric: AutosrRubric,
  protocol: SharedProtocol,
  issues: string[],
  notes: string[],
): SearchRubric | undefined {
  const place = `rubric.${promptId}`
  const before = issues.length
  if (promptId.trim() === '' || promptId.length > MAX_PROMPT_ID)
    issues.push(`${place}: a prompt id must be 1–${MAX_PROMPT_ID} characters`)
  if (protocol.num_votes > 15)
    issues.push(`${place}.grading_protocol.num_votes: ${protocol.num_votes}: this project grades with 1–15 votes`)
  const unknownTypes: Record<string, string> = {}
  const criteria = rubric.criteria.map((criterion, index) => {
    const type = criterionType(criterion.criterion_type)
    if (type === undefined) unknownTypes[criterion.criterion_id] = criterion.criterion_type!
    const parsed = Criterion.safeParse({ ...criterion, criterion_type: type ?? null })
    if (!parsed.success)
      issues.push(...issuesOf(parsed.error, (path) => `${place}.criteria[${index}].${pathText(path)}`))
    return parsed.data
  })
  if (!rubric.criteria.some((criterion) => criterion.weight > 0))
    issues.push(`${place}.criteria: no criterion has a positive weight, so the rubric cannot score`)
  if (issues.length > before) return undefined
  const { [SCALE_KEY]: _scale, ...metadata } = rubric.metadata
  if (Object.keys(unknownTypes).length > 0) {
    metadata.autosr_criterion_types = unknownTypes
    notes.push(
      `${place}: criterion types this project does not know (${CRITERION_TYPES.join(', ')}) became null: ` +
        Object.entries(unknownTypes)
          .map(([id, type]) => `${id} "${type}"`)
          .join(', '),
    )
  }
  return {
    rubric_id: rubric.rubric_id,
    criteria: criteria as Criterion[],
    grading_protocol: { grade_max: protocol.grade_max, allow_na: protocol.allow_na, num_votes: protocol.num_votes },
    metadata,
  }
}

/** A known criterion type (case and spaces aside), null for none, undefined for one this project does not know. */
function criterionType(type: string | null): Criterion['criterion_type'] | undefined {
  if (type === null) return null
  const known = CRITERION_TYPES.find((name) => name === type.trim().toLowerCase())
  return known
}

/** An autosr rubric as `export --format autosr` writes it. */
interface AutosrRubricOut {
  rubric_id: string
  criteria: Array<Omit<Criterion, 'criterion_type'> & { criterion_type: string | null }>
  grading_protocol: {
    output_format: 'json'
    allow_na: boolean
    num_votes: number
    vote_method: 'majority'
    strict_json: true
  }
  metadata: Record<string, unknown>
}

/**
 * A rubric of this project as autosr's RM server reads it, graded with `numVotes` votes; its metadata states the grade
 * scale it was searched on next to autosr's.
 * @example rubricToAutosr(artifact.rubrics.p1, artifact.runtime.num_votes).grading_protocol.vote_method // 'majority'
 */
export function rubricToAutosr(rubric: SearchRubric, numVotes: number): AutosrRubricOut {
  return {
    rubric_id: rubric.rubric_id,
    criteria: rubric.criteria.map((criterion) => ({ ...criterion })),
    grading_protocol: {
      output_format: 'json',
      allow_na: rubric.grading_protocol.allow_na,
      num_votes: numVotes,
      vote_method: 'majority',
      strict_json: true,
    },
    metadata: { ...rubric.metadata, [SCALE_KEY]: gradeScale(rubric.grading_protocol.grade_max) },
  }
}

/**
 * Both grade scales, stated where an autosr reader looks (a rubric's metadata, the scoring policy).
 * @example gradeScale(10).autosr_grade_scale_max // 5
 */
export function gradeScale(gradeMax: number): Record<string, unknown> {
  return {
    grade_max: gradeMax,
    autosr_grade_scale_max: AUTOSR_GRADE_MAX,
    note:
      `reward-harness grades this rubric on integers 0..${gradeMax} (score = weighted mean of grade/${gradeMax}); ` +
      `autosr's verifier grades 0..${AUTOSR_GRADE_MAX} and normalizes them its own way, so its scores can differ`,
  }
}

/** autosr has no fallback rubric: `__default__` is one more prompt id there. */
export const AUTOSR_DEFAULT_NOTE =
  `"${DEFAULT_RUBRIC_KEY}" is written as a plain prompt id: autosr's RM server serves it only to requests with ` +
  `prompt_id "${DEFAULT_RUBRIC_KEY}" (it has no fallback rubric for unseen prompts)`
