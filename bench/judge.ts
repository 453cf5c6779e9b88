/**
 * What the judge costs per path: prefix-cache reuse and tokens of every judge prompt on a GRPO-shaped step.
 *
 *   npm run bench:judge                      # this working tree
 *   npm run bench:judge -- --before 848d401  # and the same load on a git revision, side by side
 *
 * Each judge path (online scorer, auditor, distillation's re-judging, group scorer, /rm and the search verifier, the
 * search judge, the analyzer) runs through its own public function of the revision under test, with that revision's
 * OpenAI adapter, against a recording OpenAI-compatible stub on loopback. The load: 8 prompts × 16 distinct answers
 * (prompt ~1,200 characters, reference ~400, 5 rubrics, answers ~1,200), sent answer-major as trainer workers
 * interleave them. The stub answers exactly what the prompt's reply format asks for (reasons included when asked).
 * Every recorded request is rendered with ChatML, tokenised with gpt-tokenizer (o200k_base), cut into 16-token blocks
 * keyed by everything before them and replayed in arrival order against an unbounded cache (bench/prefix-cache.ts):
 * hit share = reused prompt tokens ÷ prompt tokens. The oracle reuses everything but the answers once one request of
 * the group was seen, and everything but the group's prompt, reference and answers before that.
 * A revision given by `--before` is checked out with `git worktree add` into a temporary folder that shares this
 * tree's node_modules, and its modules are imported from there.
 */
import { createServer, type Server } from 'node:http'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { encode } from 'gpt-tokenizer'
import { seededRandom } from '../src/hash/index.ts'
import { chatMl, PrefixCache } from './prefix-cache.ts'
import { chatCompletion, type ChatCompletionBody } from '../tests/support/llm-stub.ts'
import { checkoutRevision } from './worktree.ts'

const PROMPTS = 8
const GROUP = 16
const COMMAND = 'npm run bench:judge -- --before <rev>'

// ------------------------------------------------------------------------------------------------
// The load

const WORDS = (
  'the a of to and in is that for it as with on by this be are from at or an which was not can we one all ' +
  'integer sum value step result proof function array index loop bound error test case input output number ' +
  'prime even odd square root factor divide multiply total answer check first second third final because ' +
  'therefore so then if else while return list string parse graph node edge path tree cost time space order ' +
  'sorted merge split left right middle pointer count limit range zero negative positive table column row'
).split(' ')

function text(seed: string, chars: number): string {
  const random = seededRandom(seed, 1)
  const words: string[] = []
  let length = 0
  while (length < chars) {
    const word = WORDS[Math.floor(random() * WORDS.length)]!
    const sentenceEnd = random() < 0.08
    words.push(sentenceEnd ? `${word}.` : word)
    length += word.length + 1
  }
  return words.join(' ')
}

interface Group {
  id: string
  prompt: string
  reference: string
  answers: string[]
}

export const GROUPS: Group[] = Array.from({ length: PROMPTS }, (_, p) => ({
  id: `p${p}`,
  prompt: `Task ${p}: ${text(`prompt-${p}`, 1_200)}`,
  reference: text(`reference-${p}`, 400),
  answers: Array.from({ length: GROUP }, (_, a) => text(`answer-${p}-${a}`, 1_200)),
}))

const RUBRIC_TEXTS = [
  'The final answer is correct and matches the reference.',
  'Shows the key intermediate steps that lead to the answer.',
  'States assumptions and checks edge cases where they matter.',
  'Is concise: no filler, no restating the question.',
  'Does not address the grader or claim a score.',
]
const RUBRIC_IDS = ['correct', 'steps', 'assumptions', 'concise', 'no-grader']
const METADATA = { high_level_goal: 'competition math', model_size: '7B', current_step: 12, total_steps: 200 }

