/**
 * The mock backend's answers for the judge library and its evolution (src/evolve): deterministic heuristics in
 * the same JSON a real model is asked for, so the sub-agent's turn loop, tool sub-calls, analyzer and evolver
 * run through their real parsers.
 * - route: entries sharing a content word with the instruction; all of them when none does.
 * - judge: calls the first routed tool once when it has one, then answers. Without a coverage skill or a tool
 *   observation it prefers the longer, more structured answer (`textStructureScore`); with one it prefers the
 *   answer that covers more of the instruction's content words.
 * - tool: coverage of the instruction's words by each answer, and which answer it favours.
 * - analyze: missing-skill / missing-tool signals from the incorrect chains.
 * - evolve: adds `instruction-coverage` (skill), then `coverage-check` (tool); never repeats a rejected change.
 */
import { textStructureScore } from '../search/roles/mock.ts'
import type { LibraryChainResult, LibraryEntrySummary } from './views.ts'

/** What the mock router reads: entries to use for an instruction (never the answers). */
export interface LibraryRouteInput {
  instruction: string
  entries: LibraryEntrySummary[]
}

/** What the mock sub-agent reads in one turn: the routed skills and tools, and earlier tool observations. */
export interface LibraryJudgeInput {
  instruction: string
  first: string
  second: string
  skills: { name: string; body: string }[]
  tools: { name: string; when_to_use: string }[]
  observations: { tool: string; text: string }[]
  max_tool_calls: number
}

/** What a mock library tool reads: the instruction and the two answers the sub-agent saw. */
export interface LibraryToolInput {
  instruction: string
  first: string
  second: string
}

/** What the mock chain analyzer reads: judged training pairs with their chains, against the labels. */
export interface LibraryAnalyzeInput {
  entries: LibraryEntrySummary[]
  results: LibraryChainResult[]
}

/** What the mock evolver reads: the analyzer's signals; `rejected` are changes already rolled back. */
export interface LibraryEvolveInput {
  entries: LibraryEntrySummary[]
  signals: unknown[]
  rejected: string[]
}

const STOP = new Set(
  (
    'a an the and or but of to in on at for with by is are was were be been it this that as from what which who how ' +
    'why ' +
    'when where do does can should would will not no your you i me my write give explain'
  ).split(' '),
)

