/**
 * The mock backend's answers for the offline rubric search's four roles: deterministic ports of autosr's
 * heuristics (§3.6), on the explicit integer grade scale, seeded from the request. `MockChatModel` calls these
 * through each role's request (`ChatRequest.mock`), so the roles parse a mock reply exactly as a real one.
 * They read only what a model would see: texts, never candidate ids, sources or labels.
 */
import type { MutationMode } from '../types.ts'
import type { Criterion } from '../../schemas/search-rubric.ts'
import { hex8, seededRandom } from '../../hash/index.ts'
import { MAX_CRITERIA } from './rubric.ts'
import { normalisedWeights } from './score.ts'
import { mentions, wordsAndNumbers } from '../../agents/mock-heuristics/words.ts'

/** What the mock initializer reads: a first rubric for one prompt, from up to 4 unlabelled sample answers. */
export interface SearchInitializeInput {
  prompt: string
  samples: string[]
  grade_max: number
  seed: number
}

/** What the mock proposer reads: `top` is the answer the current rubric ranks higher (not ground truth). */
export interface SearchProposeInput {
  prompt: string
  criteria: Criterion[]
  mode: MutationMode
  top: string
  runner_up: string
  seed: number
}

/** What the mock verifier reads: one extracted answer to grade 0..grade_max; `noise` flips grades at random. */
export interface SearchVerifyInput {
  prompt: string
  answer: string
  criteria: Criterion[]
  grade_max: number
  allow_na: boolean
  vote: number
  seed: number
  noise: number
}

/** What the mock judge reads: two answers in the order shown (`first` is "A"). */
export interface SearchJudgeInput {
  prompt: string
  first: string
  second: string
}

// ---------------------------------------------------------------------------------------------
// initializer

/**
 * The prompt's keywords: runs of 4+ ASCII letters in the lower-cased prompt, most frequent first, ties
 * alphabetically; at most `limit`. A prompt without any (e.g. Chinese) gets the 8-hex-digit hash of its text.
 * @example promptKeywords('Write a haiku about autumn leaves, autumn rain.') // ['autumn', 'about', 'haiku', 'leaves']
 * @internal
 */
export function promptKeywords(prompt: string, limit = 4): string[] {
  const counts = new Map<string, number>()
  for (const word of prompt.toLowerCase().match(/[a-z]{4,}/g) ?? []) counts.set(word, (counts.get(word) ?? 0) + 1)
  const words = [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([word]) => word)
  return words.length ? words.slice(0, limit) : [hex8(prompt)]
}

const criterion = (fields: Partial<Criterion> & Pick<Criterion, 'criterion_id' | 'text'>): Criterion => ({
  weight: 1,
  criterion_type: null,
  check_points: [],
  positive_examples: [],
  negative_examples: [],
  ...fields,
})

/**
 * autosr's HeuristicRubricInitializer: task_fit (the prompt's keywords), structure, specificity, safety_style,
 * weights 0.35/0.25/0.25/0.15.
 * @example heuristicCriteria('Explain recursion.').map((c) => c.criterion_id) // ['task_fit', 'structure',
 *   'specificity', 'safety_style']
 * @internal
 */
export function heuristicCriteria(prompt: string): Criterion[] {
  const keywords = promptKeywords(prompt)
  return [
    criterion({
      criterion_id: 'task_fit',
      text: `The answer does what the prompt asks and covers its key points (${keywords.join(', ')}).`,
      weight: 0.35,
      criterion_type: 'factual',
      check_points: keywords,
    }),
    criterion({
      criterion_id: 'structure',
      text: 'The answer is clearly organised, with ordered steps, a list or sections where the content calls for them.',
      weight: 0.25,
      criterion_type: 'format',
      check_points: ['first', 'second', '1.', '2.'],
    }),
    criterion({
      criterion_id: 'specificity',
      text: 'The answer is specific: it explains why, gives examples or details, and walks through the steps.',
      weight: 0.25,
      criterion_type: 'reasoning',
      check_points: ['because', 'example', 'detail', 'step'],
    }),
    criterion({
      criterion_id: 'safety_style',
      text: 'The answer is direct and appropriate, without needless refusals or boilerplate disclaimers.',
      weight: 0.15,
      criterion_type: 'safety',
      negative_examples: ['as an ai language model', 'cannot provide'],
    }),
  ]
}

