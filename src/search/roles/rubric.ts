/**
 * What the rubric-writing roles (initializer, proposer) share: the lenient reading of a rubric a model
 * wrote (autosr §3.4), its validation (unique ids, positive weights, renormalised), its rendering in
 * prompts, and rubric ids that never grow.
 */
import { z } from 'zod'
import { canonicalJson, sha256Hex } from '../../hash/index.ts'
import { boundedText, closedObject, integerEnum, type JsonObjectSchema } from '../../llm/response-format.ts'
import { LlmError } from '../../llm/types.ts'
import type { Locale } from '../../prompts/index.ts'
import { Criterion, CRITERION_TYPES, type SearchRubric } from '../../schemas/search-rubric.ts'
import { normalisedWeights } from './score.ts'

/** The most criteria a rubric under search may have: mutations add criteria, and a rubric must stay gradeable. */
export const MAX_CRITERIA = 16
/**
 * At most this many check points / examples per criterion are kept from a model's reply, each at most 300 characters.
 */
const MAX_LIST_ITEMS = 12
const MAX_ITEM_CHARS = 300

/** A search role's name: also the `ChatRequest.role` its requests carry. */
export type SearchRoleName = 'initializer' | 'proposer' | 'verifier' | 'judge'

/**
 * The reply schema of a rubric-writing role: a JSON object, `{"rubric": {"criteria": …}}` or `{"criteria": …}`;
 * the criteria themselves are read leniently by {@link criteriaFromReply}.
 */
export const RubricReply = z.record(z.string(), z.unknown())

/**
 * The schema a rubric-writing role sends with its request, for servers that enforce one: `{"rubric": {"criteria":
 * [{criterion_id, text, weight}…]}}` with `min`..`max` criteria, the fields the lenient reader needs (the optional
 * ones the prompt shows keep their defaults). A small model held to it writes a rubric rather than any JSON.
 * @example rubricReplySchema(3, 6).required // ['rubric']
 */
export function rubricReplySchema(min: number, max: number): JsonObjectSchema {
  // Weights as a small enum and lengths as bounds: grammar-based servers drop `minimum`, and a weight of 0 or an empty
  // text is refused.
  const criterion = closedObject({
    criterion_id: boundedText(64),
    text: boundedText(300),
    weight: integerEnum(1, 5),
  })
  return closedObject({
    rubric: closedObject({ criteria: { type: 'array', minItems: min, maxItems: max, items: criterion } }),
  })
}

/**
 * Reads the criteria of a rubric a model wrote, leniently: `payload.rubric` or the payload itself; `criteria`
 * as a list or an `{id: criterion}` map; a criterion given as a string becomes its text; a missing id becomes
 * `criterion_<n>`, a missing text comes from description/title/name/the first check point/the id; a weight may
 * be a numeric string (missing → 1); an unknown criterion_type becomes null. What cannot be read — no criteria,
 * a non-positive weight, repeated ids — is an `invalid_reply`, so the caller's retry asks again.
 * @example criteriaFromReply({ criteria: ['Cites a source.', { id: 'tone', description: 'Polite', weight: '2' }] },
 *   'initializer')
 */
export function criteriaFromReply(payload: Record<string, unknown>, agent: string): Criterion[] {
  const body = isRecord(payload.rubric) ? payload.rubric : payload
  const raw = body.criteria
  const entries: Array<[string | undefined, unknown]> = Array.isArray(raw)
    ? raw.map((entry) => [undefined, entry])
    : isRecord(raw)
      ? Object.entries(raw)
      : []
  if (entries.length === 0) throw new LlmError('invalid_reply', `${agent} reply has no criteria`)
  const criteria: Criterion[] = []
  entries.forEach(([key, entry], index) => {
    const criterion = readCriterion(entry, key, index, agent)
    if (criterion) criteria.push(criterion)
  })
  if (criteria.length === 0) throw new LlmError('invalid_reply', `${agent} reply has no readable criteria`)
  return criteria
}

function readCriterion(entry: unknown, key: string | undefined, index: number, agent: string): Criterion | undefined {
  const fallbackId = `criterion_${index + 1}`
  if (typeof entry === 'string') {
    return entry.trim()
      ? parseCriterion({ criterion_id: sanitizeId(key) ?? fallbackId, text: entry.trim() }, agent)
      : undefined
  }
  if (!isRecord(entry)) return undefined
  const id = sanitizeId(firstString(entry.criterion_id, entry.id, key)) ?? fallbackId
  const checkPoints = stringList(entry.check_points ?? entry.checkpoints)
  const text =
    firstString(entry.text, entry.description, entry.criterion, entry.title, entry.name, checkPoints[0]) ??
    id.replace(/[_-]+/g, ' ')
  return parseCriterion(
    {
      criterion_id: id,
      text,
      weight: readWeight(entry.weight, id, agent),
      criterion_type: readType(entry.criterion_type ?? entry.type),
      check_points: checkPoints,
      positive_examples: stringList(entry.positive_examples),
      negative_examples: stringList(entry.negative_examples),
    },
    agent,
  )
}