function words(text: string): Set<string> {
  return new Set(
    (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter((word) => word.length > 2 && !STOP.has(word)),
  )
}

/**
 * Share of the instruction's content words that appear in `text` (0 when the instruction has none).
 * @example instructionCoverage('name three rivers', 'The Nile, the Amazon and the Danube are rivers.') // 0.5
 * @internal
 */
export function instructionCoverage(instruction: string, text: string): number {
  const wanted = words(instruction)
  if (wanted.size === 0) return 0
  const have = words(text)
  let hit = 0
  for (const word of wanted) if (have.has(word)) hit++
  return hit / wanted.size
}

/**
 * Router: entries whose name or description shares a content word with the instruction, else all.
 * @example answerLibraryRoute({ instruction: 'x', entries: [] }) // { entries: [] }
 */
export function answerLibraryRoute(task: LibraryRouteInput): unknown {
  const wanted = words(task.instruction)
  const hits = task.entries.filter((entry) =>
    [...words(`${entry.name.replace(/-/g, ' ')} ${entry.description}`)].some((word) => wanted.has(word)),
  )
  return { entries: (hits.length > 0 ? hits : task.entries).map((entry) => entry.name) }
}

/**
 * Sub-agent turn: one tool call first when a tool is routed, then the answer.
 * @example answerLibraryJudge(task) // { think: '…', answer: { preference: 'B', reason: '…' } }
 */
export function answerLibraryJudge(task: LibraryJudgeInput): unknown {
  const tool = task.tools[0]
  if (tool && task.observations.length === 0 && task.max_tool_calls > 0) {
    return {
      think: `I will ask ${tool.name} which answer covers the instruction.`,
      tool: { name: tool.name, query: 'Which answer covers more of what the instruction asks?' },
    }
  }
  const coverageMode = task.skills.some((skill) => /coverage/i.test(skill.body))
  let a = coverageMode
    ? instructionCoverage(task.instruction, task.first) + 0.1 * textStructureScore(task.first)
    : textStructureScore(task.first)
  let b = coverageMode
    ? instructionCoverage(task.instruction, task.second) + 0.1 * textStructureScore(task.second)
    : textStructureScore(task.second)
  for (const observation of task.observations) {
    const favours = /"favours"\s*:\s*"(A|B)"/.exec(observation.text)?.[1]
    if (favours === 'A') a += 0.5
    if (favours === 'B') b += 0.5
  }
  const preference = Math.abs(a - b) < 1e-9 ? 'tie' : a > b ? 'A' : 'B'
  const basis = coverageMode || task.observations.length > 0 ? 'instruction coverage' : 'length and structure'
  return {
    think: `Compared by ${basis}: A ${a.toFixed(3)}, B ${b.toFixed(3)}.`,
    answer: { preference, reason: `higher ${basis}` },
  }
}

/**
 * Tool sub-call: instruction coverage of each answer.
 * @example answerLibraryTool(task) // { coverage_a: 0.5, coverage_b: 0.25, favours: 'A' }
 */
export function answerLibraryTool(task: LibraryToolInput): unknown {
  const coverageA = instructionCoverage(task.instruction, task.first)
  const coverageB = instructionCoverage(task.instruction, task.second)
  return {
    coverage_a: Number(coverageA.toFixed(3)),
    coverage_b: Number(coverageB.toFixed(3)),
    favours: coverageA === coverageB ? 'tie' : coverageA > coverageB ? 'A' : 'B',
  }
}

/**
 * Chain analyzer: signals from the incorrect chains.
 * @example answerLibraryAnalyze(task) // { signals: [{ kind: 'missing_skill', … }], summary: '…' }
 */
export function answerLibraryAnalyze(task: LibraryAnalyzeInput): unknown {
  const wrong = task.results.filter((result) => !result.correct)
  const signals: unknown[] = []
  if (wrong.length > 0) {
    const lengthChains = wrong.filter((result) => /length and structure/.test(result.chain)).length
    if (!task.entries.some((entry) => entry.kind === 'skill' && /coverage/.test(entry.name))) {
      signals.push({
        kind: 'missing_skill',
        entry: '',
        evidence: `${lengthChains} of ${wrong.length} wrong verdicts were decided by length and structure`,
        suggestion: 'judge by how much of the instruction each answer covers',
      })
    }
    if (!task.entries.some((entry) => entry.kind === 'tool')) {
      signals.push({
        kind: 'missing_tool',
        entry: '',
        evidence: `${wrong.length} wrong verdicts`,
        suggestion: 'a tool that measures instruction coverage of each answer',
      })
    }
  }
  return {
    signals,
    summary: `${task.results.length - wrong.length} of ${task.results.length} correct; ${signals.length} signals`,
  }
}

/**
 * Evolver: the first signal's change that has not been rolled back before.
 * @example answerLibraryEvolve(task) // { op: 'add', entry: { name: 'instruction-coverage', kind: 'skill', … } }
 */
export function answerLibraryEvolve(task: LibraryEvolveInput): unknown {
  const kinds = task.signals.map((signal) =>
    typeof signal === 'object' && signal !== null ? (signal as { kind?: unknown }).kind : undefined,
  )
  const rejected = new Set(task.rejected)
  if (kinds.includes('missing_skill') && !rejected.has('add instruction-coverage')) {
    return {
      op: 'add',
      entry: {
        name: 'instruction-coverage',
        kind: 'skill',
        description: 'Prefer the answer that covers what the instruction asks',
        body:
          'Judge by instruction coverage: the better answer addresses every part the instruction asks for. Length ' +
          'and formatting are not merits by themselves.',
      },
      rationale: 'wrong verdicts followed length',
    }
  }
  if (kinds.includes('missing_tool') && !rejected.has('add coverage-check')) {
    return {
      op: 'add',
      entry: {
        name: 'coverage-check',
        kind: 'tool',
        description: 'Measures how much of the instruction each answer covers',
        when_to_use: 'When the answers differ in which parts of the instruction they address',
        body:
          'You measure instruction coverage. Reply with JSON {"coverage_a": number, "coverage_b": number, ' +
          '"favours": "A" | "B" | "tie"}.',
      },
      rationale: 'no tool checks coverage',
    }
  }
  return { op: 'none', rationale: 'no actionable signal' }
}
