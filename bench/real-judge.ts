/**
 * The real local judge (issues 38 and 47): SmolLM2-135M on llama.cpp's own server (xllamacpp), started here by the
 * project's own `startLocalJudge` (what `npm run judge:local` runs; install it first with
 * `npm run judge:local -- --install-only`). Run by hand, never in tests:
 *
 *   npm run bench:real-judge                                    # parts prefix,latency,score
 *   npm run bench:real-judge -- --parts latency --judgements 24 --levels 1,2,4
 *   npm run bench:real-judge -- --parts quality --test-pairs 30
 *   npm run bench:real-judge -- --parts request --requests 5    # the 814-token yardstick request
 *   npm run bench:real-judge -- --parts gsm8k --gsm8k-pairs 60   # reward quality on gsm8k-solutions
 *
 * Parts:
 * - `request`: the yardstick, one scorer request of ~810 prompt tokens sent `--requests` times with nothing reused
 *   (`--request-format json_object_schema` for llama-cpp-python); wall time, tokens and the server's own timings.
 * - `latency`: judgements through the Worker's own scorer path (`judgeRollout`, src/agents/scorer, on
 *   `OpenAIChatModel` with `structuredOutput: 'json_schema'`, so the server's refusal and the schema-in-its-own-shape
 *   fallback are on the path), a rubric of 3 criteria, short prompts and answers, at client concurrency 1, 2 and 4:
 *   p50/p99 latency, prompt and completion tokens per judgement from the server's `usage`. The server has two slots:
 *   concurrency past two shows its queue.
 * - `score`: a real `wrangler dev` with a run whose scorer is the judge; `/score` sent one at a time, p50/p99.
 * - `prefix`: the scorer requests of bench/judge.ts's load (8 prompts × `--prefix-answers` answers, answer-major),
 *   recorded from this tree and from `--before` (848d401) through a recording stub, then replayed one at a time to
 *   the real server with `max_tokens` 4; the prompt tokens the server evaluated per request are its reply's
 *   `timings.prompt_n` (llama.cpp), else read from llama-cpp-python's log (`N prefix-match hit, remaining M prompt
 *   tokens to eval`; without that line the whole prompt was evaluated).
 * - `quality`: pairwise accuracy with Wilson 95% intervals on a held-out LLMBar slice, through the CLI: the model
 *   judging directly (one generic criterion; and evolve's baseline, an empty library), the initial rubric
 *   (`bench --scorer mock` with the model as initializer and verifier), the searched rubric (`search` on a training
 *   slice, `export --default-rubric best`, `bench --scorer artifact:`), and the library after `evolve`.
 * - `tools`: a made tool call against a claimed one, 8 tasks, through the scorer (bench/tool-calls-judge.ts).
 * - `gsm8k`: pairwise accuracy on held-out gsm8k-solutions pairs, with the reference and without
 *   (bench/gsm8k-quality.ts).
 * - `simulate`: `reward-harness simulate --create-run` against a real `wrangler dev` with every agent on the judge,
 *   its rollouts gsm8k-solutions' right and wrong answers (`--simulate-questions generated`: simulate's arithmetic),
 *   judged by verdicts (`--simulate-judging`), each step's update waited for up to 900 s (`--simulate-wait-timeout`).
 *
 * The judge home is REWARD_HARNESS_JUDGE_HOME, else judgeHome(), else ~/.cache/reward-harness/judge when that one
 * is installed. `--model qwen2.5-coder-1.5b` starts that judge instead of SmolLM2. `--server-args="--n_parallel 4"`
 * sets the judge's llama.cpp parameters. `--judge-url <base> --judge-model <id>` measures a server already running
 * instead (a vLLM on a GPU; `prefix` needs llama.cpp's `timings` or llama-cpp-python's log, `--judge-log`).
 * Results go to bench/results/real-judge-*.json.
 */
import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, openSync, readFileSync, readSync, statSync, writeFileSync, closeSync } from 'node:fs'
import { homedir, loadavg } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { freePort } from '../offline/dev/start.ts'
import { judgeHome, startLocalJudge } from '../offline/judge-local/index.ts'
import { judgeRollout } from '../src/agents/scorer/index.ts'
import { type HttpFetch, OpenAIChatModel } from '../src/llm/openai.ts'
import { callJson, METADATA } from '../tests/e2e/support/http.ts'
import { startWranglerDev } from '../tests/e2e/support/wrangler-dev.ts'
import { createJudgedRun, dealShortest, GSM8K, gsm8kQuality } from './gsm8k-quality.ts'
import { madeAgainstClaimed } from './tool-calls-judge.ts'
import { interleaved, loadModules, recordingModel, scorerInput, startRecordingStub } from './judge.ts'
import { checkoutRevision } from './worktree.ts'