function parseCriterion(value: Record<string, unknown>, agent: string): Criterion {
  const parsed = Criterion.safeParse(value)
  if (!parsed.success)
    throw new LlmError(
      'invalid_reply',
      `${agent} reply has an invalid criterion "${String(value.criterion_id)}": ${z.prettifyError(parsed.error)}`,
    )
  return parsed.data
}

function readWeight(value: unknown, id: string, agent: string): number {
  if (value === undefined || value === null) return 1
  const weight =
    typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : Number.NaN
  if (!Number.isFinite(weight) || weight <= 0)
    throw new LlmError(
      'invalid_reply',
      `${agent} reply gives criterion "${id}" the weight ${JSON.stringify(value)}; weights must be positive numbers`,
    )
  return weight
}

function readType(value: unknown): Criterion['criterion_type'] {
  const type = typeof value === 'string' ? value.trim().toLowerCase() : ''
  return (CRITERION_TYPES as readonly string[]).includes(type) ? (type as Criterion['criterion_type']) : null
}

/**
 * Checks a model's rubric and puts it in canonical form: at least `min` criteria and the first `max` of more, unique
 * ids, positive weights, weights renormalised to sum 1. Anything else is an `invalid_reply` (asked again).
 * @example validateCriteria(criteria, { min: 3, max: 6, agent: 'initializer' })
 */
export function validateCriteria(
  criteria: readonly Criterion[],
  options: { min?: number; max?: number; agent: string },
): Criterion[] {
  const { min = 1, max = MAX_CRITERIA, agent } = options
  if (criteria.length < min) {
    throw new LlmError(
      'invalid_reply',
      `${agent} reply has ${criteria.length} criteria; expected ${min === max ? min : `${min} to ${max}`}`,
    )
  }
  // More than asked for: the reply is taken as far as it is valid (a server's grammar may not hold maxItems).
  if (criteria.length > max) criteria = criteria.slice(0, max)
  const seen = new Set<string>()
  for (const criterion of criteria) {
    if (seen.has(criterion.criterion_id))
      throw new LlmError('invalid_reply', `${agent} reply uses the criterion id "${criterion.criterion_id}" twice`)
    seen.add(criterion.criterion_id)
    if (!(criterion.weight > 0))
      throw new LlmError(
        'invalid_reply',
        `${agent} reply gives criterion "${criterion.criterion_id}" a weight that is not positive`,
      )
  }
  const weights = normalisedWeights(criteria.map((criterion) => criterion.weight))
  return criteria.map((criterion, index) => ({ ...criterion, weight: weights[index]! }))
}

/**
 * A rubric id without the `_m<hash8>` suffixes mutations add: the base every descendant's id starts from.
 * @example rubricBaseId('p1_r0_m3fa9c012') // 'p1_r0'
 * @internal
 */
export function rubricBaseId(rubricId: string): string {
  return rubricId.replace(/(?:_m[0-9a-f]{8})+$/, '') || rubricId
}

/**
 * The id of a mutated rubric: `<base>_m<hash8>`, where the hash covers the criteria and protocol only, so ids do
 * not grow with the lineage and the same content always gets the same id.
 * @example await mutatedRubricId('p1_r0_m3fa9c012', child) // 'p1_r0_m<8 hex digits>'
 */
export async function mutatedRubricId(
  parentId: string,
  rubric: Pick<SearchRubric, 'criteria' | 'grading_protocol'>,
): Promise<string> {
  const hash = await sha256Hex(canonicalJson({ criteria: rubric.criteria, grading_protocol: rubric.grading_protocol }))
  return `${rubricBaseId(parentId)}_m${hash.slice(0, 8)}`
}

const LABELS = {
  en: { weight: 'weight', checks: 'check points', good: 'meets it, e.g.', bad: 'fails it, e.g.', none: '(none)' },
  zh: { weight: '权重', checks: '检查点', good: '满足示例', bad: '不满足示例', none: '（无）' },
} as const satisfies Record<Locale, Record<string, string>>

