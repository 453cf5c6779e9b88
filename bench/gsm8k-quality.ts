/**
 * Reward quality where a real model has signal (issue 47, item 5): held-out pairs of `gsm8k-solutions` (one correct
 * and one wrong GPT-3 solution to a GSM8K test question, OpenAI's own labels), each solution judged alone and the pair
 * given to the higher score (a tie counts half). Every row runs with the reference answer shown to the judge and
 * without it. Rows (`--gsm8k-rows`):
 *
 * - `minimal`: the model asked directly, one short prompt ("is the final answer correct? Yes or No"), the score its
 *   probability of Yes (the server's `top_logprobs`): what the judge itself can do, with nothing of the harness.
 * - `rubric`: `reward-harness bench --scorer rubric:` with one criterion, "The final answer is correct.": the offline
 *   verifier's prompt on the same judge.
 * - `score`: the Worker's own `/score` on a real `wrangler dev`, on a run with the default rubric
 *   (config/default-run.json's anchors and adaptives) and the judge as its scorer, the reference as
 *   `supplemental_context`; no step closes, so the rubric stays the same for every pair.
 * - `rubric-verdicts`: the same with `bench --judging verdicts`: the criterion asked as Yes or No.
 * - `verdicts`: the same `/score` run with `judging: "verdicts"`: each criterion asked as Yes or No, its grade the
 *   judge's probability of Yes.
 * - `search`: `search` on a disjoint training slice, `export --default-rubric best`, `bench --scorer artifact:`.
 * - `search-verdicts`: the same with `search --judging verdicts` (the artifact is benched the way it was searched).
 * - `evolve`: `evolve` on a disjoint slice, `bench --scorer library:` (pairwise, both orders).
 *
 * Fidelity is `score` (and `rubric`) against `minimal` on the same pairs. Slices are the shortest pairs, dealt
 * round-robin into test, search and evolve so each has the same mix of lengths.
 */
import { execFile } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { yesShare } from '../src/agents/scorer/verdict.ts'
import { wilsonInterval } from '../src/bench/metrics.ts'
import { callJson, METADATA } from '../tests/e2e/support/http.ts'
import { startWranglerDev } from '../tests/e2e/support/wrangler-dev.ts'

const ROOT = resolve(import.meta.dirname, '..')
const CLI = join(ROOT, 'reward-harness')
export const GSM8K = resolve(ROOT, '../shared/datasets/gsm8k-solutions')

/** One line of gsm8k-solutions/pairs.jsonl. */
interface Gsm8kPair {
  id: string
  prompt: string
  reference: string
  chosen: string
  rejected: string
}

export interface Gsm8kOptions {
  dataset: string
  dir: string
  rows: string[]
  testPairs: number
  trainPairs: number
  evolvePairs: number
  concurrency: number
  /** Which variants run: with the reference shown, without it, or both (in that order). */
  references: boolean[]
  /** Writes the figures so far (the bench's report). */
  note: (figures: Record<string, unknown>) => void
  log: (line: string) => void
}

export interface Judge {
  url: string
  model: string
}

/** A row's result: pairwise accuracy over n pairs, its Wilson interval, and what a judgement cost. */
interface Row {
  row: string
  reference: boolean
  n: number
  correct: number
  ties: number
  failures: number
  accuracy: number | null
  ci95: [number, number] | null
  judgements: number
  seconds_per_judgement: number
  prompt_tokens_per_judgement?: number
  minutes: number
  error?: string
}

const CORRECTNESS = 'The final answer is correct.'

/**
 * The shortest items dealt round-robin into slices of the sizes asked (disjoint), so every slice has the same mix of
 * lengths; ties in size by id.
 * @example dealShortest(pairs, (pair) => pair.prompt.length, [60, 4, 4])[0].length // 60
 */
export function dealShortest<T>(items: T[], size: (item: T) => number, want: number[]): T[][] {
  const shortest = [...items].sort((a, b) => size(a) - size(b))
  const out: T[][] = want.map(() => [])
  let slot = 0
  for (const item of shortest) {
    if (out.every((slice, i) => slice.length >= want[i]!)) break
    while (out[slot]!.length >= want[slot]!) slot = (slot + 1) % want.length
    out[slot]!.push(item)
    slot = (slot + 1) % want.length
  }
  return out
}

/** The held-out slices of gsm8k pairs: test, search and evolve. */
function slices(pairs: Gsm8kPair[], test: number, search: number, evolve: number) {
  const byId = [...pairs].sort((a, b) => a.id.localeCompare(b.id))
  const size = (pair: Gsm8kPair) => pair.prompt.length + pair.chosen.length + pair.rejected.length
  const [testSlice, searchSlice, evolveSlice] = dealShortest(byId, size, [test, search, evolve])
  return { test: testSlice!, search: searchSlice!, evolve: evolveSlice! }
}