/** Answer-major: answer j of every prompt before answer j + 1, as trainer workers send a step's rollouts. */
export const interleaved = (): { group: Group; answer: number }[] =>
  Array.from({ length: GROUP }, (_, answer) => GROUPS.map((group) => ({ group, answer }))).flat()

// ------------------------------------------------------------------------------------------------
// The stub: answers what the prompt's reply format asks for

const REASONS = [
  'The answer reaches the reference value through correct partial results.',
  'Two of the intermediate steps are missing, so the derivation is hard to follow.',
  'It checks the empty input but not the negative case the task mentions.',
  'The answer repeats the question before solving it and adds unrelated remarks.',
  'Nothing in the answer speaks to the grader or asserts its own score.',
]

const userText = (body: ChatCompletionBody) =>
  body.messages
    .filter((message) => message.role === 'user')
    .map((message) => (typeof message.content === 'string' ? message.content : ''))
    .join('\n')

/** The reply a model would write for the format the request's system prompt asks for. */
function formatReply(body: ChatCompletionBody): string {
  const system = typeof body.messages[0]?.content === 'string' ? body.messages[0].content : ''
  const user = userText(body)
  const ids = [...user.matchAll(/^- ([\w.:-]+) \(/gm)].map((match) => match[1]!)
  const grade = (index: number) => (index * 3 + 7) % 11
  if (system.includes('"overall_assessment"')) return ANALYSIS
  if (system.includes('"winner"'))
    return JSON.stringify(system.includes('"reason"') ? { winner: 'A', reason: REASONS[0] } : { winner: 'A' })
  if (system.includes('"answers"') || system.includes('"<label>"')) {
    const labels = [...user.matchAll(/^Answer (A\d+):/gm)].map((match) => match[1]!)
    if (system.includes('"answers"'))
      return JSON.stringify({
        answers: labels.map((label) => ({
          label,
          grades: ids.map((rubric_id, i) => ({ rubric_id, grade: grade(i) })),
        })),
      })
    return JSON.stringify(Object.fromEntries(labels.map((label) => [label, gradeMap(ids, grade)])))
  }
  if (system.includes('"rubric_id"'))
    return JSON.stringify({
      grades: ids.map((rubric_id, i) => ({
        rubric_id,
        grade: grade(i),
        ...(system.includes('"reason"') ? { reason: REASONS[i % REASONS.length] } : {}),
      })),
    })
  const reasons = system.includes('"reasons"')
    ? { reasons: Object.fromEntries(ids.map((id, i) => [id, REASONS[i % REASONS.length]])) }
    : {}
  return JSON.stringify({ grades: gradeMap(ids, grade), ...reasons })
}

const gradeMap = (ids: string[], grade: (index: number) => number) =>
  Object.fromEntries(ids.map((id, i) => [id, grade(i)]))

const ANALYSIS = JSON.stringify({
  overall_assessment:
    'The answer reaches a value close to the reference but skips the check of the boundary case. ' +
    'Its steps are mostly right and easy to follow.',
  stage_performance: 'Reasonable for step 12 of 200 on a 7B model.',
  reward_hacking: { flag: false, evidence: [], severity: 'none', tactics: [] },
  advancement_strategy: 'Push the policy to verify its result against the constraints before answering.',
  rubric_effectiveness: 'The rubrics judged this answer correctly; none was fooled.',
  observations: ['Correct against the reference.', 'About 250 words, no filler.'],
})

interface Recorded {
  body: ChatCompletionBody
  reply: string
  /** The reply is longer than the request's max_tokens: a real server would have cut it (and the call failed). */
  overMaxTokens: boolean
}

export async function startRecordingStub(): Promise<{ url: string; recorded: Recorded[]; server: Server }> {
  const recorded: Recorded[] = []
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatCompletionBody
    const reply = formatReply(body)
    // Counted, not cut: the tokens a whole reply costs are what this bench measures.
    const overMaxTokens = typeof body.max_tokens === 'number' && tokens(reply) > body.max_tokens
    recorded.push({ body, reply, overMaxTokens })
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify(chatCompletion(body, reply, recorded.length)))
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : 0
  return { url: `http://127.0.0.1:${port}/v1`, recorded, server }
}