/**
 * A rubric's criteria as prompt lines: `- <id> (<type>, weight <w>): <text>`, then its check points and examples.
 * Weights are shown normalised, to 3 decimals.
 * @example criteriaLines(rubric.criteria, 'en') // '- task_fit (factual, weight 0.350): The answer addresses …\n  check
 *   points: …'
 */
export function criteriaLines(criteria: readonly Criterion[], locale: Locale): string {
  const labels = LABELS[locale]
  if (criteria.length === 0) return labels.none
  const weights = normalisedWeights(criteria.map((criterion) => criterion.weight))
  return criteria
    .map((criterion, index) => {
      const kind = criterion.criterion_type ? `${criterion.criterion_type}, ` : ''
      const lines = [
        `- ${criterion.criterion_id} (${kind}${labels.weight} ${weights[index]!.toFixed(3)}): ` +
          `${oneLine(criterion.text)}`,
      ]
      if (criterion.check_points.length)
        lines.push(`  ${labels.checks}: ${criterion.check_points.map(oneLine).join('; ')}`)
      if (criterion.positive_examples.length)
        lines.push(`  ${labels.good}: ${criterion.positive_examples.map(quote).join('; ')}`)
      if (criterion.negative_examples.length)
        lines.push(`  ${labels.bad}: ${criterion.negative_examples.map(quote).join('; ')}`)
      return lines.join('\n')
    })
    .join('\n')
}

/**
 * The criteria as the JSON a rubric-writing role reads and writes back (no rubric id or metadata).
 * @example criteriaJson(rubric.criteria) // '[{"criterion_id":"task_fit",…}]' (pretty-printed)
 */
export function criteriaJson(criteria: readonly Criterion[]): string {
  return JSON.stringify({ criteria }, null, 2)
}

/**
 * Whether two criteria lists grade alike: the same criteria in the same order, field for field, with weights equal
 * once normalised (to 6 decimal places).
 * @example sameCriteria(parent.criteria, child.criteria) // false after any real mutation
 */
export function sameCriteria(a: readonly Criterion[], b: readonly Criterion[]): boolean {
  if (a.length !== b.length) return false
  const weightsA = normalisedWeights(a.map((criterion) => criterion.weight))
  const weightsB = normalisedWeights(b.map((criterion) => criterion.weight))
  return a.every(
    (criterion, index) =>
      Math.round(weightsA[index]! * 1e6) === Math.round(weightsB[index]! * 1e6) &&
      sameCriterionContent(criterion, b[index]!),
  )
}

const sameValue = <T>(a: T, b: T) => a === b
const sameStrings = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((item, index) => item === b[index])

/** How each field but the weight is compared: a field added to Criterion does not compile until it is listed. */
const SAME_FIELD: {
  [Field in Exclude<keyof Criterion, 'weight'>]: (a: Criterion[Field], b: Criterion[Field]) => boolean
} = {
  criterion_id: sameValue,
  text: sameValue,
  criterion_type: sameValue,
  check_points: sameStrings,
  positive_examples: sameStrings,
  negative_examples: sameStrings,
}
const CONTENT_FIELDS = Object.keys(SAME_FIELD) as (keyof typeof SAME_FIELD)[]

function sameCriterionContent(a: Criterion, b: Criterion): boolean {
  return CONTENT_FIELDS.every((field) => (SAME_FIELD[field] as (x: unknown, y: unknown) => boolean)(a[field], b[field]))
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim()
}

function quote(text: string): string {
  return JSON.stringify(oneLine(text))
}

function sanitizeId(value: string | undefined): string | undefined {
  if (value === undefined) return undefined
  const id = value
    .trim()
    .replace(/[^\w.:-]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 64)
  return id === '' ? undefined : id
}

function firstString(...values: unknown[]): string | undefined {
  for (const value of values) {
    if (typeof value === 'string' && value.trim() !== '') return value.trim()
    if (typeof value === 'number' && Number.isFinite(value)) return String(value)
  }
  return undefined
}

function stringList(value: unknown): string[] {
  const items = Array.isArray(value) ? value : value === undefined || value === null ? [] : [value]
  return items
    .map((item) => (typeof item === 'string' ? item.trim() : typeof item === 'number' ? String(item) : ''))
    .filter((item) => item !== '')
    .map((item) => item.slice(0, MAX_ITEM_CHARS))
    .slice(0, MAX_LIST_ITEMS)
}

/**
 * Whether a value is a plain JSON object.
 * @example isRecord({ a: 1 }) // true; isRecord([1]) // false
 */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