const ROOT = resolve(import.meta.dirname, '..')
const RESULTS = join(ROOT, 'bench', 'results')
const CLI = join(ROOT, 'reward-harness')
const LLMBAR = resolve(ROOT, '../shared/datasets/llmbar')

const { values: flags } = parseArgs({
  options: {
    parts: { type: 'string', default: 'prefix,latency,score' },
    judgements: { type: 'string', default: '24' },
    levels: { type: 'string', default: '1,2,4' },
    scores: { type: 'string', default: '16' },
    before: { type: 'string', default: '848d401' },
    'prefix-answers': { type: 'string', default: '2' },
    'server-args': { type: 'string', default: '' },
    'test-pairs': { type: 'string', default: '16' },
    'train-pairs': { type: 'string', default: '8' },
    'evolve-pairs': { type: 'string', default: '12' },
    generations: { type: 'string', default: '1' },
    iterations: { type: 'string', default: '1' },
    'simulate-steps': { type: 'string', default: '2' },
    'simulate-rollouts': { type: 'string', default: '8' },
    /** A chosen/rejected JSONL whose prompts and answers the rollouts use, or `generated` for simulate's arithmetic. */
    'simulate-questions': { type: 'string', default: join(GSM8K, 'pairs.jsonl') },
    'simulate-judging': { type: 'string', default: 'verdicts' },
    'simulate-wait-timeout': { type: 'string', default: '900' },
    llmbar: { type: 'string', default: LLMBAR },
    'judge-url': { type: 'string' },
    'judge-model': { type: 'string', default: 'smollm2-135m' },
    'judge-log': { type: 'string' },
    requests: { type: 'string', default: '5' },
    'request-format': { type: 'string', default: 'json_schema' },
    gsm8k: { type: 'string', default: GSM8K },
    'gsm8k-rows': { type: 'string', default: 'minimal,rubric,score' },
    'gsm8k-pairs': { type: 'string', default: '60' },
    'gsm8k-reference': { type: 'string', default: 'both' },
    'gsm8k-train-pairs': { type: 'string', default: '4' },
    'gsm8k-evolve-pairs': { type: 'string', default: '6' },
    concurrency: { type: 'string', default: '2' },
    model: { type: 'string' },
  },
})
const parts = new Set(flags.parts.split(','))
const int = (name: keyof typeof flags) => Number(flags[name])
const load = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(', ')
const COMMAND = `npm run bench:real-judge -- ${process.argv.slice(2).join(' ')}`.trim()

function installedHome(): string {
  if (process.env.REWARD_HARNESS_JUDGE_HOME) return judgeHome()
  const cache = join(homedir(), '.cache', 'reward-harness', 'judge')
  return existsSync(join(judgeHome(), 'venv')) || !existsSync(join(cache, 'venv')) ? judgeHome() : cache
}

/** The server judged against: the local judge started here, or `--judge-url` (a vLLM on a GPU, say). */
interface Judge {
  url: string
  model: string
}

// ------------------------------------------------------------------------------------------------
// Figures

const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN
}
const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length)
const seconds = (ms: number) => `${(ms / 1_000).toFixed(2)} s`

const report: Record<string, unknown> = { command: COMMAND, started: new Date().toISOString() }
function note(part: string, figures: Record<string, unknown>) {
  const entry = { ...figures, load_average: load(), at: new Date().toISOString() }
  report[part] = entry
  console.log(`\n[${part}] load average ${entry.load_average}`)
  mkdirSync(RESULTS, { recursive: true })
  writeFileSync(join(RESULTS, `real-judge-${process.pid}.json`), `${JSON.stringify(report, null, 2)}\n`)
}

// ------------------------------------------------------------------------------------------------
// The server's log: prompt tokens it evaluated per request

class ServerLog {
  private offset: number
  constructor(private readonly path: string) {
    this.offset = existsSync(path) ? statSync(path).size : 0
  }

