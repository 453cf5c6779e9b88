import { z } from 'zod'
import { fnv1a } from '../../hash/index.ts'
import { RubricUpdate } from '../../schemas/agents.ts'
import type { Rubric } from '../../schemas/rubric.ts'
import { PENALTY_LABEL } from '../run-agent.ts'

/**
 * The most adaptive rubrics one instance may hold.
 */
export const MAX_ADAPTIVE_RUBRICS = 50
/** Bounds of an adaptive rubric's weight; proposals outside are brought inside and logged. */
const MIN_RUBRIC_WEIGHT = 0.1
const MAX_RUBRIC_WEIGHT = 10
const MAX_TEXT_CHARS = 4_000

/**
 * Rubric texts reach the scorer as instructions, and the Updater reads hostile rollouts through memory:
 * a text that carries data markers or tells the grader what score to give is an injection, not a criterion.
 */
const GRADER_INSTRUCTIONS: { pattern: RegExp; reason: string }[] = [
  { pattern: /<<<|>>>|\bDATA-[0-9a-f]{4,}/i, reason: 'contains a data marker' },
  {
    pattern: /\bignore\b[^.!?\n]{0,40}\b(?:rubrics?|criteri(?:a|on)|instructions?|rules?|above|previous)\b/i,
    reason: 'tells the grader to ignore its instructions',
  },
  {
    pattern: new RegExp(
      /\b(?:give|award|assign|output|return)\s+(?:every|all|any|each)\s+(?:answers?|responses?|rollouts?)\b/.source +
        /[^.!?\n]{0,30}\b(?:full|max(?:imum)?|perfect|top|highest|10|1\.0)\b/.source,
      'i',
    ),
    reason: 'fixes the grade of every answer',
  },
  {
    pattern: /\b(?:always|unconditionally)\s+(?:give|award|assign|output|return|grade)\b/i,
    reason: 'fixes the grade unconditionally',
  },
]
const RUBRIC_ID = /^[\w.:-]{1,128}$/

/** Adaptive rubric ids by what happened to them. */
export interface RubricDiff {
  added: string[]
  removed: string[]
  /** Text changed (the weight may have changed too). */
  modified: string[]
  /** Only the weight changed. */
  reweighted: string[]
}

export interface AppliedRubricUpdate {
  /** False when the update was malformed or left no adaptive rubric: `rubrics` is then `current` as it was. */
  accepted: boolean
  /** The anchors, unchanged and in their order, then the new adaptive set. */
  rubrics: Rubric[]
  /** Every part of the proposal that was refused or adjusted, and why. */
  refused: string[]
  diff: RubricDiff
}

/**
 * Applies an Updater proposal to an instance's rubrics, pure and deterministic. `final_adaptive` is
 * the authority for the new adaptive set; `modifications` are checked only for anchor ids. Anchors
 * come back as the very same objects. Refused and logged: modifications naming an anchor, entries
 * reusing an anchor id or repeating an anchor's text, blank or over-long texts, non-positive weights,
 * repeated texts, entries beyond 50. Adjusted and logged: weights outside 0.1..10, missing or
 * malformed ids (a new id is derived from the text, so the same text always gets the same id).
 * An unchanged rubric keeps its object; a changed or new one takes `version` and `createdAt`.
 * @example const { accepted, rubrics, refused, diff } = applyRubricUpdate(current, update, { version: 3, createdAt: new
 *   Date().toISOString() })
 */
export function applyRubricUpdate(
  current: readonly Rubric[],
  update: RubricUpdate,
  options: { version: number; createdAt: string },
): AppliedRubricUpdate {
  const anchors = current.filter((rubric) => rubric.is_anchor)
  const previous = current.filter((rubric) => !rubric.is_anchor)
  const keepPrevious = (refused: string[]): AppliedRubricUpdate => ({
    accepted: false,
    rubrics: [...current],
    refused,
    diff: { added: [], removed: [], modified: [], reweighted: [] },
  })

  const parsed = RubricUpdate.safeParse(update)
  if (!parsed.success)
    return keepPrevious([
      `the update is malformed; the previous version stays in force: ${z.prettifyError(parsed.error)}`,
    ])
  const { modifications, final_adaptive: proposals } = parsed.data

  const refused: string[] = []
  const anchorIds = new Set(anchors.map((anchor) => anchor.id))
  const anchorByText = new Map(anchors.map((anchor) => [normaliseText(anchor.text), anchor.id]))
  for (const modification of modifications) {
    if (modification.rubric_id !== undefined && anchorIds.has(modification.rubric_id)) {
      refused.push(`modification ${modification.op} touches anchor '${modification.rubric_id}'`)
    }
  }

  const previousById = new Map(previous.map((rubric) => [rubric.id, rubric]))
  const previousByText = new Map(previous.map((rubric) => [normaliseText(rubric.text), rubric]))
  const usedIds = new Set<string>(anchorIds)
  const textOwners = new Map<string, string>()
  const next: Rubric[] = []
  const diff: RubricDiff = { added: [], removed: [], modified: [], reweighted: [] }

  for (const [index, proposal] of proposals.entries()) {
    const label = proposal.id ? `'${proposal.id}'` : `#${index + 1}`
    const labelled = proposal.text.trim().toUpperCase().startsWith(PENALTY_LABEL.trim())
    const text = labelled ? proposal.text.trim().slice(PENALTY_LABEL.trim().length).trim() : proposal.text.trim()
    const kind = labelled ? ('penalty' as const) : proposal.kind
    const key = normaliseText(text)
    const refusal = proposalRefusal(proposal, { label, text, key }, { anchorIds, anchorByText, textOwners, next })
    if (refusal !== undefined) {
      refused.push(refusal)
      continue
    }

    const weight = Math.min(MAX_RUBRIC_WEIGHT, Math.max(MIN_RUBRIC_WEIGHT, proposal.weight))
    if (weight !== proposal.weight)
      refused.push(
        `weight ${proposal.weight} of ${label} brought to ${weight} (allowed ` +
          `${MIN_RUBRIC_WEIGHT}..${MAX_RUBRIC_WEIGHT})`,
      )
    const id = chooseId(proposal.id, key, previousByText, usedIds, refused, label)
    usedIds.add(id)
    textOwners.set(key, id)

    next.push(placedRubric({ id, text, weight, kind }, previousById.get(id), diff, options))
  }

  if (next.length === 0)
    return keepPrevious([...refused, 'the final adaptive set is empty; the previous version stays in force'])
  const kept = new Set(next.map((rubric) => rubric.id))
  diff.removed = previous.filter((rubric) => !kept.has(rubric.id)).map((rubric) => rubric.id)
  return { accepted: true, rubrics: [...anchors, ...next], refused, diff }
}