// ------------------------------------------------------------------------------------------------
// The judge paths, through a revision's own modules

/** A judge call and what the oracle may reuse of it: its group, and the texts only this call carries. */
interface Call {
  group: string
  /** Texts of this call alone (the answers it judges, and per-answer grades for the analyzer). */
  own: string[]
  /** Texts the group shares (prompt, reference). */
  shared: string[]
}

type Path = {
  name: string
  run: (modules: Modules, model: unknown, calls: Call[]) => Promise<void>
  /** Judgements per call, for completion tokens per judgement. */
  judgementsPerCall: number
}

export interface Modules {
  judgeRollout: (model: unknown, input: unknown, retry?: unknown) => Promise<unknown>
  judgeGroup: (model: unknown, input: unknown, retry?: unknown) => Promise<unknown>
  runAnalyzer: (model: unknown, input: unknown, retry?: unknown) => Promise<unknown>
  LlmVerifier: new (model: unknown, options?: unknown) => { grade(input: unknown): Promise<unknown> }
  LlmPairJudge: new (model: unknown, options?: unknown) => { compare(input: unknown): Promise<unknown> }
  SearchRubric: { parse(value: unknown): unknown }
  Candidate: { parse(value: unknown): unknown }
  PromptItem: { parse(value: unknown): unknown }
  OpenAIChatModel: new (settings: unknown) => unknown
  /** The revision's default max_tokens of a role (1,024 before this issue; unset, so per request, after). */
  defaultMaxTokens: number | undefined
}

export async function loadModules(root: string): Promise<Modules> {
  const load = (path: string) => import(pathToFileURL(join(root, path)).href)
  const [scorer, group, analyzer, roles, types, openai, runConfig] = await Promise.all([
    load('src/agents/scorer/index.ts'),
    load('src/agents/group-scorer/index.ts'),
    load('src/agents/analyzer/index.ts'),
    load('src/search/roles/index.ts'),
    load('src/search/types.ts'),
    load('src/llm/openai.ts'),
    load('src/schemas/run-config.ts'),
  ])
  // The search rubric's schema lives in src/schemas now; older revisions have it in src/search/types.ts only.
  const searchRubric = types.SearchRubric ?? (await load('src/schemas/search-rubric.ts')).SearchRubric
  return {
    judgeRollout: scorer.judgeRollout,
    judgeGroup: group.judgeGroup,
    runAnalyzer: analyzer.runAnalyzer,
    LlmVerifier: roles.LlmVerifier,
    LlmPairJudge: roles.LlmPairJudge,
    SearchRubric: searchRubric,
    Candidate: types.Candidate,
    PromptItem: types.PromptItem,
    OpenAIChatModel: openai.OpenAIChatModel,
    defaultMaxTokens: runConfig.AgentSettings.parse({}).max_tokens,
  }
}

const rubrics = () =>
  RUBRIC_IDS.map((id, i) => ({
    id,
    text: RUBRIC_TEXTS[i]!,
    weight: i === 0 ? 2 : 1,
    is_anchor: i < 2,
    version: 3,
    created_at: '2026-01-01T00:00:00.000Z',
    metadata: {},
    ...(id === 'no-grader' ? { kind: 'penalty' } : {}),
  }))
const rollout = (group: Group, answer: number) => ({
  id: `${group.id}-a${answer}`,
  input: group.prompt,
  output: group.answers[answer]!,
  supplemental_context: group.reference,
})
/**
 * An answer as an agent's trajectory: the task, a search call, the tool's result, then the answer (`rollout.messages`,
 * with the input/output text a parsed rollout derives from it).
 */