/**
 * The mock initializer's reply.
 * @example answerSearchInitialize({ prompt: 'Explain recursion.', samples: [], grade_max: 10, seed: 7 })
 */
export function answerSearchInitialize(task: SearchInitializeInput): unknown {
  return { rubric: { criteria: heuristicCriteria(task.prompt) } }
}

// ---------------------------------------------------------------------------------------------
// proposer

const RAISE_SUFFIX = '; for high scores, require verifiable details or concrete evidence.'
const FLUFF_NEGATIVES = ['in conclusion', 'overall', 'as an ai language model', 'great question', 'i hope this helps']
const COUNTER_CHECKS = ['however', 'limit', 'trade-off', 'risk', 'edge case']

/**
 * autosr's TemplateProposer on a copy of `criteria`, driven by `random` (seeded by the caller), then weights
 * renormalised to sum 1. Per mode:
 * - raise_bar: the highest-weight criterion not yet raised gets the "verifiable details" clause, weight ×1.2;
 * - decompose: the longest criterion is split at its first " and " (else near the middle) into two criteria
 *   `<base>_d<n>` with half the weight each (40%: "example" becomes a check point of the first half);
 *   at the criteria cap it falls back to weight_perturb;
 * - factual_focus: factual and reasoning criteria ×1.25, the others ×0.9 (a factual criterion is added when
 *   that changes nothing); with the two answers given, the heaviest factual criterion is then pointed at what
 *   separates them (`focusOnContrast`);
 * - anti_fluff: adds `anti_fluff_<n>` with negative examples, or strengthens the existing one;
 * - counterexample_trigger: adds `counterexample_<n>` (limitations, trade-offs, risks), or strengthens it;
 * - weight_perturb: each weight × (1 + U[−0.15, 0.2]), at least 0.01; texts and ids unchanged.
 * @example mutateCriteria(rubric.criteria, 'decompose', seededRandom('propose', 7))
 * @internal
 */
export function mutateCriteria(
  criteria: readonly Criterion[],
  mode: MutationMode,
  random: () => number,
  answers?: ContrastedAnswers,
): Criterion[] {
  let out: Criterion[] = structuredClone([...criteria])
  switch (mode) {
    case 'raise_bar':
      out = raiseBar(out)
      break
    case 'decompose':
      out = out.length >= MAX_CRITERIA ? perturbWeights(out, random) : decompose(out, random)
      break
    case 'factual_focus':
      out = factualFocus(out)
      if (answers) out = focusOnContrast(out, answers, random)
      break
    case 'anti_fluff':
      out = strengthenOrAdd(out, 'anti_fluff', FLUFF_NEGATIVES, 'negative_examples', () =>
        criterion({
          criterion_id: '',
          text:
            'The answer is specific and free of filler: no generic openers or closers, no boilerplate, no ' +
            'restating the question.',
          weight: 0.2,
          criterion_type: 'style',
          check_points: ['specific', 'example', 'step'],
          negative_examples: FLUFF_NEGATIVES.slice(0, 3),
        }),
      )
      break
    case 'counterexample_trigger':
      out = strengthenOrAdd(out, 'counterexample', COUNTER_CHECKS, 'check_points', () =>
        criterion({
          criterion_id: '',
          text:
            'The answer addresses limitations, edge cases, trade-offs or risks where they matter, instead of ' +
            'presenting one option as flawless.',
          weight: 0.18,
          criterion_type: 'reasoning',
          check_points: COUNTER_CHECKS.slice(0, 4),
        }),
      )
      break
    case 'weight_perturb':
      out = perturbWeights(out, random)
      break
  }
  const weights = normalisedWeights(out.map((item) => item.weight))
  return out.map((item, index) => ({ ...item, weight: weights[index]! }))
}

/**
 * The two answers a proposer contrasts (the current rubric's top and runner-up, not ground truth) and the prompt.
 * @internal
 */
export interface ContrastedAnswers {
  prompt: string
  top: string
  runner_up: string
}

/** Most check points a contrast criterion names: enough to be specific, few enough that half of them decides. */
const CONTRAST_TERMS = 3