  private read(): string {
    const size = statSync(this.path).size
    // Truncated (another server started with the same log): read it from its start.
    if (size < this.offset) this.offset = 0
    if (size === this.offset) return ''
    const buffer = Buffer.alloc(size - this.offset)
    const fd = openSync(this.path, 'r')
    readSync(fd, buffer, 0, buffer.length, this.offset)
    closeSync(fd)
    this.offset = size
    return buffer.toString('utf8')
  }

  /** What the server printed for the request just answered: reused and evaluated prompt tokens. */
  async next(): Promise<{ reused: number; evaluated: number | undefined; perfTokens: number | undefined }> {
    let text = ''
    for (let wait = 0; wait < 40 && !/prompt eval time/.test(text); wait++) {
      text += this.read()
      if (!/prompt eval time/.test(text)) await new Promise((done) => setTimeout(done, 50))
    }
    // `Llama.generate` prints the line only when some prefix matched: without it the whole prompt was evaluated.
    const hit = /(\d+) prefix-match hit, remaining (\d+) prompt tokens to eval/.exec(text)
    const perf = /prompt eval time =\s*[\d.]+ ms \/\s*(\d+) tokens/.exec(text)
    return {
      reused: hit ? Number(hit[1]) : 0,
      evaluated: hit ? Number(hit[2]) : undefined,
      perfTokens: perf ? Number(perf[1]) : undefined,
    }
  }
}

// ------------------------------------------------------------------------------------------------
// A model on the judge, counting usage per call

interface Usage {
  calls: number
  prompt: number
  completion: number
}

function countingModel(url: string, model: string, usage: Usage): OpenAIChatModel {
  const counting: HttpFetch = async (target, init) => {
    const response = await fetch(target, init)
    const text = await response.text()
    usage.calls++
    try {
      const body = JSON.parse(text) as { usage?: { prompt_tokens?: number; completion_tokens?: number } }
      usage.prompt += body.usage?.prompt_tokens ?? 0
      usage.completion += body.usage?.completion_tokens ?? 0
    } catch {
      // not JSON (an error page): no tokens
    }
    return new Response(text, { status: response.status, headers: response.headers })
  }
  return new OpenAIChatModel({
    baseURL: url,
    apiKey: 'none',
    model,
    temperature: 0,
    structuredOutput: 'json_schema',
    timeoutMs: 300_000,
    fetch: counting,
  })
}

// Short, realistic judge inputs: 8 questions × 3 answers (correct, wrong, padded).
const QA: [string, string, string, string][] = [
  ['What is 17 + 25?', '42', '17 + 25 = 42.', '32'],
  ['Name the capital of Australia.', 'Canberra', 'The capital is Canberra.', 'Sydney is the capital.'],
  ['How many minutes are in 3 hours?', '180', 'Three hours is 3 × 60 = 180 minutes.', '120 minutes'],
  ['Translate "thank you" into French.', 'merci', '"Thank you" is "merci" in French.', 'gracias'],
  ['Is 91 a prime number?', 'No', 'No: 91 = 7 × 13.', 'Yes, 91 is prime.'],
  ['What gas do plants absorb for photosynthesis?', 'CO2', 'Carbon dioxide (CO2).', 'Oxygen.'],
  ['Write a Python expression for the length of list xs.', 'len(xs)', 'Use len(xs).', 'xs.length'],
  ['A shirt costs $20 and is 25% off. What is the price?', '$15', '25% of 20 is 5, so $15.', '$5'],
]
const GENERIC_RUBRIC = {
  rubric_id: 'generic',
  criteria: [
    {
      criterion_id: 'better',
      text: 'The response follows the instruction and answers it correctly and helpfully.',
      weight: 1,
    },
  ],
}
const CRITERIA = [
  'The final answer is correct.',
  'The answer addresses exactly what was asked.',
  'The answer is concise and clear.',
]
const rubricRows = CRITERIA.map((text, i) => ({
  id: `c${i + 1}`,
  text,
  weight: 1,
  is_anchor: true,
  version: 1,
  created_at: '2026-01-01T00:00:00.000Z',
  metadata: {},
}))
const judgeInputs = (count: number) =>
  Array.from({ length: count }, (_, index) => {
    const [question, reference, ...answers] = QA[index % QA.length]!
    const answer = answers[Math.floor(index / QA.length) % answers.length]!
    return {
      rubrics: rubricRows,
      rollout: { id: `r${index}`, input: question, output: answer, supplemental_context: reference },
      metadata: METADATA,
      gradeMax: 10,
      locale: 'en' as const,
    }
  })