function tally(row: string, reference: boolean, scores: [number | null, number | null][], started: number, extra = {}) {
  let correct = 0
  let ties = 0
  let failures = 0
  for (const [chosen, rejected] of scores) {
    if (chosen === null || rejected === null) failures++
    else if (chosen > rejected) correct++
    else if (chosen === rejected) ties++
  }
  const n = scores.length - failures
  const successes = correct + ties / 2
  const ms = Date.now() - started
  const judgements = scores.length * 2
  return {
    row,
    reference,
    n,
    correct,
    ties,
    failures,
    accuracy: n > 0 ? successes / n : null,
    ci95: wilsonInterval(successes, n),
    judgements,
    seconds_per_judgement: ms / 1_000 / judgements,
    minutes: ms / 60_000,
    ...extra,
  } satisfies Row
}

/** Runs `tasks` with at most `limit` in flight, results in order. */
async function pool<T>(tasks: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length)
  let next = 0
  const worker = async () => {
    while (next < tasks.length) {
      const index = next++
      results[index] = await tasks[index]!()
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker))
  return results
}

/** The minimal prompt's text for one solution. */
export function minimalPrompt(pair: Pick<Gsm8kPair, 'prompt' | 'reference'>, solution: string, reference: boolean) {
  return (
    `Question:\n${pair.prompt}\n\n` +
    (reference ? `Reference final answer: ${pair.reference}\n\n` : '') +
    `Proposed solution:\n${solution}\n\n` +
    `Is the final answer of the proposed solution correct? Answer Yes or No.`
  )
}