/**
 * The terms of `text` a criterion could check for: distinct lower-cased content words of 3+ characters and numbers
 * of 2+, each number whole ("177.8", "11:13": a fact, where "177" or "13" would also be found in wrong answers), that
 * the prompt does not already contain, so an answer that only echoes the question earns nothing.
 * @example contentTerms('Sydney is the capital of Australia.', 'What is the capital of Australia?') // ['sydney']
 * @example contentTerms('They meet at 11:13, 177.8 km from A.', 'When do they meet?') // ['11:13', '177.8']
 * @internal
 */
export function contentTerms(text: string, prompt: string): string[] {
  const asked = wordsAndNumbers(prompt)
  return [...wordsAndNumbers(text)].filter(
    (term) => (term.length >= 3 || (term.length >= 2 && /\d/.test(term))) && !asked.has(term),
  )
}

/**
 * What a model asked to focus on facts would do with two answers: name the content one has and the other lacks. The
 * side is drawn (the proposer is not told which answer is right; the search's objective keeps the side that ranks
 * the labels), then up to {@link CONTRAST_TERMS} of its terms; the heaviest factual criterion is rewritten to check
 * for them. Nothing changes when neither answer has a term of its own.
 */
function focusOnContrast(criteria: Criterion[], answers: ContrastedAnswers, random: () => number): Criterion[] {
  const top = contentTerms(answers.top, answers.prompt)
  const runnerUp = contentTerms(answers.runner_up, answers.prompt)
  const onlyTop = top.filter((term) => !runnerUp.includes(term))
  const onlyRunnerUp = runnerUp.filter((term) => !top.includes(term))
  const [first, second] = random() < 0.5 ? [onlyTop, onlyRunnerUp] : [onlyRunnerUp, onlyTop]
  const pool = first.length > 0 ? first : second
  if (pool.length === 0) return criteria
  // The most specific terms first (numbers, then longer words), a few of them drawn: what a fact check would name.
  const specific = [...pool].sort((a, b) => specificity(b) - specificity(a)).slice(0, 2 * CONTRAST_TERMS)
  const terms = shuffled(specific, random).slice(0, CONTRAST_TERMS)
  const factual = [...criteria.keys()]
    .filter((index) => criteria[index]!.criterion_type === 'factual')
    .sort((a, b) => criteria[b]!.weight - criteria[a]!.weight || a - b)[0]
  if (factual === undefined) return criteria
  const target = criteria[factual]!
  criteria[factual] = {
    ...target,
    text: `The answer gets right and states the specific points this question turns on: ${terms.join(', ')}.`,
    check_points: terms,
  }
  return criteria
}

/** How specific a term is: a number beats a word, a longer word a shorter one. */
function specificity(term: string): number {
  return (/\d/.test(term) ? 20 : 0) + term.length
}

/** A copy of `items` in an order drawn from `random` (Fisher–Yates). */
function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}

function raiseBar(criteria: Criterion[]): Criterion[] {
  const order = [...criteria.keys()].sort((a, b) => criteria[b]!.weight - criteria[a]!.weight || a - b)
  const target = order.find(
    (index) =>
      !criteria[index]!.text.endsWith(RAISE_SUFFIX) && criteria[index]!.text.length + RAISE_SUFFIX.length <= 4_000,
  )
  if (target !== undefined) {
    const item = criteria[target]!
    item.text = item.text.replace(/[.。\s]+$/u, '') + RAISE_SUFFIX
    item.weight *= 1.2
    return criteria
  }
  // Every criterion is already raised: ask for evidence explicitly, or weigh the top one up.
  const top = criteria[order[0]!]!
  if (!top.check_points.includes('concrete evidence')) top.check_points.push('concrete evidence')
  else top.weight *= 1.2
  return criteria
}