// ------------------------------------------------------------------------------------------------
// Parts

async function latency(judge: Judge): Promise<number | undefined> {
  const count = int('judgements')
  const usage: Usage = { calls: 0, prompt: 0, completion: 0 }
  const model = countingModel(judge.url, judge.model, usage)
  const warm = Date.now()
  const warmed = await judgeRollout(model, judgeInputs(1)[0]!, { maxAttempts: 2 }).then(
    () => 'answered',
    (error: Error) => `failed: ${error.message}`,
  )
  console.log(`warm-up judgement (json_schema refused, then its fallback): ${warmed}, ${seconds(Date.now() - warm)}`)
  const rows: Record<string, unknown>[] = []
  let p50AtOne: number | undefined
  for (const level of flags.levels.split(',').map(Number)) {
    Object.assign(usage, { calls: 0, prompt: 0, completion: 0 })
    const inputs = judgeInputs(count)
    const times: number[] = []
    let failures = 0
    let next = 0
    const started = Date.now()
    await Promise.all(
      Array.from({ length: level }, async () => {
        while (next < inputs.length) {
          const input = inputs[next++]!
          const sent = Date.now()
          // One attempt: a reply the scorer refuses (a grade out of range) is a failure, timed like an answer.
          await judgeRollout(model, input, { maxAttempts: 1 }).catch((error: Error) => {
            failures++
            console.error(`judgement failed: ${error.message}`)
          })
          times.push(Date.now() - sent)
        }
      }),
    )
    const wall = Date.now() - started
    const row = {
      concurrency: level,
      judgements: count,
      failures,
      p50_ms: quantile(times, 0.5),
      p99_ms: quantile(times, 0.99),
      judgements_per_s: (times.length / wall) * 1_000,
      calls_per_judgement: usage.calls / count,
      prompt_tokens_per_judgement: usage.prompt / count,
      completion_tokens_per_judgement: usage.completion / count,
    }
    if (level === 1) p50AtOne = row.p50_ms
    rows.push(row)
    console.log(
      `c=${level}: p50 ${seconds(row.p50_ms)}, p99 ${seconds(row.p99_ms)}, ${row.judgements_per_s.toFixed(2)} ` +
        `judgements/s, ${row.prompt_tokens_per_judgement.toFixed(0)} prompt + ` +
        `${row.completion_tokens_per_judgement.toFixed(1)} completion tokens/judgement, ` +
        `${row.calls_per_judgement.toFixed(2)} calls/judgement, ${failures} failures (load ${load()})`,
    )
  }
  note('latency', { rows })
  return p50AtOne
}

/**
 * The yardstick: one scorer request of the Worker's (3 criteria, `json_schema`) on a question with a worked answer,
 * 814 prompt tokens on SmolLM2's tokenizer.
 */
const YARDSTICK_ANSWER =
  'The shirt costs $20 before the discount. A discount of 25% means we take away a quarter of the price. ' +
  'One quarter of 20 is 20 / 4 = 5, so the discount is $5. The price after the discount is 20 - 5 = 15. ' +
  'Another way to see it is to ' +
  'multiply the price by what is left after the discount: 20 × (1 - 0.25) = 20 × 0.75 = 15. Both ways agree. ' +
  'A common mistake is to answer with the discount itself ($5) instead of the new price. ' +
  'So the final answer is that the shirt costs $15 after the 25% discount.'

/**
 * `--parts request`: the yardstick request recorded as this tree's scorer sends it, then sent `--requests` times to
 * the judge, each with a different first line in its system message so that no prompt token is reused: wall time,
 * the server's token counts and, where it reports them (llama.cpp), its own prefill and decode timings.
 * `--request-format json_object_schema` sends the schema in llama-cpp-python's shape (its server refuses OpenAI's).
 */