async function minimal(judge: Judge, pairs: Gsm8kPair[], reference: boolean, options: Gsm8kOptions): Promise<Row> {
  const started = Date.now()
  let promptTokens = 0
  const judgeOne = async (pair: Gsm8kPair, solution: string) => {
    const response = await fetch(`${judge.url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: judge.model,
        messages: [{ role: 'user', content: minimalPrompt(pair, solution, reference) }],
        max_tokens: 1,
        temperature: 0,
        logprobs: true,
        top_logprobs: 20,
      }),
      signal: AbortSignal.timeout(600_000),
    })
    if (!response.ok) throw new Error(`chat/completions: ${response.status} ${await response.text()}`)
    const reply = (await response.json()) as {
      choices: { logprobs?: { content?: { top_logprobs: { token: string; logprob: number }[] }[] } }[]
      usage?: { prompt_tokens?: number }
    }
    promptTokens += reply.usage?.prompt_tokens ?? 0
    return yesShare(reply.choices[0]?.logprobs?.content?.[0]?.top_logprobs ?? [])
  }
  const scores = await pool(
    pairs.map((pair) => async () => {
      const both = [await judgeOne(pair, pair.chosen), await judgeOne(pair, pair.rejected)] as [
        number | null,
        number | null,
      ]
      return both
    }),
    options.concurrency,
  )
  return tally('minimal (Yes/No probability)', reference, scores, started, {
    prompt_tokens_per_judgement: promptTokens / (pairs.length * 2),
  })
}

function cli(args: string[], log: (line: string) => void): Promise<string> {
  log(`$ ./reward-harness ${args.join(' ')}`)
  return new Promise((done, fail) =>
    execFile(CLI, args, { cwd: ROOT, maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      if (error) fail(new Error(`${error.message}\n${stderr.slice(-2_000)}`))
      else done(stdout)
    }),
  )
}

/** A chosen/rejected JSONL of the pairs, with or without the reference. */
function writePairs(path: string, pairs: Gsm8kPair[], reference: boolean): string {
  const lines = pairs.map(({ id, prompt, chosen, rejected, reference: answer }) =>
    JSON.stringify({ id, prompt, chosen, rejected, ...(reference ? { reference: answer } : {}) }),
  )
  writeFileSync(path, `${lines.join('\n')}\n`)
  return path
}

/** `bench` with a scalar or library scorer; its pairwise A/B figures as a row. */
async function benchRow(
  name: string,
  scorer: string,
  dataset: string,
  pairs: number,
  reference: boolean,
  judge: Judge,
  options: Gsm8kOptions,
  extra: string[] = [],
): Promise<Row> {
  const started = Date.now()
  const out = join(options.dir, `bench-${name.replace(/\W+/g, '-')}-${reference ? 'ref' : 'noref'}.json`)
  await cli(
    [
      ...['bench', '--dataset', dataset, '--scorer', scorer, '--concurrency', String(options.concurrency)],
      ...['--llm-base-url', judge.url, '--llm-model', judge.model, '--llm-structured-output', 'json_schema'],
      ...['--out', out],
      ...extra,
    ],
    options.log,
  )
  const result = JSON.parse(readFileSync(out, 'utf8')) as {
    overall: {
      pairwise: {
        ab: {
          n: number
          correct: number
          ties: number
          accuracy: number | null
          ci95: [number, number] | null
          failures: number
        }
      }
    }
  }
  const { ab } = result.overall.pairwise
  const ms = Date.now() - started
  return {
    row: name,
    reference,
    n: ab.n,
    correct: ab.correct,
    ties: ab.ties,
    failures: ab.failures,
    accuracy: ab.accuracy,
    ci95: ab.ci95,
    judgements: pairs * 2,
    seconds_per_judgement: ms / 1_000 / (pairs * 2),
    minutes: ms / 60_000,
  }
}

/** The default run's rubric: config/default-run.json's anchors and adaptives. */
function defaultRubrics() {
  const config = JSON.parse(readFileSync(join(ROOT, 'config', 'default-run.json'), 'utf8')) as {
    anchor_rubrics: unknown[]
    adaptive_rubrics: unknown[]
  }
  return { anchor_rubrics: config.anchor_rubrics, adaptive_rubrics: config.adaptive_rubrics }
}

/**
 * Creates a run on `dev` whose scorer is `judge` and from which no step closes by itself; its run token.
 * @example const token = await createJudgedRun(dev, judge, { anchor_rubrics: [{ text: 'Correct.' }], concurrency: 1 })
 */
export async function createJudgedRun(
  dev: { baseUrl: string; adminToken: string },
  judge: Judge,
  { concurrency, ...config }: Record<string, unknown> & { concurrency: number },
): Promise<string> {
  const created = await callJson(`${dev.baseUrl}/runs`, {
    token: dev.adminToken,
    body: {
      config: {
        ...config,
        close_after_idle_s: null,
        agents: {
          scorer: {
            backend: 'openai',
            base_url: judge.url,
            model: judge.model,
            structured_output: 'json_schema',
            concurrency,
            timeout_ms: 300_000,
          },
        },
      },
    },
  })
  if (created.status !== 201) throw new Error(`POST /runs: ${created.status} ${JSON.stringify(created.body)}`)
  return created.body.token as string
}

async function scoreRow(
  judge: Judge,
  pairs: Gsm8kPair[],
  reference: boolean,
  options: Gsm8kOptions,
  judging: 'grades' | 'verdicts',
): Promise<Row> {
  const dev = await startWranglerDev()
  try {
    const token = await createJudgedRun(dev, judge, {
      ...defaultRubrics(),
      judging,
      concurrency: options.concurrency,
    })
    const started = Date.now()
    const statuses: Record<number, number> = {}
    const scoreOne = async (pair: Gsm8kPair, side: 'chosen' | 'rejected') => {
      const answer = await callJson(`${dev.baseUrl}/score`, {
        token,
        body: {
          rollout: {
            id: `${pair.id}-${side}`,
            input: pair.prompt,
            output: pair[side],
            ...(reference ? { supplemental_context: pair.reference } : {}),
          },
          instance_id: pair.id,
          metadata: METADATA,
        },
        timeoutMs: 600_000,
      })
      statuses[answer.status] = (statuses[answer.status] ?? 0) + 1
      if (answer.status !== 200) {
        options.log(`/score ${answer.status}: ${String(JSON.stringify(answer.body)).slice(0, 300)}`)
        return null
      }
      return answer.body.score as number
    }
    const scores = await pool(
      pairs.map((pair) => async () => [await scoreOne(pair, 'chosen'), await scoreOne(pair, 'rejected')] as const),
      options.concurrency,
    )
    const name = `/score, default rubric${judging === 'verdicts' ? ', judging: verdicts' : ''}`
    return tally(name, reference, scores as [number | null, number | null][], started, {
      statuses,
    })
  } finally {
    await dev.stop()
  }
}

/**
 * Every row asked for, with the reference and without, on the test slice; figures go to `options.note` as they come.
 * @example await gsm8kQuality(judge, { rows: ['minimal', 'score'], testPairs: 60, … })
 */
export async function gsm8kQuality(judge: Judge, options: Gsm8kOptions): Promise<Row[]> {
  mkdirSync(options.dir, { recursive: true })
  const all = readFileSync(join(options.dataset, 'pairs.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Gsm8kPair)
  const data = slices(all, options.testPairs, options.trainPairs, options.evolvePairs)
  const file = (name: string, pairs: Gsm8kPair[], reference: boolean) =>
    writePairs(join(options.dir, `${name}-${reference ? 'ref' : 'noref'}.jsonl`), pairs, reference)
  const rows: Row[] = []
  const record = (row: Row) => {
    rows.push(row)
    options.log(
      `${row.row}, ${row.reference ? 'with' : 'without'} the reference: ` +
        `${row.accuracy === null ? '–' : (row.accuracy * 100).toFixed(1)} % ` +
        `[${row.ci95?.map((bound) => (bound * 100).toFixed(1)).join('–') ?? '–'}] of n = ${row.n} ` +
        `(${row.ties} ties, ${row.failures} failed), ${row.seconds_per_judgement.toFixed(2)} s a judgement`,
    )
    options.note({ judge, test_ids: data.test.map((pair) => pair.id), rows })
  }
  const attempt = async (name: string, reference: boolean, run: () => Promise<Row>) => {
    try {
      record(await run())
    } catch (error) {
      const message = (error as Error).message.slice(0, 600)
      options.log(`${name}: ${message}`)
      rows.push({ ...tally(name, reference, [], Date.now()), error: message })
    }
  }
  const criterion = join(options.dir, 'correctness-rubric.json')
  writeFileSync(
    criterion,
    JSON.stringify({
      __default__: {
        rubric_id: 'correctness',
        criteria: [{ criterion_id: 'correct', text: CORRECTNESS, weight: 1 }],
      },
    }),
  )
  for (const reference of options.references) {
    const test = file('test', data.test, reference)
    for (const row of options.rows) {
      if (row === 'minimal') await attempt(row, reference, () => minimal(judge, data.test, reference, options))
      if (row === 'rubric' || row === 'rubric-verdicts') {
        const verdicts = row === 'rubric-verdicts'
        await attempt(row, reference, () =>
          benchRow(
            `rubric: "${CORRECTNESS}"${verdicts ? ', judging: verdicts' : ''}`,
            `rubric:${criterion}`,
            test,
            data.test.length,
            reference,
            judge,
            options,
            verdicts ? ['--judging', 'verdicts'] : [],
          ),
        )
      }
      if (row === 'score') await attempt(row, reference, () => scoreRow(judge, data.test, reference, options, 'grades'))
      if (row === 'verdicts')
        await attempt(row, reference, () => scoreRow(judge, data.test, reference, options, 'verdicts'))
      if (row === 'search' || row === 'search-verdicts')
        await attempt(row, reference, async () => {
          const judging = row === 'search' ? 'grades' : 'verdicts'
          const out = join(options.dir, `${row}-${reference ? 'ref' : 'noref'}`, 'best.json')
          const endpoint = `${judge.url},max_concurrency=${options.concurrency},structured_output=json_schema`
          await cli(
            [
              ...['search', '--dataset', file('search', data.search, reference), '--output', out],
              ...['--endpoint', endpoint, '--model', judge.model, '--timeout-ms', '300000'],
              // The smallest evolutionary search (one child for the hardest prompt): the initializer's and
              // proposer's replies of ~1,000 tokens are most of its time on a CPU judge.
              ...['--generations', '1', '--population-size', '2', '--mutations-per-round', '1'],
              ...['--mutation-parent-count', '1', '--batch-size', '1', '--judging', judging],
            ],
            options.log,
          )
          const artifact = join(options.dir, `rm-${row}-${reference ? 'ref' : 'noref'}.json`)
          await cli(['export', '--search-output', out, '--out', artifact, '--default-rubric', 'best'], options.log)
          // The artifact grades as it was searched (its runtime's judging).
          const name = `searched rubric, judging: ${judging}`
          return benchRow(name, `artifact:${artifact}`, test, data.test.length, reference, judge, options)
        })
      if (row === 'evolve')
        await attempt(row, reference, async () => {
          const out = join(options.dir, `evolve-${reference ? 'ref' : 'noref'}`)
          await cli(
            [
              ...['evolve', '--dataset', file('evolve', data.evolve, reference), '--out', out, '--backend', 'openai'],
              ...['--endpoint', `${judge.url},max_concurrency=${options.concurrency},structured_output=json_schema`],
              ...['--model', judge.model, '--concurrency', String(options.concurrency), '--iterations', '1'],
            ],
            options.log,
          )
          const library = `library:${join(out, 'checkpoints', 'best')}`
          return benchRow('library after evolve', library, test, data.test.length, reference, judge, options)
        })
    }
  }
  return rows
}
