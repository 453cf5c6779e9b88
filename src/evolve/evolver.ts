/**
 * The evolution roles over a judge library (RewardHarness §3.5–3.6): the Chain Analyzer reads judged training
 * chains (tool observations included) against their labels and proposes signals; the Evolver turns the signals
 * into ONE change (add / modify / delete) that the pipeline applies, validates and keeps or rolls back.
 * Also the data helpers: pairwise items from a preference dataset, a seeded split, A/B swap augmentation.
 */
import { z } from 'zod'
import { dataBoundary, parseReplyAs } from '../agents/run-agent.ts'
import { addEntry, deleteEntry, entryList, type Library, type LibraryEntry, modifyEntry } from '../library/index.ts'
import { jsonMockReply } from '../llm/mock.ts'
import type { ChatModel } from '../llm/types.ts'
import { answerLibraryAnalyze, answerLibraryEvolve } from './mock.ts'
import type { LibraryChainResult, LibraryEntrySummary } from './views.ts'
import { renderPrompt } from '../prompts/index.ts'
import type { PreferenceDataset } from '../search/types.ts'
import { ImageRegistry, itemImages, swapImages } from './images.ts'
import { askParsed, callTool, type JudgeOptions, type PairItem } from './judge.ts'
import { seededRandom, shuffle } from '../hash/index.ts'

// ---------------------------------------------------------------------------------------------
// Data

/**
 * The pairwise items of a preference dataset: prompts with exactly two candidates whose ranks differ (rank 1 is
 * better) or are equal (tie). Other prompts are skipped. The first candidate is A. Images (`metadata.images` of the
 * prompt and candidates) are registered in `images` and the items keep their handles.
 * @example pairItems(dataset).length // 12
 */
export function pairItems(dataset: PreferenceDataset, images: ImageRegistry = new ImageRegistry()): PairItem[] {
  const items: PairItem[] = []
  for (const prompt of dataset.prompts) {
    const [a, b] = prompt.candidates
    if (prompt.candidates.length !== 2 || !a || !b || a.label.rank === undefined || b.label.rank === undefined) continue
    const label = a.label.rank === b.label.rank ? 'tie' : a.label.rank < b.label.rank ? 'A' : 'B'
    const handles = itemImages(images, prompt.metadata, a.metadata, b.metadata)
    items.push({
      id: prompt.prompt_id,
      instruction: prompt.prompt,
      first: a.text,
      second: b.text,
      label,
      ...(handles ? { images: handles } : {}),
      ...(prompt.reference === undefined ? {} : { reference: prompt.reference }),
    })
  }
  return items
}

/**
 * A seeded shuffle, then the first `round(n × valFraction)` items (at least 1, leaving at least 1 to train) are
 * validation and the rest training.
 * @example const { train, validation } = splitItems(items, 42, 0.34)
 */
export function splitItems(
  items: readonly PairItem[],
  seed: number,
  valFraction: number,
): { train: PairItem[]; validation: PairItem[] } {
  const shuffled = shuffle(items, seededRandom(seed))
  const nVal = Math.min(Math.max(1, Math.round(shuffled.length * valFraction)), Math.max(0, shuffled.length - 1))
  return { validation: shuffled.slice(0, nVal), train: shuffled.slice(nVal) }
}

/**
 * The items plus a copy of each with A and B exchanged and the label flipped (`tie` stays); ids get `#swap`.
 * @example swapAugment([item]).length // 2
 */
export function swapAugment(items: readonly PairItem[]): PairItem[] {
  const flip = { A: 'B', B: 'A', tie: 'tie' } as const
  return [
    ...items,
    ...items.map((item) => ({
      id: `${item.id}#swap`,
      instruction: item.instruction,
      first: item.second,
      second: item.first,
      label: flip[item.label],
      ...(item.images ? { images: swapImages(item.images)! } : {}),
    })),
  ]
}

// ---------------------------------------------------------------------------------------------
// Chain Analyzer

const Signal = z.object({
  kind: z.string(),
  entry: z.string().default(''),
  evidence: z.string().default(''),
  suggestion: z.string().default(''),
})
const AnalyzerReply = z.object({ signals: z.array(Signal).default([]), summary: z.string().default('') })
export type Analysis = z.infer<typeof AnalyzerReply>

const summaries = (library: Library): LibraryEntrySummary[] =>
  entryList(library).map(({ name, kind, description }) => ({ name, kind, description }))