async function request(judge: Judge): Promise<void> {
  const stub = await startRecordingStub()
  try {
    const model = new OpenAIChatModel({
      baseURL: stub.url,
      apiKey: 'bench',
      model: judge.model,
      temperature: 0,
      structuredOutput: 'json_schema',
      timeoutMs: 30_000,
    })
    const [input] = judgeInputs(1)
    await judgeRollout(model, { ...input!, rollout: { ...input!.rollout, input: QA[7]![0], output: YARDSTICK_ANSWER } })
  } finally {
    stub.server.close()
  }
  const recorded = stub.recorded[0]!.body as unknown as { messages: { role: string; content: string }[] } & Record<
    string,
    unknown
  >
  const format = recorded.response_format as { json_schema?: { schema?: unknown } }
  const responseFormat =
    flags['request-format'] === 'json_object_schema'
      ? { type: 'json_object', schema: format.json_schema?.schema }
      : recorded.response_format
  const rows: Record<string, unknown>[] = []
  for (let index = 0; index < int('requests'); index++) {
    const [system, ...rest] = recorded.messages
    const messages = [
      { ...system!, content: `Bench ${Math.random().toString(36).slice(2, 8)}.\n${system!.content}` },
      ...rest,
    ]
    const started = Date.now()
    const reply = (await chat(judge, {
      ...recorded,
      model: judge.model,
      messages,
      response_format: responseFormat,
    })) as {
      usage?: { prompt_tokens?: number; completion_tokens?: number }
      timings?: { cache_n?: number; prompt_n?: number; prompt_ms?: number; predicted_n?: number; predicted_ms?: number }
    }
    const row = { ms: Date.now() - started, usage: reply.usage, timings: reply.timings ?? null, load: load() }
    rows.push(row)
    console.log(
      `request ${index + 1}: ${seconds(row.ms)}, ${reply.usage?.prompt_tokens} prompt + ` +
        `${reply.usage?.completion_tokens} completion tokens` +
        (reply.timings
          ? `; prefill ${reply.timings.prompt_n} tokens in ${seconds(reply.timings.prompt_ms ?? 0)}, ` +
            `decode ${reply.timings.predicted_n} in ${seconds(reply.timings.predicted_ms ?? 0)}`
          : '') +
        ` (load ${row.load})`,
    )
  }
  const times = rows.map((row) => row.ms as number)
  console.log(
    `p50 ${seconds(quantile(times, 0.5))}, min ${seconds(Math.min(...times))}, max ${seconds(Math.max(...times))}`,
  )
  note('request', { format: flags['request-format'], rows, p50_ms: quantile(times, 0.5) })
}

async function score(judge: Judge, directP50: number | undefined): Promise<void> {
  const dev = await startWranglerDev()
  try {
    const token = await createJudgedRun(dev, judge, {
      anchor_rubrics: CRITERIA.map((text) => ({ text })),
      grade_max: 10,
      reasons: 'none',
      concurrency: 1,
    })
    const inputs = judgeInputs(int('scores') + 1)
    const times: number[] = []
    const okTimes: number[] = []
    const statuses: Record<number, number> = {}
    for (const [index, input] of inputs.entries()) {
      const sent = Date.now()
      const answer = await callJson(`${dev.baseUrl}/score`, {
        token,
        body: { rollout: { ...input.rollout, id: `s${index}` }, metadata: METADATA },
        timeoutMs: 600_000,
      })
      const took = Date.now() - sent
      statuses[answer.status] = (statuses[answer.status] ?? 0) + 1
      if (index === 0) console.log(`/score warm-up: ${answer.status} in ${seconds(took)}`)
      else {
        times.push(took)
        if (answer.status === 200) okTimes.push(took)
        else console.error(`/score ${answer.status}: ${JSON.stringify(answer.body).slice(0, 300)}`)
      }
    }
    const p50 = quantile(times, 0.5)
    const figures = {
      scores: times.length,
      statuses,
      p50_ms: p50,
      p99_ms: quantile(times, 0.99),
      p50_ms_200_only: okTimes.length > 0 ? quantile(okTimes, 0.5) : null,
      direct_p50_ms: directP50 ?? null,
      overhead_p50_ms: directP50 === undefined ? null : p50 - directP50,
    }
    console.log(
      `/score × ${times.length}: p50 ${seconds(p50)}, p99 ${seconds(figures.p99_ms)}` +
        (directP50 === undefined ? '' : `; direct judgement p50 ${seconds(directP50)}, /score − direct `) +
        (directP50 === undefined ? '' : seconds(p50 - directP50)),
    )
    note('score', figures)
  } finally {
    await dev.stop()
  }
}

async function recordScorerRequests(root: string): Promise<Record<string, unknown>[]> {
  const modules = await loadModules(root)
  const stub = await startRecordingStub()
  try {
    // The replay sets its own max_tokens: the recorded bodies are read for their messages.
    const model = recordingModel(modules, stub.url)
    const answers = int('prefix-answers')
    for (const { group, answer } of interleaved().filter(({ answer }) => answer < answers))
      await modules.judgeRollout(model, scorerInput(group, answer), { maxAttempts: 1 })
    return stub.recorded.map((entry) => entry.body as unknown as Record<string, unknown>)
  } finally {
    stub.server.close()
  }
}