function decompose(criteria: Criterion[], random: () => number): Criterion[] {
  const index = criteria.reduce((best, item, i) => (item.text.length > criteria[best]!.text.length ? i : best), 0)
  const item = criteria[index]!
  const [left, right] = splitText(item.text)
  const base = item.criterion_id.replace(/_d\d+$/, '')
  const taken = new Set(criteria.map((c) => c.criterion_id))
  const ids: string[] = []
  for (let n = 1; ids.length < 2; n++) if (!taken.has(`${base}_d${n}`)) ids.push(`${base}_d${n}`)
  const weight = Math.max(0.01, item.weight / 2)
  const first: Criterion = { ...structuredClone(item), criterion_id: ids[0]!, text: left, weight }
  const second: Criterion = { ...structuredClone(item), criterion_id: ids[1]!, text: right, weight }
  if (random() < 0.4 && !first.check_points.includes('example')) first.check_points.push('example')
  return [...criteria.slice(0, index), first, second, ...criteria.slice(index + 1)]
}

/** A criterion's text in two: at the first " and ", else at the space nearest the middle, else at the middle. */
function splitText(text: string): [string, string] {
  const tidy = (part: string) =>
    part
      .trim()
      .replace(/^[,;:]\s*/, '')
      .replace(/[,;:]\s*$/, '')
  const and = text.indexOf(' and ')
  let parts: [string, string]
  if (and > 0) {
    parts = [tidy(text.slice(0, and)), tidy(text.slice(and + 5))]
  } else {
    const middle = Math.floor(text.length / 2)
    const spaces = [...text.matchAll(/\s/g)].map((match) => match.index!)
    const cut = spaces.length
      ? spaces.reduce((best, at) => (Math.abs(at - middle) < Math.abs(best - middle) ? at : best))
      : middle
    parts = [tidy(text.slice(0, cut)), tidy(text.slice(cut))]
  }
  if (!parts[0] || !parts[1]) return [`${text} (part 1)`, `${text} (part 2)`]
  return parts
}

function factualFocus(criteria: Criterion[]): Criterion[] {
  const before = normalisedWeights(criteria.map((item) => item.weight))
  const focused = criteria.map((item) => ({
    ...item,
    weight: item.weight * (item.criterion_type === 'factual' || item.criterion_type === 'reasoning' ? 1.25 : 0.9),
  }))
  const after = normalisedWeights(focused.map((item) => item.weight))
  if (after.some((weight, index) => Math.abs(weight - before[index]!) > 1e-9) || criteria.length >= MAX_CRITERIA)
    return focused
  return [
    ...focused,
    criterion({
      criterion_id: freeId(criteria, 'factual'),
      text: 'Every factual claim in the answer is accurate and checkable; nothing is invented.',
      weight: 0.2,
      criterion_type: 'factual',
    }),
  ]
}

function strengthenOrAdd(
  criteria: Criterion[],
  prefix: string,
  pool: readonly string[],
  list: 'negative_examples' | 'check_points',
  make: () => Criterion,
): Criterion[] {
  const existing = criteria.find((item) => item.criterion_id === prefix || item.criterion_id.startsWith(`${prefix}_`))
  if (existing) {
    const missing = pool.find((entry) => !existing[list].includes(entry))
    if (missing) existing[list].push(missing)
    existing.weight *= 1.2
    return criteria
  }
  if (criteria.length >= MAX_CRITERIA) {
    // No room for another criterion: the lowest-weighted one takes on the new role.
    const lowest = criteria.reduce((best, item, i) => (item.weight < criteria[best]!.weight ? i : best), 0)
    return criteria.map((item, i) =>
      i === lowest ? { ...make(), criterion_id: freeId(criteria, prefix), weight: item.weight } : item,
    )
  }
  return [...criteria, { ...make(), criterion_id: freeId(criteria, prefix) }]
}

function perturbWeights(criteria: Criterion[], random: () => number): Criterion[] {
  return criteria.map((item) => ({ ...item, weight: Math.max(0.01, item.weight * (1 + (-0.15 + 0.35 * random()))) }))
}

/** `<prefix>_<n>` with the smallest n ≥ 1 no criterion uses. */
function freeId(criteria: readonly Criterion[], prefix: string): string {
  const taken = new Set(criteria.map((item) => item.criterion_id))
  for (let n = 1; ; n++) if (!taken.has(`${prefix}_${n}`)) return `${prefix}_${n}`
}

/**
 * The mock proposer's reply: the criteria mutated in the input's mode with a PRNG seeded by its seed.
 * @example answerSearchPropose({ prompt, criteria, mode: 'anti_fluff', top, runner_up, seed: 7 })
 */