/**
 * One analyzer call over the judged training chains. Throws an LlmError when the model fails after retries.
 * @example const { signals, summary } = await analyzeChains(model, lib, results)
 */
export async function analyzeChains(
  model: ChatModel,
  library: Library,
  allResults: readonly LibraryChainResult[],
  options: JudgeOptions & { maxChains?: number } = {},
): Promise<Analysis> {
  const locale = options.locale ?? 'en'
  const entries = summaries(library)
  const results = selectChains(allResults, options.maxChains ?? 60)
  const text = results
    .map(
      (result) =>
        `### ${result.id}: ${result.correct ? 'CORRECT' : 'INCORRECT'} (label ${result.label}, prediction ` +
        `${predictionText(result.prediction)})\nInstruction: ${result.instruction}\n${result.chain}`,
    )
    .join('\n\n')
  const entriesText = entries.length
    ? entries.map((entry) => `- ${entry.name} (${entry.kind}): ${entry.description}`).join('\n')
    : '(empty)'
  const boundary = await dataBoundary(entriesText, text)
  return askParsed(
    model,
    {
      role: 'judge',
      messages: [
        { role: 'system', content: renderPrompt(locale, 'library-analyzer.system', {}) },
        {
          role: 'user',
          content: renderPrompt(locale, 'library-analyzer.user', {
            boundary,
            entries: entriesText,
            results: text,
            correct: results.filter((result) => result.correct).length,
            total: results.length,
          }),
        },
      ],
      task: 'library_analyze',
      json: true,
      mock: jsonMockReply(answerLibraryAnalyze, { entries, results: [...results] }),
    },
    (reply) => parseReplyAs(AnalyzerReply, reply, 'chain analyzer'),
    options.retry,
  )
}

/** A prediction as the analyzer reads it; `inconsistent` says the two orders disagreed (position bias). */
function predictionText(prediction: string | null): string {
  if (prediction === null) return 'FAILED'
  return prediction === 'inconsistent' ? 'INCONSISTENT: the A/B and B/A orders disagreed' : prediction
}

/**
 * At most `max` chains for the analyzer: every incorrect one first (in order), then correct ones, so one call
 * stays bounded on a large training set while no error goes unseen unless there are more than `max` of them.
 * @example selectChains(results, 60).length <= 60 // true
 * @internal
 */
export function selectChains(results: readonly LibraryChainResult[], max: number): LibraryChainResult[] {
  const wrong = results.filter((result) => !result.correct)
  const right = results.filter((result) => result.correct)
  return [...wrong, ...right].slice(0, Math.max(0, max))
}

// ---------------------------------------------------------------------------------------------
// Evolver

const NewEntry = z.object({
  name: z.string(),
  kind: z.enum(['skill', 'tool']),
  description: z.string(),
  when_to_use: z.string().optional(),
  body: z.string(),
})
const ChangeReply = z.discriminatedUnion('op', [
  z.object({ op: z.literal('add'), entry: NewEntry, rationale: z.string().default('') }),
  z.object({
    op: z.literal('modify'),
    name: z.string(),
    description: z.string().optional(),
    when_to_use: z.string().optional(),
    body: z.string().optional(),
    rationale: z.string().default(''),
  }),
  z.object({ op: z.literal('delete'), name: z.string(), rationale: z.string().default('') }),
  z.object({ op: z.literal('none'), rationale: z.string().default('') }),
])
export type LibraryChange = z.infer<typeof ChangeReply>

/**
 * A short stable key of a change (`add <name>`, `modify <name>`, `delete <name>`, `none`), for the log and the
 * list of rolled-back changes the Evolver is told not to repeat.
 * @example changeKey({ op: 'delete', name: 'x', rationale: '' }) // 'delete x'
 */
export function changeKey(change: LibraryChange): string {
  return change.op === 'none' ? 'none' : `${change.op} ${change.op === 'add' ? change.entry.name : change.name}`
}

/**
 * One Evolver call: a change proposed from the analyzer's signals. Throws an LlmError after retries.
 * @example const change = await proposeChange(model, lib, analysis.signals, ['add bad-skill'])
 */