async function replay(judge: Judge, log: ServerLog, label: string, bodies: Record<string, unknown>[]) {
  // An unrelated request first, so the first replayed one shares no more with the one before than chance.
  const hello = await chat(judge, { messages: [{ role: 'user', content: 'Hello.' }], max_tokens: 1 })
  if (!hello.timings) await log.next()
  const rows: { prompt: number; evaluated: number; reused: number }[] = []
  for (const [index, recorded] of bodies.entries()) {
    const { response_format: _format, ...body } = recorded
    const started = Date.now()
    const reply = await chat(judge, { ...body, model: judge.model, max_tokens: 4, temperature: 0 })
    // llama.cpp's server says what it evaluated in the reply (`timings`); llama-cpp-python only in its log.
    const seen = reply.timings
      ? { reused: reply.timings.cache_n ?? 0, evaluated: reply.timings.prompt_n }
      : await log.next()
    const prompt = reply.usage?.prompt_tokens ?? 0
    const evaluated = seen.evaluated ?? prompt
    rows.push({ prompt, evaluated, reused: seen.reused })
    console.log(
      `${label} ${index + 1}/${bodies.length}: ${prompt} prompt tokens, ${seen.reused} reused, ${evaluated} ` +
        `evaluated, ${seconds(Date.now() - started)} (load ${load()})`,
    )
  }
  const prompt = rows.reduce((sum, row) => sum + row.prompt, 0)
  const evaluated = rows.reduce((sum, row) => sum + row.evaluated, 0)
  return {
    requests: rows.length,
    prompt_tokens_per_judgement: prompt / rows.length,
    evaluated_per_judgement: evaluated / rows.length,
    evaluated_share: evaluated / prompt,
    reused_share: 1 - evaluated / prompt,
    // The first request is cold whatever the layout: the steady state leaves it out.
    evaluated_per_judgement_after_first: mean(rows.slice(1).map((row) => row.evaluated)),
  }
}