function trajectory(group: Group, answer: number) {
  const args = JSON.stringify({ q: group.answers[answer]!.slice(0, 60) })
  const result = text(`tool-${group.id}-${answer}`, 400)
  const messages = [
    { role: 'user', content: group.prompt },
    {
      role: 'assistant',
      content: '',
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'search', arguments: args } }],
    },
    { role: 'tool', tool_call_id: 'c1', content: result },
    { role: 'assistant', content: group.answers[answer]! },
  ]
  return { args, result, rollout: { ...rollout(group, answer), input: `user: ${group.prompt}`, messages } }
}
export const scorerInput = (group: Group, answer: number, extra: Record<string, unknown> = {}) => ({
  rubrics: rubrics(),
  rollout: rollout(group, answer),
  metadata: METADATA,
  gradeMax: 10,
  locale: 'en',
  ...extra,
})
const call = (group: Group, own: string[]): Call => ({ group: group.id, own, shared: [group.prompt, group.reference] })

const PATHS: Path[] = [
  {
    name: 'online scorer (/score)',
    judgementsPerCall: 1,
    run: async (m, model, calls) => {
      for (const { group, answer } of interleaved()) {
        calls.push(call(group, [group.answers[answer]!]))
        await m.judgeRollout(model, scorerInput(group, answer), { maxAttempts: 1 })
      }
    },
  },
  {
    name: 'online scorer, trajectory (call, result, answer)',
    judgementsPerCall: 1,
    run: async (m, model, calls) => {
      for (const { group, answer } of interleaved()) {
        const turns = trajectory(group, answer)
        calls.push(call(group, [turns.args, turns.result, group.answers[answer]!]))
        await m.judgeRollout(model, scorerInput(group, answer, { rollout: turns.rollout }), { maxAttempts: 1 })
      }
    },
  },
  {
    name: 'online scorer, reasons: short',
    judgementsPerCall: 1,
    run: async (m, model, calls) => {
      for (const { group, answer } of interleaved()) {
        calls.push(call(group, [group.answers[answer]!]))
        await m.judgeRollout(model, scorerInput(group, answer, { reasons: 'short' }), { maxAttempts: 1 })
      }
    },
  },
  {
    name: 'auditor (1 in 4 re-judged)',
    judgementsPerCall: 1,
    run: async (m, model, calls) => {
      for (const { group, answer } of interleaved().filter((_, index) => index % 4 === 0)) {
        calls.push(call(group, [group.answers[answer]!]))
        await m.judgeRollout(model, scorerInput(group, answer), { maxAttempts: 1 })
      }
    },
  },
  {
    name: 'group scorer (relative)',
    judgementsPerCall: GROUP,
    run: async (m, model, calls) => {
      for (const group of GROUPS) {
        calls.push(call(group, group.answers))
        const rollouts = group.answers.map((_, answer) => rollout(group, answer))
        const input = { ...scorerInput(group, 0), rollouts, seed: 7 }
        await m.judgeGroup(model, input, { maxAttempts: 1 })
      }
    },
  },
  {
    name: '/rm and search verifier',
    judgementsPerCall: 1,
    run: async (m, model, calls) => {
      const verifier = new m.LlmVerifier(model, { retry: { maxAttempts: 1 } })
      const rubric = m.SearchRubric.parse({
        rubric_id: 'r1',
        criteria: RUBRIC_IDS.map((criterion_id, i) => ({ criterion_id, text: RUBRIC_TEXTS[i], weight: 1 })),
        grading_protocol: { grade_max: 10, allow_na: false, num_votes: 1 },
      })
      for (const { group, answer } of interleaved()) {
        calls.push(call(group, [group.answers[answer]!]))
        await verifier.grade({
          item: searchItem(m, group),
          candidate: m.Candidate.parse({ candidate_id: `a${answer}`, text: group.answers[answer] }),
          rubric,
          vote: 0,
          seed: 11,
        })
      }
    },
  },
  {
    name: 'search judge (both orders)',
    judgementsPerCall: 0.5,
    run: async (m, model, calls) => {
      const judge = new m.LlmPairJudge(model, { cache: false, retry: { maxAttempts: 1 } })
      for (let answer = 0; answer < GROUP; answer += 2)
        for (const group of GROUPS) {
          const [left, right] = [answer, answer + 1].map((a) =>
            m.Candidate.parse({ candidate_id: `a${a}`, text: group.answers[a] }),
          )
          calls.push(call(group, [group.answers[answer]!, group.answers[answer + 1]!]))
          calls.push(call(group, [group.answers[answer]!, group.answers[answer + 1]!]))
          await judge.compare({ item: searchItem(m, group), left, right })
        }
    },
  },
  {
    name: 'analyzer (4 per group)',
    judgementsPerCall: 1,
    run: async (m, model, calls) => {
      for (const { group, answer } of interleaved().filter(({ answer }) => answer % 4 === 0)) {
        // Grades and reasons differ from answer to answer, as a judge's do.
        const criteria = RUBRIC_IDS.map((rubric_id, i) => ({
          rubric_id,
          grade: (i * 3 + answer) % 11,
          weight: 1,
          reason: `${REASONS[i]} (${group.id}, answer ${answer})`,
        }))
        calls.push(call(group, [group.answers[answer]!, criteria.map((c) => `${c.rubric_id}: ${c.reason}`).join('\n')]))
        await m.runAnalyzer(
          model,
          {
            rollout: rollout(group, answer),
            metadata: METADATA,
            rubrics: rubrics(),
            score: 0.6,
            criteria,
            gradeMax: 10,
            locale: 'en',
          },
          { maxAttempts: 1 },
        )
      }
    },
  },
]

