/**
 * The `__default__` rubric of an artifact: what the edge scores a prompt the search never saw with.
 *
 * `best` (the default) picks the searched rubric whose criteria generalise best and keeps only its general part:
 *
 * - A criterion **generalises** when the search found the same criterion ({@link sameCriterion}: most of its words,
 *   and exactly its numbers) in the best rubric of at least one *other* prompt: the search arrived at it independently
 *   of the prompt. Its support is the share of the other prompts that have it.
 * - A rubric's **generality** is the weighted mean support of its criteria (weights as searched).
 * - The rubric with the highest generality is chosen; ties go to the higher objective score, then to the first
 *   prompt id. Its criteria without support (prompt-specific ones, e.g. a criterion naming the prompt's keywords or
 *   its reference's numbers) are dropped; check points and examples of the kept criteria stay.
 * - When no criterion of any rubric has support (a single prompt, or rubrics with nothing in common), nothing the
 *   search found is known to hold beyond its prompt, so the default is the default run's rubric
 *   (config/default-run.json's anchors and adaptives), not one prompt's.
 *
 * `<prompt_id>` uses that prompt's rubric whole; a file uses a rubric given by hand (a bare rubric, or a preset file
 * `{best_rubrics|rubrics: [{prompt_id, rubric}]}` / `{<prompt_id>: rubric}` whose `__default__` entry is taken);
 * `none` leaves the artifact without a default (unseen prompts are then refused by the edge).
 */
import { readFile } from 'node:fs/promises'
import defaultRun from '../../config/default-run.json'
import { readJsonDocument } from '../../src/datasets/index.ts'
import { DEFAULT_RUBRIC_KEY } from '../../src/schemas/artifact.ts'
import { parsePresetRubrics } from '../../src/search/roles/index.ts'
import type { Criterion, SearchRubric } from '../../src/schemas/search-rubric.ts'
import { ArtifactInputError } from './errors.ts'

/** How `--default-rubric` chose: the keyword, a prompt id of the search output, or a file. */
export type DefaultRubricChoice =
  | { kind: 'best' }
  | { kind: 'none' }
  | { kind: 'prompt'; prompt_id: string }
  | { kind: 'file'; path: string }

/** One searched rubric as the default-rubric choice sees it. */
export interface SearchedRubric {
  prompt_id: string
  rubric: SearchRubric
  /** The objective score of the rubric (tie-break). */
  score: number
}

/** What the chosen default is and how it was made (also recorded in the rubric's metadata, so it is in the hash). */
export interface DefaultRubricReport {
  /** `generic`: `best` found no criterion shared across prompts and fell back to the default run's rubric. */
  strategy: 'best' | 'generic' | 'prompt' | 'file'
  /** The prompt whose rubric it came from (best, prompt). */
  source_prompt_id: string | null
  /** The id of the rubric it came from (best, prompt; a file's rubric keeps its own id). */
  source_rubric_id: string | null
  /** The file it came from (file), as given. */
  source_file: string | null
  /** best: the chosen rubric's generality in [0, 1]. */
  generality: number | null
  /** best: prompt-specific criteria left out. */
  dropped_criteria: string[]
  criteria: string[]
}

/**
 * Reads the `--default-rubric` value: `best`, `none`, a prompt id of the search output, or a JSON file (an existing
 * path, or anything ending in `.json`). Keywords win over prompt ids of the same name.
 * @example parseDefaultRubricChoice('p_math_trains', ['p_math_trains']) // { kind: 'prompt', prompt_id: 'p_math_trains'
 *   }
 */
export function parseDefaultRubricChoice(value: string | undefined, promptIds: readonly string[]): DefaultRubricChoice {
  if (value === undefined || value === 'best') return { kind: 'best' }
  if (value === 'none') return { kind: 'none' }
  if (promptIds.includes(value)) return { kind: 'prompt', prompt_id: value }
  return { kind: 'file', path: value }
}

/** Words too common to say whether two criteria ask the same thing. */
const STOP_WORDS = new Set('a an and are as at be by for from in is it its of on or that the this to with'.split(' '))