/** Why a proposed adaptive rubric is refused, or undefined when it can join the set (weights are clamped later). */
function proposalRefusal(
  proposal: RubricUpdate['final_adaptive'][number],
  { label, text, key }: { label: string; text: string; key: string },
  seen: {
    anchorIds: ReadonlySet<string>
    anchorByText: ReadonlyMap<string, string>
    textOwners: ReadonlyMap<string, string>
    next: readonly Rubric[]
  },
): string | undefined {
  if (proposal.id !== undefined && seen.anchorIds.has(proposal.id))
    return `final_adaptive entry reuses anchor id '${proposal.id}'`
  if (!text) return `final_adaptive entry ${label} has no text`
  if (text.length > MAX_TEXT_CHARS) return `final_adaptive entry ${label} is longer than ${MAX_TEXT_CHARS} characters`
  const poison = GRADER_INSTRUCTIONS.find(({ pattern }) => pattern.test(text))
  if (poison) return `final_adaptive entry ${label} ${poison.reason}: rubric texts sit outside the scorer's data blocks`
  const anchorTwin = seen.anchorByText.get(key)
  if (anchorTwin !== undefined) return `final_adaptive entry ${label} repeats anchor '${anchorTwin}'`
  const twin = seen.textOwners.get(key)
  if (twin !== undefined) return `final_adaptive entry ${label} repeats the text of '${twin}'`
  if (!Number.isFinite(proposal.weight) || proposal.weight <= 0)
    return `final_adaptive entry ${label} has weight ${proposal.weight}, which is not positive`
  if (seen.next.length >= MAX_ADAPTIVE_RUBRICS)
    return `final_adaptive entry ${label} exceeds the limit of ${MAX_ADAPTIVE_RUBRICS} adaptive rubrics`
  return undefined
}

/** The rubric an accepted proposal becomes: the previous object when unchanged, else a new version; noted in `diff`. */
function placedRubric(
  { id, text, weight, kind }: { id: string; text: string; weight: number; kind?: Rubric['kind'] },
  before: Rubric | undefined,
  diff: RubricDiff,
  options: { version: number; createdAt: string },
): Rubric {
  const penalty = kind === 'penalty' ? { kind: 'penalty' as const } : {}
  if (!before) {
    diff.added.push(id)
    return {
      id,
      text,
      weight,
      ...penalty,
      is_anchor: false,
      version: options.version,
      created_at: options.createdAt,
      metadata: { origin: 'updater' },
    }
  }
  // A kept rubric keeps its kind unless the proposal names one: an updater that omits `kind` does not flip a penalty.
  const nextKind = kind ?? before.kind
  if (before.text === text && before.weight === weight && nextKind === before.kind) return before
  ;(before.text === text && nextKind === before.kind ? diff.reweighted : diff.modified).push(id)
  const { kind: _, ...rest } = before
  return {
    ...rest,
    text,
    weight,
    ...(nextKind === 'penalty' ? { kind: 'penalty' as const } : {}),
    version: options.version,
    created_at: options.createdAt,
  }
}

/**
 * The proposal's own id when usable; else the id of a previous rubric with the same text; else one derived from the
 * text.
 */
function chooseId(
  proposed: string | undefined,
  textKey: string,
  previousByText: Map<string, Rubric>,
  usedIds: Set<string>,
  log: string[],
  label: string,
): string {
  if (proposed !== undefined) {
    if (RUBRIC_ID.test(proposed) && !usedIds.has(proposed)) return proposed
    const fallback = derivedId(textKey, previousByText, usedIds)
    log.push(
      `id ${label} is ${usedIds.has(proposed) ? 'already used' : 'not a valid rubric id'}; the rubric was given id ` +
        `'${fallback}'`,
    )
    return fallback
  }
  return derivedId(textKey, previousByText, usedIds)
}

function derivedId(textKey: string, previousByText: Map<string, Rubric>, usedIds: Set<string>): string {
  const same = previousByText.get(textKey)
  if (same && !usedIds.has(same.id)) return same.id
  const base = `adaptive-${fnv1a32(textKey)}`
  let id = base
  for (let suffix = 2; usedIds.has(id); suffix++) id = `${base}-${suffix}`
  return id
}

/** Text compared as a criterion: case, spacing and end punctuation ignored. */
function normaliseText(text: string): string {
  return text
    .toLowerCase()
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/[\s.。!！;；]+$/u, '')
}

/** 32-bit FNV-1a of a string's UTF-16 code units, as 8 hex digits: a short, stable, synchronous name. */
function fnv1a32(text: string): string {
  return fnv1a(text).toString(16).padStart(8, '0')
}