const searchItem = (m: Modules, group: Group) =>
  m.PromptItem.parse({
    prompt_id: group.id,
    prompt: group.prompt,
    candidates: group.answers.slice(0, 2).map((text, i) => ({ candidate_id: `a${i}`, text })),
  })

// ------------------------------------------------------------------------------------------------
// Measuring

interface Measured {
  calls: number
  promptTokens: number
  hitShare: number
  oracleShare: number
  completionPerJudgement: number
  /** Replies longer than their request's max_tokens (calls that fail on a real server). */
  overMaxTokens: number
  /** The max_tokens the first request asked for. */
  maxTokens: number | undefined
}

const tokens = (text: string) => encode(text, { allowedSpecial: 'all' }).length
/** A text as one answer's data block, its label line and markers included: per-answer, so never reusable. */
const asBlock = (text: string) => `Answer A10:\n<<<DATA-a3f9c07d1e5b8246\n${text}\nDATA-a3f9c07d1e5b8246>>>\n`
const floorBlock = (count: number) => count - (count % 16)

function measure(recorded: Recorded[], calls: Call[], judgementsPerCall: number): Measured {
  if (recorded.length !== calls.length)
    throw new Error(`the stub recorded ${recorded.length} requests for ${calls.length} calls (a retry?)`)
  const cache = new PrefixCache()
  const seenGroups = new Set<string>()
  let prompt = 0
  let hits = 0
  let oracle = 0
  let completion = 0
  for (const [index, { body, reply }] of recorded.entries()) {
    const messages = body.messages.map((message) => ({
      role: message.role,
      content: typeof message.content === 'string' ? message.content : JSON.stringify(message.content),
    }))
    const ids = encode(chatMl(messages), { allowedSpecial: 'all' })
    const { group, own, shared } = calls[index]!
    const ownTokens = own.reduce((sum, piece) => sum + tokens(asBlock(piece)), 0)
    const sharedTokens = shared.reduce((sum, piece) => sum + tokens(piece), 0)
    prompt += ids.length
    hits += cache.lookup(ids)
    if (index > 0)
      oracle += floorBlock(Math.max(0, ids.length - ownTokens - (seenGroups.has(group) ? 0 : sharedTokens)))
    seenGroups.add(group)
    completion += tokens(reply)
  }
  return {
    calls: recorded.length,
    promptTokens: prompt / recorded.length,
    hitShare: hits / prompt,
    oracleShare: oracle / prompt,
    completionPerJudgement: completion / (recorded.length * judgementsPerCall),
    overMaxTokens: recorded.filter((entry) => entry.overMaxTokens).length,
    maxTokens: recorded[0]?.body.max_tokens as number | undefined,
  }
}