export async function proposeChange(
  model: ChatModel,
  library: Library,
  signals: readonly unknown[],
  rejected: readonly string[],
  options: JudgeOptions = {},
): Promise<LibraryChange> {
  const locale = options.locale ?? 'en'
  const entries = summaries(library)
  const entriesText =
    entryList(library)
      .map((entry) => `## ${entry.name} (${entry.kind}): ${entry.description}\n${entry.body}`)
      .join('\n') || '(empty)'
  const signalsText = JSON.stringify(signals, null, 2)
  const rejectedText = rejected.length ? rejected.join('\n') : '(none)'
  const boundary = await dataBoundary(entriesText, signalsText, rejectedText)
  return askParsed(
    model,
    {
      role: 'judge',
      messages: [
        { role: 'system', content: renderPrompt(locale, 'library-evolver.system', {}) },
        {
          role: 'user',
          content: renderPrompt(locale, 'library-evolver.user', {
            boundary,
            entries: entriesText,
            signals: signalsText,
            rejected: rejectedText,
          }),
        },
      ],
      task: 'library_evolve',
      json: true,
      mock: jsonMockReply(answerLibraryEvolve, { entries, signals: [...signals], rejected: [...rejected] }),
    },
    (reply) => parseReplyAs(ChangeReply, reply, 'evolver'),
    options.retry,
  )
}

/**
 * The library after `change` (a new object; `library` is untouched). Throws a LibraryError for an invalid change
 * (bad name, existing name on add, unknown name on modify/delete).
 * @example applyChange(lib, { op: 'delete', name: 'x', rationale: '' })
 */
export function applyChange(library: Library, change: LibraryChange): Library {
  switch (change.op) {
    case 'add': {
      const entry: LibraryEntry = {
        name: change.entry.name,
        kind: change.entry.kind,
        description: change.entry.description,
        body: change.entry.body,
      }
      if (change.entry.when_to_use) entry.when_to_use = change.entry.when_to_use
      return addEntry(library, entry)
    }
    case 'modify':
      return modifyEntry(library, change.name, {
        description: change.description,
        when_to_use: change.when_to_use,
        body: change.body,
      })
    case 'delete':
      return deleteEntry(library, change.name)
    case 'none':
      return library
  }
}

// ---------------------------------------------------------------------------------------------
// Tool-prompt check

/** What exercising a tool's prompt on sample items gave. */
export interface ToolCheck {
  tool: string
  /** Sub-calls made (one per sampled item). */
  sampled: number
  /** Replies that parsed as JSON. */
  json: number
  passed: boolean
  /** Up to 3 of the other observations (cut), to say why it failed. */
  examples: string[]
}

const PROBE_QUERY: Record<NonNullable<JudgeOptions['locale']>, string> = {
  en: 'Check the two answers against the instruction and report what you find.',
  zh: '对照指令检查两个答案，并报告你的发现。',
}

/**
 * The tools a change adds, or whose prompt (body) it changes: the ones the tool-prompt check must exercise.
 * @example toolsToCheck(lib, { op: 'add', entry: { name: 'ocr', kind: 'tool', … }, rationale: '' }) // ['ocr']
 */
export function toolsToCheck(before: Library, change: LibraryChange): string[] {
  if (change.op === 'add') return change.entry.kind === 'tool' ? [change.entry.name] : []
  if (change.op !== 'modify' || change.body === undefined) return []
  const entry = before.entries[change.name]
  return entry?.kind === 'tool' && entry.body.trim() !== change.body.trim() ? [change.name] : []
}

/**
 * The tool-prompt check (RewardHarness §3.7, made a gate): before a new or modified tool prompt is validated, it runs
 * as a real sub-call on `sample` items (their texts and images, a neutral probe query); it passes when at least
 * `minJsonShare` of the replies are JSON. A tool that fails is rejected without spending a validation run.
 * @example const check = await checkToolPrompt(model, candidate, 'coverage-check', train.slice(0, 4)); check.passed //
 *   true
 */
export async function checkToolPrompt(
  model: ChatModel,
  library: Library,
  tool: string,
  items: readonly PairItem[],
  options: JudgeOptions & { minJsonShare?: number } = {},
): Promise<ToolCheck> {
  const query = PROBE_QUERY[options.locale ?? 'en']
  const calls = await Promise.all(items.map((item) => callTool(model, library, tool, tool, item, query, options)))
  const json = calls.filter((call) => call.status === 'json').length
  const passed = items.length > 0 && json / items.length >= (options.minJsonShare ?? 0.8)
  const examples = calls
    .filter((call) => call.status !== 'json')
    .slice(0, 3)
    .map((call) => call.observation.slice(0, 300))
  return { tool, sampled: items.length, json, passed, examples }
}
