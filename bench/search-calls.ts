/**
 * LLM calls of a rubric search on autosr's demo configuration — 3 prompts × 6 candidates (examples/demo.json),
 * default settings, mock backend — per role, against autosr's measured 4,320 verifier + 642 judge calls
 * (+ 237 proposer) for the same configuration (reference autosr.md §8.5). Target: verifier + judge ≤ 1/10.
 *
 *   npx tsx bench/search-calls.ts
 *
 * The search runs with the CLI's wiring (mock backend → reply cache in a fresh temp dir → counted per-role
 * models → createSearchRoles → runSearch), so "calls" are what would reach an LLM server: cache misses.
 * Besides the headline row (the demo as it is: fully ranked, so the judge is the label judge and makes no LLM
 * call), two rows show the other cases an honest comparison needs: the labels stripped (the LLM pair judge,
 * both orders of every pair) and autosr's 3 verifier votes per candidate. A breakdown shows where the calls go.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadDataset } from '../offline/datasets/load.ts'
import { createBackend } from '../offline/search/backend.ts'
import { SearchModels } from '../offline/search/models.ts'
import { parseSearchConfig, runSearch, type SearchConfigInput } from '../src/search/index.ts'
import { rubricKey } from '../src/search/evaluator.ts'
import { createSearchRoles } from '../src/search/roles/index.ts'
import type { PreferenceDataset } from '../src/search/types.ts'
import type { ChatModel, ChatRequest } from '../src/llm/types.ts'

const AUTOSR = { verifier: 4_320, judge: 642, proposer: 237 }
const COMMAND = 'npx tsx bench/search-calls.ts'

interface Row {
  name: string
  calls: Record<'initializer' | 'proposer' | 'verifier' | 'judge', number>
  cacheHits: number
  engine: {
    verifier_calls: number
    grade_memo_hits: number
    judge_calls: number
    judge_memo_hits: number
    proposer_calls: number
  }
  judge: string
  distinctRubrics: Record<string, number>
  /** How many distinct rubric contents were graded with 1, 2, 3, … votes (successive halving grades cheap first). */
  votesHistogram: Record<number, number>
  generations: number[]
  stopReasons: string[]
  seconds: number
  /** Proposer calls that reached the model with the messages of an earlier proposer call (only the seed differed). */
  repeatedProposerQuestions: number
}

/**
 * Wraps each distinct backend model once so that every call reaching it (a reply-cache miss) is seen; returns the
 * per-role models over the wrappers and the number of proposer calls that repeated an earlier question word for word.
 */
function watchRepeats(models: Record<string, ChatModel>) {
  const asked = new Set<string>()
  const counter = { repeated: 0 }
  const wrappers = new Map<ChatModel, ChatModel>()
  // Counted as for a real model at temperature 0 (a question asked again is answered from the cache, whatever the
  // seed), though the mock, which samples by the seed, declares no sampling settings of its own.
  const sampling = (model: ChatModel) => ('sampling' in model ? model.sampling : { temperature: 0, max_tokens: 2048 })
  const wrap = (model: ChatModel): ChatModel =>
    Object.assign(
      {
        id: model.id,
        complete: (request: ChatRequest) => {
          if (request.role === 'proposer') {
            const question = JSON.stringify(request.messages)
            if (asked.has(question)) counter.repeated++
            asked.add(question)
          }
          return model.complete(request)
        },
      },
      { sampling: sampling(model) },
    )
  for (const model of new Set(Object.values(models))) wrappers.set(model, wrap(model))
  const watched = Object.fromEntries(Object.entries(models).map(([role, model]) => [role, wrappers.get(model)!]))
  return { models: watched as typeof models, counter }
}

async function measure(
  name: string,
  dataset: PreferenceDataset,
  options: { config?: SearchConfigInput; llmJudge?: boolean } = {},
): Promise<Row> {
  const config = parseSearchConfig(options.config ?? {})
  const cacheDir = mkdtempSync(join(tmpdir(), 'search-calls-'))
  const backend = await createBackend({
    backend: 'mock',
    endpoints: [],
    models: {},
    maxConcurrency: 4,
    temperature: 0,
    maxTokens: 2048,
    timeoutMs: 60_000,
    maxAttempts: 4,
    seed: config.seed,
    mockNoise: 0,
  })
  const watched = watchRepeats(backend.models)
  const models = await SearchModels.open({ models: watched.models, cacheDir })
  try {
    // `llm` makes the pair judge an LLM (answered by the mock) when labels are missing; the CLI's mock backend would
    // use the heuristic judge.
    const roles = createSearchRoles({
      modelsByRole: models.byRole(),
      backend: options.llmJudge ? 'llm' : 'mock',
      dataset,
    })
    // Which rubric contents the verifier graded, per prompt, and with how many votes each.
    const rubricsByPrompt = new Map<string, Map<string, number>>()
    const verifier = roles.verifier
    const counted = {
      ...roles,
      verifier: {
        grade: (input: Parameters<typeof verifier.grade>[0]) => {
          const seen = rubricsByPrompt.get(input.item.prompt_id) ?? new Map<string, number>()
          const key = rubricKey(input.rubric)
          seen.set(key, Math.max(seen.get(key) ?? 0, input.vote + 1))
          rubricsByPrompt.set(input.item.prompt_id, seen)
          return verifier.grade(input)
        },
      },
    }
    const started = performance.now()
    const result = await runSearch(dataset, counted, config)
    const usage = models.usage()
    return {
      name,
      calls: {
        initializer: usage.roles.initializer.calls,
        proposer: usage.roles.proposer.calls,
        verifier: usage.roles.verifier.calls,
        judge: usage.roles.judge.calls,
      },
      cacheHits: usage.total.cache_hits,
      engine: result.stats,
      judge: roles.judgeChoice.kind,
      distinctRubrics: Object.fromEntries([...rubricsByPrompt].map(([id, keys]) => [id, keys.size])),
      votesHistogram: [...rubricsByPrompt.values()]
        .flatMap((keys) => [...keys.values()])
        .reduce<Record<number, number>>((histogram, votes) => {
          histogram[votes] = (histogram[votes] ?? 0) + 1
          return histogram
        }, {}),
      generations: result.output!.best_rubrics.map((entry) => entry.generations_run),
      stopReasons: [...new Set(result.output!.best_rubrics.map((entry) => entry.stop_reason))],
      seconds: (performance.now() - started) / 1000,
      repeatedProposerQuestions: watched.counter.repeated,
    }
  } finally {
    await models.close()
    rmSync(cacheDir, { recursive: true, force: true })
  }
}