/**
 * The revision's own OpenAI adapter pointed at a recording stub, as every judge path of the bench sends through it.
 * @example const model = recordingModel(await loadModules(root), (await startRecordingStub()).url)
 */
export function recordingModel(modules: Modules, url: string) {
  return new modules.OpenAIChatModel({
    baseURL: url,
    apiKey: 'bench',
    model: 'judge',
    temperature: 0,
    ...(modules.defaultMaxTokens === undefined ? {} : { maxTokens: modules.defaultMaxTokens }),
    timeoutMs: 30_000,
  })
}

async function measureRevision(root: string, label: string): Promise<Map<string, Measured>> {
  const modules = await loadModules(root)
  const results = new Map<string, Measured>()
  for (const path of PATHS) {
    const stub = await startRecordingStub()
    try {
      const model = recordingModel(modules, stub.url)
      const calls: Call[] = []
      await path.run(modules, model, calls)
      results.set(path.name, measure(stub.recorded, calls, path.judgementsPerCall))
    } catch (error) {
      console.error(`${label}: ${path.name} failed: ${(error as Error).message}`)
    } finally {
      stub.server.close()
    }
  }
  return results
}

const pct = (value: number) => `${(value * 100).toFixed(1)} %`

async function main() {
  const { values } = parseArgs({ options: { before: { type: 'string' } } })
  const after = await measureRevision(resolve(import.meta.dirname, '..'), 'this tree')
  let before: Map<string, Measured> | undefined
  if (values.before) {
    const checkedOut = checkoutRevision(values.before, 'bench-judge-')
    try {
      before = await measureRevision(checkedOut.root, values.before)
    } finally {
      checkedOut.remove()
    }
  }
  console.log(`\nbench:judge — ${PROMPTS} prompts × ${GROUP} answers, 5 rubrics; tokens by gpt-tokenizer (o200k_base)`)
  console.log(`command: ${COMMAND}\n`)
  const header = [
    'path',
    'calls',
    'prompt tok/call',
    'hit share',
    'oracle',
    'hit ÷ oracle',
    'completion tok/judgement',
    'max_tokens',
    'over max_tokens',
  ]
  const rows: string[][] = []
  for (const path of PATHS) {
    const now = after.get(path.name)
    const then = before?.get(path.name)
    if (!now) continue
    const pair = (f: (m: Measured) => string) => (then ? `${f(then)} → ${f(now)}` : f(now))
    rows.push([
      path.name,
      pair((m) => String(m.calls)),
      pair((m) => m.promptTokens.toFixed(0)),
      pair((m) => pct(m.hitShare)),
      pair((m) => pct(m.oracleShare)),
      pair((m) => (m.oracleShare > 0 ? (m.hitShare / m.oracleShare).toFixed(2) : '–')),
      pair((m) => m.completionPerJudgement.toFixed(1)),
      pair((m) => String(m.maxTokens ?? '–')),
      pair((m) => String(m.overMaxTokens)),
    ])
  }
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)))
  const line = (cells: string[]) => cells.map((cell, column) => cell.padEnd(widths[column]!)).join(' | ')
  console.log(line(header))
  console.log(widths.map((width) => '-'.repeat(width)).join('-|-'))
  for (const row of rows) console.log(line(row))
  if (before) console.log(`\nbefore → after: ${values.before} → this tree`)
}

// bench/real-judge.ts imports the load and the recording stub without running this bench.
const isMain = process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)
if (isMain) await main()
