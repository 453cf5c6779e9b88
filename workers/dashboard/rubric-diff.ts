import { diffWordsWithSpace } from 'diff'
import type { Rubric } from '../../src/schemas/rubric.ts'

/** One run of a word diff: text both sides share, or text only the newer (`added`) or older (`removed`) side has. */
export interface DiffPart {
  kind: 'same' | 'added' | 'removed'
  text: string
}

/** A rubric present in both versions whose text or weight changed. */
interface ChangedRubric {
  id: string
  before: Rubric
  after: Rubric
  /** The word diff of the text; null when only the weight changed. */
  text: DiffPart[] | null
  /** `[before, after]` when the weight changed, else null. */
  weight: [number, number] | null
}

/** What changed from one rubric version to the next, rubrics matched by id. */
export interface RubricVersionDiff {
  added: Rubric[]
  removed: Rubric[]
  changed: ChangedRubric[]
  /** Rubrics with the same text and weight in both versions. */
  unchanged: number
}

/** Past this many edits the word diff is not worth computing; the diff then shows old and new text whole. */
const MAX_EDIT_LENGTH = 500

/**
 * A word-level diff (jsdiff over words and the spaces between them), adjacent runs merged.
 * @example diffWords('Shows the steps.', 'Shows all key steps.') // 'Shows ', -'the', +'all key', ' steps.'
 * @internal
 */
export function diffWords(before: string, after: string): DiffPart[] {
  const changes = diffWordsWithSpace(before, after, { maxEditLength: MAX_EDIT_LENGTH })
  if (!changes) return merge([part('removed', before), part('added', after)].filter((p) => p.text !== ''))
  return merge(
    changes
      .filter((change) => change.value !== '')
      .map((change) => part(change.added ? 'added' : change.removed ? 'removed' : 'same', change.value)),
  )
}

/**
 * Compares two rubric versions: rubrics added, removed, and changed (text word diff, weight before → after), by id.
 * Order follows the newer version for added and changed rubrics, the older one for removed rubrics.
 * @example const { added, removed, changed } = diffRubricVersions(v1.rubrics, v2.rubrics)
 */
export function diffRubricVersions(before: readonly Rubric[], after: readonly Rubric[]): RubricVersionDiff {
  const beforeById = new Map(before.map((rubric) => [rubric.id, rubric]))
  const afterIds = new Set(after.map((rubric) => rubric.id))
  const diff: RubricVersionDiff = {
    added: [],
    removed: before.filter((rubric) => !afterIds.has(rubric.id)),
    changed: [],
    unchanged: 0,
  }
  for (const rubric of after) {
    const old = beforeById.get(rubric.id)
    if (!old) {
      diff.added.push(rubric)
      continue
    }
    const textChanged = old.text !== rubric.text
    const weightChanged = old.weight !== rubric.weight
    if (!textChanged && !weightChanged) {
      diff.unchanged++
      continue
    }
    diff.changed.push({
      id: rubric.id,
      before: old,
      after: rubric,
      text: textChanged ? diffWords(old.text, rubric.text) : null,
      weight: weightChanged ? [old.weight, rubric.weight] : null,
    })
  }
  return diff
}

function part(kind: DiffPart['kind'], text: string): DiffPart {
  return { kind, text }
}

/**
 * Joins adjacent runs of one kind; a lone space between two changed runs joins them too, so a changed phrase reads as
 * one removal and one addition rather than alternating words.
 */
function merge(parts: DiffPart[]): DiffPart[] {
  const absorbed: DiffPart[] = []
  for (let index = 0; index < parts.length; index++) {
    const current = parts[index]!
    const previous = parts[index - 1]
    const next = parts[index + 1]
    if (
      current.kind === 'same' &&
      /^\s+$/.test(current.text) &&
      previous &&
      next &&
      previous.kind !== 'same' &&
      next.kind !== 'same'
    ) {
      absorbed.push(part('removed', current.text), part('added', current.text))
    } else {
      absorbed.push(current)
    }
  }
  // Removals first within a changed stretch, then additions: "old phrase" → "new phrase".
  const ordered: DiffPart[] = []
  let stretch: DiffPart[] = []
  const flush = () => {
    ordered.push(...stretch.filter((p) => p.kind === 'removed'), ...stretch.filter((p) => p.kind === 'added'))
    stretch = []
  }
  for (const p of absorbed) {
    if (p.kind === 'same') {
      flush()
      ordered.push(p)
    } else {
      stretch.push(p)
    }
  }
  flush()
  const merged: DiffPart[] = []
  for (const p of ordered) {
    const last = merged.at(-1)
    if (last && last.kind === p.kind) last.text += p.text
    else merged.push({ ...p })
  }
  return merged
}