const { dataset } = await loadDataset(join(import.meta.dirname, '../examples/demo.json'))
const unlabelled: PreferenceDataset = {
  prompts: dataset.prompts.map((item) => ({
    ...item,
    candidates: item.candidates.map((candidate) => ({ ...candidate, label: {} })),
  })),
}

const rows = [
  await measure('demo.json, defaults (headline)', dataset),
  await measure('demo.json, labels stripped (LLM judge)', unlabelled, { llmJudge: true }),
  await measure('demo.json, --num-votes 3 (autosr votes)', dataset, { config: { num_votes: 3 } }),
]

const fmt = (value: number) => value.toLocaleString('en-US')
const autosrVj = AUTOSR.verifier + AUTOSR.judge
const table: string[][] = [
  ['run', 'initializer', 'proposer', 'verifier', 'judge', 'verifier+judge', 'ratio vs autosr', 'target ≤ 1/10'],
  [
    'autosr (measured, §8.5)',
    '-',
    fmt(AUTOSR.proposer),
    fmt(AUTOSR.verifier),
    fmt(AUTOSR.judge),
    fmt(autosrVj),
    '1',
    '',
  ],
  ...rows.map((row) => {
    const vj = row.calls.verifier + row.calls.judge
    const ratio = vj / autosrVj
    return [
      row.name,
      fmt(row.calls.initializer),
      fmt(row.calls.proposer),
      fmt(row.calls.verifier),
      fmt(row.calls.judge),
      fmt(vj),
      `${ratio.toFixed(3)} (1/${(1 / ratio).toFixed(1)})`,
      ratio <= 0.1 ? 'met' : 'NOT met',
    ]
  }),
]
const widths = table[0]!.map((_, column) => Math.max(...table.map((line) => line[column]!.length)))
console.log(
  `LLM calls of a rubric search on autosr's demo configuration (3 prompts × 6 candidates, default settings, mock ` +
    `backend)`,
)
console.log(`command: ${COMMAND}\n`)
for (const [index, line] of table.entries()) {
  console.log(
    line
      .map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!)))
      .join('  '),
  )
  if (index === 0) console.log(widths.map((width) => '-'.repeat(width)).join('  '))
}

console.log('\nwhere the calls go')
for (const row of rows) {
  const distinct = Object.values(row.distinctRubrics).reduce((sum, count) => sum + count, 0)
  const histogram = Object.entries(row.votesHistogram).sort(([a], [b]) => Number(a) - Number(b))
  const questions = histogram.reduce((sum, [votes, count]) => sum + Number(votes) * count * 6, 0)
  console.log(
    `- ${row.name}: judge = ${row.judge}; generations run per prompt ${row.generations.join('/')} ` +
      `(${row.stopReasons.join(', ')}); ${row.seconds.toFixed(2)} s`,
  )
  console.log(
    `    verifier: ${distinct} distinct rubric contents graded (${Object.entries(row.distinctRubrics)
      .map(([id, count]) => `${id} ${count}`)
      .join(', ')}), ` +
      `${histogram.map(([votes, count]) => `${count} with ${votes} vote${votes === '1' ? '' : 's'}`).join(', ')}; ` +
      `× 6 ` +
      `candidates = ${fmt(questions)} questions;` +
      ` ${fmt(row.engine.grade_memo_hits)} more grade lookups answered by the content memo; ${fmt(row.cacheHits)} by ` +
      `the reply cache`,
  )
  console.log(
    `    judge: ${fmt(row.engine.judge_calls)} pair judgements (${fmt(row.engine.judge_memo_hits)} memo hits) → ` +
      `${fmt(row.calls.judge)} LLM calls ` +
      (row.judge === 'llm'
        ? '(both orders of each of the 15 pairs per prompt, at most 90)'
        : '(labels are the truth: no LLM)'),
  )
  console.log(
    `    proposer: ${fmt(row.engine.proposer_calls)} proposals → ${fmt(row.calls.proposer)} LLM calls, ` +
      `${fmt(row.repeatedProposerQuestions)} of them an earlier question word for word`,
  )
}