export function answerSearchPropose(task: SearchProposeInput): unknown {
  return {
    rubric: {
      criteria: mutateCriteria(task.criteria, task.mode, seededRandom('search-propose', task.seed, task.mode), task),
    },
  }
}

// ---------------------------------------------------------------------------------------------
// verifier

/**
 * autosr's HeuristicVerifier on the integer scale 0..gradeMax, per criterion: a negative example present → 0; else
 * with check points, gradeMax × (hits ÷ half the check points, rounded up), capped at gradeMax; else gradeMax ×
 * words/50, capped. Rounded to integers. A check point or negative example counts only where the answer states it
 * whole (`mentions`: "20" is not in "2006", "1." not in "1.67"), as a judge reading the criterion would. Then, per
 * criterion in order, a draw below `noise` flips the grade (g → gradeMax − g); noise 0 is fully deterministic.
 * @example heuristicGrades('First, because…', criteria, 10, seededRandom('v', 7, 0), 0) // { task_fit: 5, structure: 5,
 *   … }
 */
export function heuristicGrades(
  answer: string,
  criteria: readonly Criterion[],
  gradeMax: number,
  random: () => number,
  noise: number,
): Record<string, number> {
  const text = answer.toLowerCase()
  const words = answer.split(/\s+/).filter(Boolean).length
  const grades: Record<string, number> = {}
  for (const item of criteria) {
    let fraction: number
    if (item.negative_examples.some((example) => mentions(text, example))) fraction = 0
    else if (item.check_points.length > 0) {
      const hits = item.check_points.filter((point) => mentions(text, point)).length
      fraction = Math.min(1, hits / Math.ceil(item.check_points.length / 2))
    } else fraction = Math.min(1, words / 50)
    let grade = Math.round(fraction * gradeMax)
    if (random() < noise) grade = gradeMax - grade
    grades[item.criterion_id] = grade
  }
  return grades
}

/**
 * The mock verifier's reply: heuristic grades, the noise drawn from a PRNG seeded by the input's seed and vote.
 * @example answerSearchVerify({ prompt, answer, criteria, grade_max: 10, allow_na: true, vote: 0, seed: 7, noise: 0 })
 */
export function answerSearchVerify(task: SearchVerifyInput): unknown {
  return {
    grades: heuristicGrades(
      task.answer,
      task.criteria,
      task.grade_max,
      seededRandom('search-verify', task.seed, task.vote),
      task.noise,
    ),
  }
}

// ---------------------------------------------------------------------------------------------
// judge

/**
 * A label-free quality proxy for an answer: length (min(0.08, words/2000), as autosr) plus a little for
 * structure (list items, paragraphs), minus boilerplate. The same for either position, so a judge built on it
 * is always position-consistent.
 * @example textStructureScore('1. Check the logs.\n2. Bisect the change.') > textStructureScore('Check stuff.') // true
 */
export function textStructureScore(text: string): number {
  const words = text.split(/\s+/).filter(Boolean).length
  const items = (text.match(/^\s*(?:[-*•]|\d+[.)])\s+\S/gmu) ?? []).length
  const paragraphs = text.split(/\n\s*\n/).filter((part) => part.trim() !== '').length
  const boilerplate = /as an ai language model|i cannot provide|i hope this helps/i.test(text) ? 0.05 : 0
  return Math.min(0.08, words / 2000) + 0.01 * Math.min(3, items) + (paragraphs >= 2 ? 0.005 : 0) - boilerplate
}

/**
 * The mock judge's reply: the answer with the higher `textStructureScore` wins; a tie within 1e-9.
 * @example answerSearchJudge({ prompt, first: 'a', second: 'a longer answer' }) // { winner: 'B', … }
 */
export function answerSearchJudge(task: SearchJudgeInput): unknown {
  const delta = textStructureScore(task.first) - textStructureScore(task.second)
  const winner = Math.abs(delta) < 1e-9 ? 'tie' : delta > 0 ? 'A' : 'B'
  return { winner, reason: `heuristic: length and structure (${delta >= 0 ? '+' : ''}${delta.toFixed(4)})` }
}