/** A criterion's words as compared across prompts: lower-case letter and digit runs, stop words left out. */
function contentWords(text: string): Set<string> {
  return new Set((text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter((word) => !STOP_WORDS.has(word)))
}

/**
 * Whether two criteria ask the same thing: more than half of their words in common (Jaccard over
 * {@link contentWords}) and the same numbers, so "The final answer is 10800." never matches "… is 42.".
 * @example sameCriterion({ text: 'The final answer is correct.' }, { text: 'The response gives the correct final
 *   answer' }) // true
 * @internal
 */
export function sameCriterion(a: Pick<Criterion, 'text'>, b: Pick<Criterion, 'text'>): boolean {
  const left = contentWords(a.text)
  const right = contentWords(b.text)
  const numbers = (words: Set<string>) =>
    [...words]
      .filter((word) => /\d/.test(word))
      .sort()
      .join(' ')
  if (numbers(left) !== numbers(right)) return false
  const shared = [...left].filter((word) => right.has(word)).length
  const union = left.size + right.size - shared
  return union > 0 && shared / union > 0.5
}

/**
 * The share of the other prompts whose best rubric has each criterion (by {@link sameCriterion}) of `entry`'s rubric.
 * @example criterionSupport(entries[0], entries) // [1, 0.5, 0, …] (one per criterion)
 */
function criterionSupport(entry: SearchedRubric, all: readonly SearchedRubric[]): number[] {
  const others = all.filter((other) => other.prompt_id !== entry.prompt_id)
  return entry.rubric.criteria.map((criterion) => {
    if (others.length === 0) return 0
    const found = others.filter((other) => other.rubric.criteria.some((theirs) => sameCriterion(criterion, theirs)))
    return found.length / others.length
  })
}

/**
 * A rubric's generality: the weighted mean support of its criteria (uniform weights when they sum to 0).
 * @example generality(entries[0], entries) // 0.525
 * @internal
 */
export function generality(entry: SearchedRubric, all: readonly SearchedRubric[]): number {
  const support = criterionSupport(entry, all)
  const weights = entry.rubric.criteria.map((criterion) => criterion.weight)
  const total = weights.reduce((sum, weight) => sum + weight, 0)
  const effective = total > 0 ? weights : weights.map(() => 1)
  const denominator = total > 0 ? total : weights.length
  return effective.reduce((sum, weight, index) => sum + weight * support[index]!, 0) / denominator
}

/**
 * The `best` default: the most general searched rubric with its prompt-specific criteria dropped (see the module
 * comment). Deterministic: the same entries always give the same rubric.
 * @example const { rubric, report } = bestDefaultRubric(entries); rubric.metadata.default_rubric.source_prompt_id //
 *   'p_debug_undefined'
 * @internal
 */
export function bestDefaultRubric(entries: readonly SearchedRubric[]): {
  rubric: SearchRubric
  report: DefaultRubricReport
} {
  if (entries.length === 0)
    throw new ArtifactInputError('invalid_search_output', 'the search output has no rubric to choose a default from')
  const ranked = entries
    .map((entry) => ({ entry, generality: generality(entry, entries) }))
    .sort(
      (a, b) =>
        b.generality - a.generality ||
        b.entry.score - a.entry.score ||
        (a.entry.prompt_id < b.entry.prompt_id ? -1 : a.entry.prompt_id > b.entry.prompt_id ? 1 : 0),
    )
  const { entry, generality: chosenGenerality } = ranked[0]!
  const support = criterionSupport(entry, entries)
  const criteria = entry.rubric.criteria.filter((criterion, index) => support[index]! > 0 && criterion.weight > 0)
  if (criteria.length === 0) return genericDefaultRubric(entry.rubric.grading_protocol)
  const dropped = entry.rubric.criteria
    .filter((criterion) => !criteria.includes(criterion))
    .map((criterion) => criterion.criterion_id)
  const report: DefaultRubricReport = {
    strategy: 'best',
    source_prompt_id: entry.prompt_id,
    source_rubric_id: entry.rubric.rubric_id,
    source_file: null,
    generality: round(chosenGenerality),
    dropped_criteria: dropped,
    criteria: criteria.map((criterion) => criterion.criterion_id),
  }
  return { rubric: withDefaultMetadata({ ...entry.rubric, criteria }, report), report }
}

/**
 * The default run's rubric (config/default-run.json's anchors, then adaptives) on the search's grading protocol: the
 * `best` default when no searched criterion is known to hold beyond its own prompt.
 * @example genericDefaultRubric({ grade_max: 10, allow_na: true, num_votes: 1 }).report.criteria[0] //
 *   'anchor-correctness'
 */
function genericDefaultRubric(protocol: SearchRubric['grading_protocol']): {
  rubric: SearchRubric
  report: DefaultRubricReport
} {
  const criteria: Criterion[] = [...defaultRun.anchor_rubrics, ...defaultRun.adaptive_rubrics].map((item) => ({
    criterion_id: item.id,
    text: item.text,
    weight: item.weight,
    criterion_type: null,
    check_points: [],
    positive_examples: [],
    negative_examples: [],
  }))
  const report: DefaultRubricReport = {
    strategy: 'generic',
    source_prompt_id: null,
    source_rubric_id: null,
    source_file: null,
    generality: 0,
    dropped_criteria: [],
    criteria: criteria.map((criterion) => criterion.criterion_id),
  }
  const rubric = { rubric_id: DEFAULT_RUBRIC_KEY, criteria, grading_protocol: protocol, metadata: {} }
  return { rubric: withDefaultMetadata(rubric, report), report }
}

/**
 * The default rubric for a `--default-rubric` choice, or null for `none`.
 * @example const chosen = await resolveDefaultRubric({ kind: 'best' }, entries, { gradeMax: 10 })
 */
export async function resolveDefaultRubric(
  choice: DefaultRubricChoice,
  entries: readonly SearchedRubric[],
  options: { gradeMax: number },
): Promise<{ rubric: SearchRubric; report: DefaultRubricReport } | null> {
  switch (choice.kind) {
    case 'none':
      return null
    case 'best':
      return bestDefaultRubric(entries)
    case 'prompt': {
      const entry = entries.find((candidate) => candidate.prompt_id === choice.prompt_id)
      if (!entry)
        throw new ArtifactInputError(
          'invalid_default_rubric',
          `--default-rubric: the search output has no rubric for prompt "${choice.prompt_id}"`,
        )
      const report: DefaultRubricReport = {
        strategy: 'prompt',
        source_prompt_id: entry.prompt_id,
        source_rubric_id: entry.rubric.rubric_id,
        source_file: null,
        generality: null,
        dropped_criteria: [],
        criteria: entry.rubric.criteria.map((criterion) => criterion.criterion_id),
      }
      return { rubric: withDefaultMetadata(entry.rubric, report), report }
    }
    case 'file': {
      const rubric = await readDefaultRubricFile(
        choice.path,
        options.gradeMax,
        entries.map((entry) => entry.prompt_id),
      )
      const report: DefaultRubricReport = {
        strategy: 'file',
        source_prompt_id: null,
        source_rubric_id: null,
        source_file: choice.path,
        generality: null,
        dropped_criteria: [],
        criteria: rubric.criteria.map((criterion) => criterion.criterion_id),
      }
      return { rubric: withDefaultMetadata(rubric, report), report }
    }
  }
}

/**
 * Reads a default rubric from a file: a bare rubric (`{rubric_id?, criteria, grading_protocol?}`) or a preset file
 * whose `__default__` entry is used. Rubrics without a grade scale get `gradeMax`.
 * @example await readDefaultRubricFile('rubrics/generic.json', 10, [])
 */
async function readDefaultRubricFile(
  path: string,
  gradeMax: number,
  promptIds: readonly string[] = [],
): Promise<SearchRubric> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    const hint =
      code === 'ENOENT' && promptIds.length
        ? ` (it is neither a file nor one of the prompt ids: ${promptIds.join(', ')}; or use best or none)`
        : ''
    throw new ArtifactInputError(
      'invalid_default_rubric',
      `--default-rubric ${path}: cannot read the file (${code ?? (error as Error).message})${hint}`,
    )
  }
  let document: unknown
  try {
    const parsed = readJsonDocument(text, 'json', path)
    document = parsed.format === 'json' ? parsed.value : undefined
  } catch (error) {
    throw new ArtifactInputError(
      'invalid_default_rubric',
      `--default-rubric ${error instanceof Error ? error.message : String(error)}`,
    )
  }
  const bare = isRecord(document) && Array.isArray(document.criteria)
  let rubrics: Map<string, SearchRubric>
  try {
    rubrics = parsePresetRubrics(bare ? { [DEFAULT_RUBRIC_KEY]: document } : document, { gradeMax })
  } catch (error) {
    throw new ArtifactInputError(
      'invalid_default_rubric',
      `--default-rubric ${path}: ${error instanceof Error ? error.message : String(error)}`,
    )
  }
  const rubric = rubrics.get(DEFAULT_RUBRIC_KEY)
  if (!rubric) {
    throw new ArtifactInputError(
      'invalid_default_rubric',
      `--default-rubric ${path}: no "${DEFAULT_RUBRIC_KEY}" rubric in the file (give a bare rubric {"criteria": ` +
        `[...]}, or a preset file with a "${DEFAULT_RUBRIC_KEY}" entry)`,
    )
  }
  return rubric
}

/**
 * The default rubric as stored: a searched rubric is renamed `__default__` (scores name the rubric they used), a file's
 * keeps its id; `metadata.default_rubric` records how it was chosen.
 */
function withDefaultMetadata(rubric: SearchRubric, report: DefaultRubricReport): SearchRubric {
  const origin = Object.fromEntries(
    Object.entries(report).filter(
      ([key, value]) => key !== 'criteria' && value !== null && !(Array.isArray(value) && value.length === 0),
    ),
  )
  return {
    ...rubric,
    rubric_id: report.strategy === 'file' ? rubric.rubric_id : DEFAULT_RUBRIC_KEY,
    metadata: { ...rubric.metadata, default_rubric: origin },
  }
}

function round(value: number): number {
  return Math.round(value * 1e6) / 1e6
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