async function chat(judge: Judge, body: Record<string, unknown>) {
  const response = await fetch(`${judge.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(600_000),
  })
  if (!response.ok) throw new Error(`chat/completions: ${response.status} ${await response.text()}`)
  return (await response.json()) as {
    usage?: { prompt_tokens?: number }
    timings?: { cache_n?: number; prompt_n?: number }
  }
}

async function prefix(judge: Judge, logPath: string): Promise<void> {
  const now = await recordScorerRequests(ROOT)
  const checkedOut = checkoutRevision(flags.before, 'bench-real-judge-')
  let then: Record<string, unknown>[]
  try {
    then = await recordScorerRequests(checkedOut.root)
  } finally {
    checkedOut.remove()
  }
  const log = new ServerLog(logPath)
  const figures = {
    load: `8 prompts × ${flags['prefix-answers']} answers, answer-major, scorer requests, max_tokens 4`,
    server_args: flags['server-args'],
    before: await replay(judge, log, flags.before, then),
    this_tree: await replay(judge, log, 'this tree', now),
  }
  for (const [label, row] of Object.entries({ [flags.before]: figures.before, 'this tree': figures.this_tree }))
    console.log(
      `${label}: ${row.prompt_tokens_per_judgement.toFixed(0)} prompt tokens/judgement, ` +
        `${row.evaluated_per_judgement.toFixed(0)} evaluated (${(row.evaluated_share * 100).toFixed(1)} %), ` +
        `${row.evaluated_per_judgement_after_first.toFixed(0)} after the first`,
    )
  note('prefix', figures)
}

// ------------------------------------------------------------------------------------------------
// Reward quality, through the CLI

interface LlmBarPair {
  input: string
  output_1: string
  output_2: string
  label: number
}

function cli(args: string[]): Promise<string> {
  console.log(`$ ./reward-harness ${args.join(' ')}`)
  const started = Date.now()
  return new Promise((done, fail) =>
    execFile(CLI, args, { cwd: ROOT, maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      console.log(`  (${seconds(Date.now() - started)}, load ${load()})`)
      if (error) fail(new Error(`${error.message}\n${stderr.slice(-2_000)}`))
      else done(stdout)
    }),
  )
}

/** The shortest pairs of every LLMBar subset, split into held-out test, search and evolve slices (disjoint). */
function slices(dir: string): { test: string; search: string; evolve: string } {
  const files = ['natural', 'adversarial-neighbor', 'adversarial-gptinst', 'adversarial-gptout', 'adversarial-manual']
  const pairs = files.flatMap(
    (file) => JSON.parse(readFileSync(join(flags.llmbar, `${file}.json`), 'utf8')) as LlmBarPair[],
  )
  const size = (pair: LlmBarPair) => pair.input.length + pair.output_1.length + pair.output_2.length
  const out = dealShortest(pairs, size, [int('test-pairs'), int('train-pairs'), int('evolve-pairs')])
  mkdirSync(dir, { recursive: true })
  const write = (name: string, slice: LlmBarPair[]) => {
    const path = join(dir, `${name}.json`)
    writeFileSync(path, JSON.stringify(slice))
    return path
  }
  return { test: write('test', out[0]!), search: write('search', out[1]!), evolve: write('evolve', out[2]!) }
}

async function quality(judge: Judge): Promise<void> {
  const dir = join(RESULTS, `real-judge-quality-${process.pid}`)
  const data = slices(dir)
  const llm = ['--llm-base-url', judge.url, '--llm-model', judge.model]
  const help = await cli(['bench', '--help'])
  if (help.includes('--llm-structured-output')) llm.push('--llm-structured-output', 'json_schema')
  const endpoint = `${judge.url},max_concurrency=1,structured_output=json_schema`
  const rows: Record<string, unknown>[] = []
  const bench = async (name: string, scorer: string, extra: string[] = []) => {
    const out = join(dir, `bench-${name}.json`)
    const args = ['bench', '--dataset', data.test, '--scorer', scorer, '--concurrency', '1', ...extra, '--out', out]
    const started = Date.now()
    try {
      await cli(args)
      const result = JSON.parse(readFileSync(out, 'utf8')) as {
        overall: { pairwise: Record<string, { n: number; accuracy: number | null; ci95: unknown; failures: number }> }
        failures: { count: number }
      }
      const { ab, ba, swap_consistent } = result.overall.pairwise
      const row = { name, scorer, ab, ba, swap_consistent, minutes: (Date.now() - started) / 60_000, load: load() }
      rows.push(row)
      console.log(`${name}: A/B ${JSON.stringify(ab)}; swap-consistent ${JSON.stringify(swap_consistent)}`)
    } catch (error) {
      rows.push({ name, scorer, error: (error as Error).message.slice(0, 500) })
      console.error(`${name}: ${(error as Error).message}`)
    }
    note('quality', { slices: data, rows })
  }
  // The model judging directly: one generic criterion, no rubric of the task's own.
  const generic = join(dir, 'generic-rubric.json')
  writeFileSync(generic, JSON.stringify({ __default__: GENERIC_RUBRIC }))
  await bench('direct (one generic criterion)', `rubric:${generic}`, llm)
  await bench('initial rubric', 'mock', llm)
  const searchOut = join(dir, 'search', 'best.json')
  const searched = await cli([
    ...['search', '--dataset', data.search, '--output', searchOut],
    ...['--endpoint', endpoint, '--model', judge.model, '--timeout-ms', '300000'],
    ...['--generations', flags.generations, '--population-size', '3', '--mutations-per-round', '2'],
    ...['--mutation-parent-count', '1', '--batch-size', '2'],
  ]).then(
    () => true,
    (error: Error) => {
      console.error(error.message)
      return false
    },
  )
  if (searched) {
    const artifact = join(dir, 'rm.json')
    await cli(['export', '--search-output', searchOut, '--out', artifact, '--default-rubric', 'best']).then(
      () => bench('searched rubric', `artifact:${artifact}`, llm),
      (error: Error) => console.error(error.message),
    )
  }
  // Evolve's baseline (iteration 0, an empty library) is the plain pairwise judge; then its iterations.
  const evolveOut = join(dir, 'evolve')
  const evolveArgs = ['evolve', '--dataset', data.evolve, '--out', evolveOut, '--backend', 'openai']
  evolveArgs.push('--endpoint', endpoint, '--model', judge.model, '--concurrency', '1')
  await cli([...evolveArgs, '--iterations', '0']).then(
    () => bench('direct (pairwise, empty library)', `library:${join(evolveOut, 'checkpoints', 'iter-0')}`, llm),
    (error: Error) => console.error(error.message),
  )
  await cli([...evolveArgs, '--iterations', flags.iterations]).then(
    () => bench('after evolve', `library:${join(evolveOut, 'checkpoints', 'best')}`, llm),
    (error: Error) => console.error(error.message),
  )
}

async function simulate(judge: Judge): Promise<void> {
  const dev = await startWranglerDev()
  try {
    const out = join(RESULTS, `real-judge-simulate-${process.pid}.json`)
    await cli([
      ...['simulate', '--url', dev.baseUrl, '--create-run', '--admin-token', dev.adminToken],
      ...['--judge-base-url', judge.url, '--judge-model', judge.model, '--judge-structured-output', 'json_schema'],
      '--concurrency',
      '1',
      ...['--steps', flags['simulate-steps'], '--rollouts-per-step', flags['simulate-rollouts'], '--out', out],
      ...['--judging', flags['simulate-judging'], '--wait-timeout', flags['simulate-wait-timeout']],
      // As `npm start -- --judge local` sets its runs: two calls at a time (the server's slots), a queued call's wait.
      ...['--judge-concurrency', '2', '--judge-timeout-ms', '300000'],
      ...(flags['simulate-questions'] === 'generated' ? [] : ['--questions', flags['simulate-questions']]),
    ]).then(
      (stdout) => console.log(stdout),
      (error: Error) => console.error(error.message),
    )
    note('simulate', { out, result: existsSync(out) ? JSON.parse(readFileSync(out, 'utf8')) : null })
  } finally {
    await dev.stop()
  }
}

// ------------------------------------------------------------------------------------------------

async function main() {
  let judge: Judge
  let stop = () => {}
  let logPath = flags['judge-log']
  if (flags['judge-url']) judge = { url: flags['judge-url'].replace(/\/$/, ''), model: flags['judge-model'] }
  else {
    const home = installedHome()
    process.env.REWARD_HARNESS_JUDGE_HOME = home
    const extraArgs = flags['server-args'].split(' ').filter(Boolean)
    const port = await freePort()
    const local = await startLocalJudge({
      port,
      embedderPort: await freePort(),
      home,
      extraArgs,
      ...(flags.model ? { model: flags.model } : {}),
    })
    judge = local
    stop = () => local.stop()
    const perPort = join(home, `server-${port}.log`)
    logPath = existsSync(perPort) ? perPort : join(home, 'server.log')
  }
  console.log(`judge: ${judge.url} (${judge.model}), log ${logPath ?? 'none'}, load average ${load()}`)
  console.log(`command: ${COMMAND}`)
  try {
    // Prefix first: it reads the log request by request, and nothing else may talk to the server meanwhile.
    if (parts.has('prefix')) {
      if (logPath) await prefix(judge, logPath)
      else console.error('prefix: needs the server log of llama-cpp-python (--judge-log with --judge-url)')
    }
    if (parts.has('request')) await request(judge)
    let directP50: number | undefined
    if (parts.has('latency')) directP50 = await latency(judge)
    if (parts.has('score')) await score(judge, directP50)
    if (parts.has('quality')) await quality(judge)
    if (parts.has('simulate')) await simulate(judge)
    if (parts.has('tools')) {
      const figures = await madeAgainstClaimed(
        countingModel(judge.url, judge.model, { calls: 0, prompt: 0, completion: 0 }),
      )
      console.log(
        `made above claimed: ${figures.made_above_claimed} ${JSON.stringify(figures.ci95)} of n = ${figures.n}; ` +
          `tool criterion ${JSON.stringify(figures.tool_grade_mean)}`,
      )
      note('tools', figures)
    }
    if (parts.has('gsm8k'))
      await gsm8kQuality(judge, {
        dataset: flags.gsm8k,
        dir: join(RESULTS, `real-judge-gsm8k-${process.pid}`),
        rows: flags['gsm8k-rows'].split(','),
        testPairs: int('gsm8k-pairs'),
        trainPairs: int('gsm8k-train-pairs'),
        evolvePairs: int('gsm8k-evolve-pairs'),
        concurrency: int('concurrency'),
        references: { both: [true, false], with: [true], without: [false] }[flags['gsm8k-reference']] ?? [true, false],
        note: (figures) => note('gsm8k', figures),
        log: (line) => console.log(line),
      })
  } finally {
    stop()
  }
  console.log(`\nwrote ${join(RESULTS, `real-judge-${process.pid}.json`)}`)
}

await main()
