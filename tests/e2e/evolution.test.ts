/**
 * Online rubric evolution against a real `wrangler dev` (queues, Durable Objects, D1, the local vector
 * index) with every agent on the stub LLM: what memory the Updater is shown (static summaries and the
 * documents its QueryGenerator's queries retrieve), how its proposals become rubric versions (anchors
 * untouchable, malformed replies harmless), that `/score` never waits on a slow Analyzer, and that a
 * failing Analyzer is retried by the queue and counted once.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import {
  agentOf,
  gradeAllRubrics,
  startLlmStub,
  type ChatCompletionBody,
  type LlmStub,
  type StubAgent,
  type StubFault,
} from '../support/llm-stub.ts'
import { callJson, METADATA } from './support/http.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

/** Every agent's attempts per call: a queue delivery of a failing job costs two stub requests. */
const MAX_ATTEMPTS = 2

const ANCHORS = [
  { id: 'anchor-correct', text: 'The final number equals the reference result.', weight: 2 },
  { id: 'anchor-format', text: 'The answer ends with one line of the form "Answer: <number>".', weight: 1 },
]
const ADAPTIVE = [
  { id: 'adaptive-steps', text: 'Each intermediate product is written out.', weight: 1 },
  { id: 'adaptive-brief', text: 'The answer is at most five lines long.', weight: 1 },
  { id: 'adaptive-units', text: 'Units are named where the prompt names them.', weight: 1 },
]

interface Rubric {
  id: string
  text: string
  weight: number
  is_anchor: boolean
}
interface MemoryDoc {
  id: string
  kind: string
  step: number
  text: string
  data: Record<string, any>
}
interface Run {
  runId: string
  token: string
}

/** What the stub answers, per agent; each test sets the parts it needs (see `beforeEach`). */
interface Scenario {
  /** The QueryGenerator's queries at a step. */
  queries(step: number): string[]
  /** The Updater's reply (message content) at a step, given its prompt. */
  updater(step: number, prompt: string): string
  /** Markers whose Analyzer requests still get an HTTP 500 (one per request, counted down). */
  analyzerFailures: Map<string, number>
  /** Waits before an Updater reply is sent. */
  updaterDelayMs: number
  /** Updater requests still to get an HTTP 500 (counted down). */
  updaterFailures: number
  /** The scorer's reply (message content), given its request. */
  scorer(body: ChatCompletionBody): string
  /** The relative (group) scorer's reply, given its request. */
  groupScorer(body: ChatCompletionBody): string
}
let scenario: Scenario

let dev: WranglerDev
let stub: LlmStub

// ---------------------------------------------------------------------------------------------
// The stub's agents
// ---------------------------------------------------------------------------------------------

const userOf = (body: ChatCompletionBody) => body.messages.find((m) => m.role === 'user')?.content ?? ''
/** A rollout carries `[marker <word>]` in its prompt; the Analyzer's reply repeats the word. */
const markerIn = (text: string) => text.match(/\[marker ([a-z]+)\]/)?.[1]
/** The step a summarizer prompt is about: `Step <n>: …`. */
const summarizerStep = (prompt: string) => Number(prompt.match(/^Step (\d+):/m)?.[1])
/** The step a QueryGenerator prompt is about: the summary's memory entry names it. */
const queryStep = (prompt: string) => Number(prompt.match(/memo-step-(\d+)/)?.[1])
/** The step an Updater prompt is about: `Training context: goal "…", step <n>, …`. */
const updaterStep = (prompt: string) => Number(prompt.match(/^Training context: goal ".*", step (\d+),/m)?.[1])

/** The Analyzer's text for a marked rollout: the marker three times, so it dominates the document's vector. */
const analysisFor = (marker: string | undefined) => ({
  overall_assessment: marker ? `Distinctive finding ${marker} ${marker} ${marker}.` : 'An ordinary answer.',
  stage_performance: '',
  reward_hacking: { flag: false, evidence: [], severity: 'none', tactics: [] },
  advancement_strategy: '',
  rubric_effectiveness: '',
  observations: [],
})

/** The step's memory entry: distinctive per step, and free of every rollout marker. */
const memoFor = (step: number) =>
  `memo-step-${step} ledger ${['amberwell', 'birchmoor', 'cedarfell', 'dunmarsh', 'elmhollow', 'fernvale'][step % 6]}`
const summaryFor = (step: number) => ({
  executive_summary: `Summary of step ${step}.`,
  systemic_patterns: [],
  reward_hacking: { count: 0, tactics: [], examples: [] },
  rubric_meta_evaluation: 'The rubrics separated the answers.',
  evolution_plan: 'Keep the rubrics sharp.',
  memory_entry: memoFor(step),
})

/** The current adaptive rubrics an Updater prompt lists: `- <id> (adaptive, weight <w>): <text>`. */
function adaptiveIn(prompt: string): { id: string; text: string; weight: number }[] {
  return [...prompt.matchAll(/^- ([\w.:-]+) \(adaptive, weight ([\d.]+)\): (.*)$/gm)].map((m) => ({
    id: m[1]!,
    weight: Number(m[2]),
    text: m[3]!,
  }))
}

/** A valid Updater reply that keeps the adaptive set it was shown. */
function keepAll(step: number, prompt: string): string {
  return JSON.stringify({
    strategy: 'MAINTENANCE',
    consulted_memories: [],
    rationale: `Nothing to change at step ${step}.`,
    modifications: [],
    final_adaptive: adaptiveIn(prompt),
  })
}

/** A valid Updater reply that keeps the adaptive set and adds one criterion. */
function addOne(step: number, prompt: string): string {
  return JSON.stringify({
    strategy: 'ADVANCEMENT',
    consulted_memories: [],
    rationale: `Raise the bar at step ${step}.`,
    modifications: [{ op: 'add', text: `Criterion number ${step} holds.`, weight: 1, reason: 'stub' }],
    final_adaptive: [...adaptiveIn(prompt), { text: `Criterion number ${step} holds.`, weight: 1 }],
  })
}

/**
 * The stub's interceptor: a slow or failing Analyzer or Updater, as the scenario asks; every other agent answers at
 * once.
 */
async function slowOrFailingAgents(body: ChatCompletionBody): Promise<StubFault | undefined> {
  if (agentOf(body) === 'updater') {
    if (scenario.updaterFailures > 0) {
      scenario.updaterFailures--
      return { kind: 'status', status: 500 }
    }
    if (scenario.updaterDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, scenario.updaterDelayMs))
    return undefined
  }
  if (agentOf(body) !== 'analyzer') return undefined
  const marker = markerIn(userOf(body)) ?? ''
  const failures = scenario.analyzerFailures.get(marker) ?? 0
  if (failures > 0) {
    scenario.analyzerFailures.set(marker, failures - 1)
    return { kind: 'status', status: 500 }
  }
  return undefined
}

const grade = gradeAllRubrics(7)
function reply(body: ChatCompletionBody): string {
  const prompt = userOf(body)
  const agent: StubAgent | undefined = agentOf(body)
  switch (agent) {
    case 'scorer':
      return scenario.scorer(body)
    case 'group_scorer':
      return scenario.groupScorer(body)
    case 'analyzer':
      return JSON.stringify(analysisFor(markerIn(prompt)))
    case 'summarizer':
    case 'meta_summarizer':
      return JSON.stringify(summaryFor(summarizerStep(prompt)))
    case 'query_generator':
      return JSON.stringify({ queries: scenario.queries(queryStep(prompt)) })
    case 'updater':
      return scenario.updater(updaterStep(prompt), prompt)
    default:
      return 'unknown agent'
  }
}

/** A group prompt's answers in the order shown: `Answer <label>:` and the text inside its data block. */
function answersIn(prompt: string): { label: string; text: string }[] {
  return [...prompt.matchAll(/^Answer (A\d+):\n<<<DATA-\w+\n([\s\S]*?)\nDATA-\w+>>>/gm)].map((m) => ({
    label: m[1]!,
    text: m[2]!,
  }))
}

/** A valid group reply: each answer graded by its length (mod 11) on every criterion, so equal texts grade alike. */
function gradeByLength(body: ChatCompletionBody): string {
  const prompt = userOf(body)
  const ids = [...prompt.matchAll(/^- ([\w.:-]+) \(weight [\d.]+\):/gm)].map((match) => match[1]!)
  return JSON.stringify({
    answers: answersIn(prompt).map(({ label, text }) => ({
      label,
      grades: ids.map((rubric_id) => ({ rubric_id, grade: text.length % 11 })),
    })),
  })
}

/** The stub requests of one agent since index `from`. */
const requestsOf = (agent: StubAgent, from = 0) => stub.requests.slice(from).filter((body) => agentOf(body) === agent)

// ---------------------------------------------------------------------------------------------
// The Worker
// ---------------------------------------------------------------------------------------------

async function createRun(extra: Record<string, unknown> = {}): Promise<Run> {
  const created = await callJson(`${dev.baseUrl}/runs`, {
    token: dev.adminToken,
    body: {
      config: {
        anchor_rubrics: ANCHORS,
        adaptive_rubrics: ADAPTIVE,
        rubric_update_frequency: 1,
        static_memory_steps: 2,
        dynamic_memory_limit_per_query: 2,
        agents: {
          default: {
            backend: 'openai',
            base_url: stub.baseUrl,
            model: 'stub-model',
            max_attempts: MAX_ATTEMPTS,
            timeout_ms: 15_000,
          },
        },
        ...extra,
      },
    },
  })
  expect(created.status, JSON.stringify(created.body)).toBe(201)
  return { runId: created.body.run_id, token: created.body.token }
}

/** Scores a rollout whose prompt carries `marker`; returns the answer. */
async function score(run: Run, id: string, marker: string, step: number) {
  const rollout = {
    id,
    input: `Compute 17 * ${step + 3} [marker ${marker}]`,
    output: `Answer: ${17 * (step + 3)}`,
    supplemental_context: String(17 * (step + 3)),
  }
  const answer = await callJson(`${dev.baseUrl}/score`, {
    token: run.token,
    body: { rollout, metadata: { ...METADATA, current_step: step } },
  })
  expect(answer.status, JSON.stringify(answer.body)).toBe(200)
  return { body: answer.body }
}

/** POST /complete, then the long poll until the step's update is done. */
async function completeStep(run: Run) {
  const completed = await callJson(`${dev.baseUrl}/complete`, { token: run.token, method: 'POST' })
  expect(completed.status, JSON.stringify(completed.body)).toBe(200)
  expect(completed.body).toMatchObject({ status: 'complete', closed: true })
  const waited = await callJson(`${dev.baseUrl}/rubric_status/wait?timeout_s=45`, {
    token: run.token,
    timeoutMs: 50_000,
  })
  expect(waited.status, waited.status === 200 ? '' : stalled(waited.body)).toBe(200)
  expect(waited.body).toMatchObject({ status: 'updated', step: completed.body.step, pending: 0 })
  return waited.body
}

/**
 * Why a step did not finish, for the failure message. `wrangler dev` rebuilds and reloads the Worker when a
 * source file changes (other people edit this tree), and a reload drops the local queues' in-flight messages:
 * the step then waits for the coordinator's resend, minutes away. That is named, so it is not taken for a Worker bug.
 */
function stalled(status: unknown): string {
  const logs = dev.logs()
  const reload = /Reloading local server/.test(logs)
    ? 'wrangler dev reloaded the Worker during the test (a source file changed on disk), ' +
      'which drops queued messages; rerun on a quiet tree.\n'
    : ''
  const tail = logs.split('\n').slice(-60).join('\n')
  return `${reload}step not updated: ${JSON.stringify(status)}\n--- wrangler dev ---\n${tail}`
}

async function memory(run: Run, kind: string): Promise<MemoryDoc[]> {
  const answer = await callJson(`${dev.baseUrl}/memory?kind=${kind}&limit=200`, { token: run.token })
  expect(answer.status).toBe(200)
  return answer.body.documents
}

async function rubrics(run: Run) {
  const answer = await callJson(`${dev.baseUrl}/rubrics`, { token: run.token })
  expect(answer.status).toBe(200)
  return answer.body as { rubric_version: number; anchor_rubrics: Rubric[]; adaptive_rubrics: Rubric[] }
}

async function history(run: Run) {
  const answer = await callJson(`${dev.baseUrl}/rubrics/history`, { token: run.token })
  expect(answer.status).toBe(200)
  return answer.body.versions as {
    version: number
    step: number | null
    strategy: string | null
    rationale: string | null
    diff: Record<string, any> | null
    refused: string[]
    rubrics: Rubric[]
  }[]
}

/** A memory document as the Updater prompt shows it (see formatMemoriesForPrompt). */
const memoryBlock = (source: 'recent' | 'retrieved', doc: MemoryDoc) =>
  `<memory source="${source}" kind="${doc.kind}" step="${doc.step}" instance="global">\n${doc.text}\n</memory>`

beforeAll(async () => {
  stub = await startLlmStub()
  stub.respondWith(reply)
  stub.intercept(slowOrFailingAgents)
  // Failed queue jobs are retried at once, so a step whose update keeps failing ends within the test.
  dev = await startWranglerDev({ vars: { QUEUE_RETRY_BASE_S: '0' } })
})

afterAll(async () => {
  await dev?.stop()
  await stub?.close()
})

beforeEach(() => {
  scenario = {
    queries: () => ['criterion'],
    updater: addOne,
    analyzerFailures: new Map(),
    updaterDelayMs: 0,
    updaterFailures: 0,
    scorer: grade,
    groupScorer: gradeByLength,
  }
})

afterEach(() => {
  // Every request came from a known agent: a prompt that drifts from prompts/en/*.system.txt fails here, not by
  // accident.
  expect(
    stub.requests.filter((body) => agentOf(body) === undefined).map((body) => body.messages[0]?.content.slice(0, 80)),
  ).toEqual([])
})

// ---------------------------------------------------------------------------------------------

describe('memory the Updater is shown', () => {
  /** Per step, the markers of its three rollouts (each word in one analysis only). */
  const MARKERS = [
    ['zephyrine', 'quokkafold', 'marzipanic'],
    ['obsidiant', 'narwhalian', 'glockenspur'],
    ['fjordwick', 'xylophant', 'brambleton'],
    ['tamarindo', 'pelicorne', 'vortigan'],
  ]
  /** Per step, the one query the QueryGenerator writes: two markers, so both retrieval slots go to their analyses. */
  const QUERIES = ['zephyrine quokkafold', 'marzipanic obsidiant', 'narwhalian xylophant', 'glockenspur tamarindo']
  /** Per step, the rollouts whose analyses the query names. */
  const NAMED = [
    ['s0-0', 's0-1'],
    ['s0-2', 's1-0'],
    ['s1-1', 's2-1'],
    ['s1-2', 's3-0'],
  ]
  const markerOf = (rolloutId: string) => {
    const [step, k] = rolloutId.slice(1).split('-').map(Number)
    return MARKERS[step!]![k!]!
  }

  it('holds the last static_memory_steps summaries and exactly the documents the queries retrieve', async () => {
    scenario.queries = (step) => [QUERIES[step]!]
    const run = await createRun()
    const prompts: string[] = []
    for (let step = 0; step < MARKERS.length; step++) {
      const from = stub.requests.length
      for (const [k, marker] of MARKERS[step]!.entries()) await score(run, `s${step}-${k}`, marker, step)
      const status = await completeStep(run)
      expect(status.analyses).toMatchObject({ analysed: 3, failed: 0 })
      expect(status.instances[0].update).toMatchObject({ changed: true, strategy: 'ADVANCEMENT', analysed: 3 })
      const updaters = requestsOf('updater', from)
      expect(updaters).toHaveLength(1)
      expect(requestsOf('query_generator', from)).toHaveLength(1)
      prompts.push(userOf(updaters[0]!))
      expect(updaterStep(prompts[step]!)).toBe(step)
    }

    const analyses = await memory(run, 'analysis')
    expect(analyses).toHaveLength(12)
    const analysisOf = new Map(analyses.map((doc) => [String(doc.data.rollout_id), doc]))
    const summaries = await memory(run, 'batch_summary')
    const summaryOf = (step: number) => summaries.find((doc) => doc.step === step)!
    expect(summaries.map((doc) => doc.step).sort()).toEqual([0, 1, 2, 3])
    for (const doc of summaries) expect(doc.text).toContain(memoFor(doc.step))

    // Static memory: the memory entries of the previous steps' summaries, at most static_memory_steps of them, oldest
    // first.
    const recent = (prompt: string) =>
      [...prompt.matchAll(/<memory source="recent" kind="batch_summary" step="(\d+)"/g)].map((m) => Number(m[1]))
    expect(recent(prompts[0]!)).toEqual([])
    expect(recent(prompts[1]!)).toEqual([0])
    expect(recent(prompts[2]!)).toEqual([0, 1])
    expect(recent(prompts[3]!)).toEqual([1, 2])
    expect(prompts[2]).toContain(memoryBlock('recent', summaryOf(0)))
    expect(prompts[2]).toContain(memoryBlock('recent', summaryOf(1)))
    expect(prompts[2]).toContain(memoFor(0))
    expect(prompts[2]).toContain(memoFor(1))
    expect(prompts[3]).toContain(memoFor(1))
    expect(prompts[3]).toContain(memoFor(2))
    // Step 0 left the window of step 3 (and no query retrieves it).
    expect(prompts[3]).not.toContain(memoFor(0))

    // Dynamic memory: each step's query retrieves the analyses holding its markers and nothing else;
    // changing the query changes what the Updater sees.
    const updates = await memory(run, 'rubric_update')
    expect(updates.map((doc) => doc.step).sort()).toEqual([0, 1, 2, 3])
    for (let step = 0; step < MARKERS.length; step++) {
      const prompt = prompts[step]!
      const named = NAMED[step]!.map((id) => analysisOf.get(id)!)
      for (const doc of named) expect(prompt).toContain(memoryBlock('retrieved', doc))
      const retrieved = [...prompt.matchAll(/<memory source="retrieved" kind="(\w+)" step="\d+"/g)].map((m) => m[1])
      expect(retrieved).toEqual(['analysis', 'analysis'])
      for (const [id, doc] of analysisOf) {
        if (NAMED[step]!.includes(id)) continue
        expect(prompt, `step ${step}'s updater prompt shows the analysis of ${id}`).not.toContain(doc.text)
        expect(prompt).not.toContain(markerOf(id))
      }
      const update = updates.find((doc) => doc.step === step)!
      expect(update.data.queries).toEqual([QUERIES[step]])
      // Best match first, so the order of the two is the index's: compare as sets.
      expect([...update.data.retrieved].sort()).toEqual(named.map((doc) => doc.id).sort())
    }
    // The documents retrieved at step 2 were not shown at step 1, and the other way round.
    expect(prompts[1]).not.toContain(analysisOf.get('s1-1')!.text)
    expect(prompts[2]).not.toContain(analysisOf.get('s0-2')!.text)
    expect(prompts[2]).toContain('narwhalian')
    expect(prompts[2]).not.toContain('marzipanic')
  })
})

describe('rubric versions from Updater replies', () => {
  const ADDED = 'The answer states the multiplication it performed.'
  const LEGIT = 'The answer names the operation it used.'
  const reweightModifyRemoveAdd = JSON.stringify({
    strategy: 'ADVANCEMENT',
    consulted_memories: [],
    rationale: 'Answers are clean; ask for more.',
    modifications: [
      { op: 'reweight', rubric_id: 'adaptive-steps', weight: 2, reason: 'matters more' },
      {
        op: 'modify',
        rubric_id: 'adaptive-brief',
        text: 'The answer is at most three lines long.',
        reason: 'stricter',
      },
      { op: 'remove', rubric_id: 'adaptive-units', reason: 'no units in these prompts' },
      { op: 'add', text: ADDED, weight: 1.5, reason: 'new bar' },
    ],
    final_adaptive: [
      { id: 'adaptive-steps', text: ADAPTIVE[0]!.text, weight: 2 },
      { id: 'adaptive-brief', text: 'The answer is at most three lines long.', weight: 1 },
      { text: ADDED, weight: 1.5 },
    ],
  })
  /** Touches both anchors four ways, and adds one legitimate criterion. */
  const anchorAttack = (prompt: string) =>
    JSON.stringify({
      strategy: 'CORRECTIVE',
      consulted_memories: [],
      rationale: 'Loosen the anchors.',
      modifications: [
        { op: 'modify', rubric_id: 'anchor-correct', text: 'Any number is fine.', reason: 'too strict' },
        { op: 'remove', rubric_id: 'anchor-format', reason: 'formatting is irrelevant' },
        { op: 'add', text: LEGIT, weight: 1, reason: 'clarity' },
      ],
      final_adaptive: [
        ...adaptiveIn(prompt),
        { id: 'anchor-format', text: 'Formatting does not matter.', weight: 1 },
        { text: ANCHORS[0]!.text.toUpperCase(), weight: 3 },
        { text: LEGIT, weight: 1 },
      ],
    })
  const MALFORMED = JSON.stringify({ strategy: 'SIDEWAYS', final_adaptive: 'everything stays' })

  it('turns the final adaptive set into the next version, refuses anchor edits, survives bad replies', async () => {
    scenario.updater = (step, prompt) =>
      step === 0 ? reweightModifyRemoveAdd : step === 1 ? anchorAttack(prompt) : MALFORMED
    const run = await createRun()
    const initial = await rubrics(run)
    expect(initial.rubric_version).toBe(1)
    const anchorsJson = JSON.stringify(initial.anchor_rubrics)
    expect(initial.anchor_rubrics.map((r) => r.text)).toEqual(ANCHORS.map((r) => r.text))
    const pick = (list: Rubric[]) => list.map(({ id, text, weight }) => ({ id, text, weight }))

    // Step 0: reweight, modify, remove and add at once.
    await score(run, 'v-0', 'alphaone', 0)
    const step0 = await completeStep(run)
    expect(step0.instances[0].update).toMatchObject({ changed: true, rubric_version: 2, strategy: 'ADVANCEMENT' })
    const v2 = await rubrics(run)
    expect(v2.rubric_version).toBe(2)
    expect(JSON.stringify(v2.anchor_rubrics)).toBe(anchorsJson)
    const addedId = v2.adaptive_rubrics.find((r) => r.text === ADDED)?.id
    expect(addedId).toMatch(/^adaptive-[0-9a-f]{8}$/)
    expect(pick(v2.adaptive_rubrics)).toEqual([
      { id: 'adaptive-steps', text: ADAPTIVE[0]!.text, weight: 2 },
      { id: 'adaptive-brief', text: 'The answer is at most three lines long.', weight: 1 },
      { id: addedId, text: ADDED, weight: 1.5 },
    ])
    let versions = await history(run)
    expect(versions.map((v) => v.version)).toEqual([1, 2])
    expect(versions[1]).toMatchObject({
      version: 2,
      step: 0,
      strategy: 'ADVANCEMENT',
      rationale: 'Answers are clean; ask for more.',
      refused: [],
      diff: {
        added: [addedId],
        removed: ['adaptive-units'],
        modified: ['adaptive-brief'],
        reweighted: ['adaptive-steps'],
      },
    })

    // The next rollout is judged on version 2: the scorer sees the new set.
    let from = stub.requests.length
    const scored = await score(run, 'v-1', 'betatwo', 1)
    expect(scored.body.rubric_version).toBe(2)
    const scorerPrompt = userOf(requestsOf('scorer', from)[0]!)
    expect(scorerPrompt).toContain(ADDED)
    expect(scorerPrompt).not.toContain(ADAPTIVE[2]!.text)

    // Step 1: every part touching an anchor is refused, the legitimate addition is applied.
    const step1 = await completeStep(run)
    expect(step1.instances[0].update).toMatchObject({ changed: true, rubric_version: 3, strategy: 'CORRECTIVE' })
    const v3 = await rubrics(run)
    expect(v3.rubric_version).toBe(3)
    expect(JSON.stringify(v3.anchor_rubrics)).toBe(anchorsJson)
    const legitId = v3.adaptive_rubrics.find((r) => r.text === LEGIT)?.id
    expect(legitId).toMatch(/^adaptive-[0-9a-f]{8}$/)
    expect(pick(v3.adaptive_rubrics)).toEqual([...pick(v2.adaptive_rubrics), { id: legitId, text: LEGIT, weight: 1 }])
    versions = await history(run)
    expect(versions.map((v) => v.version)).toEqual([1, 2, 3])
    expect(versions[2]).toMatchObject({
      version: 3,
      step: 1,
      strategy: 'CORRECTIVE',
      diff: { added: [legitId], removed: [], modified: [], reweighted: [] },
    })
    expect(versions[2]!.refused).toEqual([
      expect.stringMatching(/modify.*anchor 'anchor-correct'/),
      expect.stringMatching(/remove.*anchor 'anchor-format'/),
      expect.stringMatching(/reuses anchor id 'anchor-format'/),
      expect.stringMatching(/repeats anchor 'anchor-correct'/),
    ])
    // Anchors byte-for-byte identical in every version.
    for (const version of versions)
      expect(JSON.stringify(version.rubrics.filter((r) => r.is_anchor)), `version ${version.version}`).toBe(anchorsJson)

    // Step 2: the Updater answers malformed on every attempt; version 3 stays, the step completes.
    from = stub.requests.length
    await score(run, 'v-2', 'gammathree', 2)
    const step2 = await completeStep(run)
    expect(step2.instances[0].update).toMatchObject({ changed: false, rubric_version: 3, analysed: 1 })
    expect(step2.instances[0].update.error).toMatch(/updater reply has the wrong shape/)
    // Every attempt was refused by the parser, and that delivery committed "no change" at once: a redelivery would
    // ask the model the same question (the queue redelivers only failures that may heal).
    expect(requestsOf('updater', from)).toHaveLength(MAX_ATTEMPTS)
    const v3again = await rubrics(run)
    expect(v3again).toEqual(v3)
    expect((await history(run)).map((v) => v.version)).toEqual([1, 2, 3])
    expect((await score(run, 'v-3', 'deltafour', 3)).body.rubric_version).toBe(3)
  })
})

describe('the Analyzer at step close', () => {
  it('answers /score without the analyzer, analyses nothing until the step closes, then counts each', async () => {
    const run = await createRun()
    const from = stub.requests.length
    const markers = ['slowalpha', 'slowbravo', 'slowcharlie', 'slowdelta']
    for (const [k, marker] of markers.entries()) {
      await score(run, `slow-${k}`, marker, 0)
      // Each answer came back with its one scorer call made and no analyzer call: /score never waits on an analysis.
      expect(requestsOf('scorer', from)).toHaveLength(k + 1)
      expect(requestsOf('analyzer', from)).toHaveLength(0)
    }
    expect(await memory(run, 'analysis'), 'analyses stored right after scoring').toHaveLength(0)

    const status = await completeStep(run)
    expect(status.analyses).toMatchObject({
      analysed: markers.length,
      failed: 0,
      reasons: { score_range: markers.length },
    })
    expect(status.instances[0].update).toMatchObject({ analysed: markers.length, changed: true })
    const stored = await memory(run, 'analysis')
    expect(stored.map((doc) => doc.data.rollout_id).sort()).toEqual(markers.map((_, k) => `slow-${k}`))
    // Each analysed once (another run's leftover analysis may share the stub, hence the filter).
    expect(
      requestsOf('analyzer', from)
        .map((body) => markerIn(userOf(body)))
        .filter((m) => markers.includes(m!))
        .sort(),
    ).toEqual(markers)
  })

  it('retries the step job through the queue when every analysis failed, and counts each analysis once', async () => {
    // 2 failures with 2 attempts per delivery: the first delivery's analyses all fail, the queue's redelivery succeeds.
    scenario.analyzerFailures = new Map([
      ['flakymarker', 2],
      ['flakytwo', 2],
    ])
    const run = await createRun()
    const from = stub.requests.length
    await score(run, 'flaky', 'flakymarker', 0)
    await score(run, 'flaky-2', 'flakytwo', 0)
    const status = await completeStep(run)
    expect(scenario.analyzerFailures.get('flakymarker')).toBe(0)
    const analyzerCalls = (marker: string) =>
      requestsOf('analyzer', from).filter((body) => markerIn(userOf(body)) === marker).length
    expect(analyzerCalls('flakymarker')).toBe(MAX_ATTEMPTS + 1)
    expect(analyzerCalls('flakytwo')).toBe(MAX_ATTEMPTS + 1)
    expect(status.analyses).toMatchObject({ analysed: 2, failed: 0 })
    expect(status.instances[0].update).toMatchObject({ analysed: 2 })
    let stored = await memory(run, 'analysis')
    expect(stored.map((doc) => doc.data.rollout_id).sort()).toEqual(['flaky', 'flaky-2'])

    // The next step counts only its own rollout: the retried analysis is not counted again.
    await score(run, 'later', 'latermarker', 1)
    const next = await completeStep(run)
    expect(next.analyses).toMatchObject({ analysed: 1, failed: 0 })
    stored = await memory(run, 'analysis')
    expect(stored.map((doc) => doc.data.rollout_id).sort()).toEqual(['flaky', 'flaky-2', 'later'])
  })

  it('counts an analysis that keeps failing as failed and completes the step with the others', async () => {
    scenario.analyzerFailures = new Map([['doomedmarker', 1_000]])
    const run = await createRun()
    await score(run, 'doomed', 'doomedmarker', 0)
    await score(run, 'fine', 'finemarker', 0)
    const status = await completeStep(run)
    expect(status.analyses).toMatchObject({ analysed: 1, failed: 1 })
    expect((await memory(run, 'analysis')).map((doc) => doc.data.rollout_id)).toEqual(['fine'])
  })
})

describe('step updates under backlog', () => {
  it("resumes a failed Updater's job from saved analyses and summary: only the update reruns, version +1", async () => {
    // Every attempt of the first delivery fails; the queue's redelivery succeeds.
    scenario.updaterFailures = MAX_ATTEMPTS
    const run = await createRun()
    const from = stub.requests.length
    for (const [k, marker] of ['resumeone', 'resumetwo', 'resumethree'].entries())
      await score(run, `resume-${k}`, marker, 0)
    const status = await completeStep(run)
    expect(status.instances[0].update).toMatchObject({ changed: true, rubric_version: 2, analysed: 3 })
    expect(scenario.updaterFailures).toBe(0)
    // A restart from zero would have analysed and summarised again (3 + 1 calls more); the retry asked only the
    // query generator and the updater again.
    const calls = (agent: StubAgent) => requestsOf(agent, from).length
    expect({
      analyzer: calls('analyzer'),
      summarizer: calls('summarizer'),
      query_generator: calls('query_generator'),
      updater: calls('updater'),
    }).toEqual({ analyzer: 3, summarizer: 1, query_generator: 2, updater: MAX_ATTEMPTS + 1 })
    expect((await history(run)).map((v) => [v.version, v.step])).toEqual([
      [1, null],
      [2, 0],
    ])
  })

  it('runs two steps closed back to back, slow Updater, in turn: version 2 from step 0, version 3 on it', async () => {
    scenario.updaterDelayMs = 2_000
    const run = await createRun()
    const from = stub.requests.length
    await score(run, 'b2b-0', 'backone', 0)
    expect((await callJson(`${dev.baseUrl}/complete`, { token: run.token, method: 'POST' })).body).toMatchObject({
      closed: true,
      step: 0,
    })
    await score(run, 'b2b-1', 'backtwo', 1)
    // Step 1 closes while step 0's update is still with the Updater.
    expect((await callJson(`${dev.baseUrl}/complete`, { token: run.token, method: 'POST' })).body).toMatchObject({
      closed: true,
      step: 1,
    })
    for (const step of [0, 1]) {
      const waited = await callJson(`${dev.baseUrl}/rubric_status/wait?timeout_s=45`, {
        token: run.token,
        timeoutMs: 50_000,
      })
      expect(waited.status, stalled(waited.body)).toBe(200)
      expect(waited.body).toMatchObject({ status: 'updated', step })
    }
    const versions = await history(run)
    expect(versions.map((v) => [v.version, v.step])).toEqual([
      [1, null],
      [2, 0],
      [3, 1],
    ])
    // Step 1's Updater was asked once, after version 2 existed, and saw step 0's criterion among the rubrics in force.
    const updaters = requestsOf('updater', from)
    expect(updaters.map((body) => updaterStep(userOf(body)))).toEqual([0, 1])
    expect(adaptiveIn(userOf(updaters[1]!)).map((r) => r.text)).toContain('Criterion number 0 holds.')
    expect(versions[2]!.rubrics.map((r) => r.text)).toEqual(
      expect.arrayContaining(['Criterion number 0 holds.', 'Criterion number 1 holds.']),
    )
  })
})

describe('criterion health', () => {
  /** Grades that differ from request to request, except `adaptive-units`: 5 for every response. */
  function oneDeadCriterion() {
    let request = 0
    return (body: ChatCompletionBody): string => {
      request++
      const ids = [...userOf(body).matchAll(/^- ([\w.:-]+) \(weight [\d.]+\):/gm)].map((match) => match[1]!)
      const grades = ids.map((rubric_id, index) => ({
        rubric_id,
        grade: rubric_id === 'adaptive-units' ? 5 : (request * 3 + index) % 11,
        reason: 'stub',
      }))
      return JSON.stringify({ grades })
    }
  }

  async function stats(run: Run) {
    const answer = await callJson(`${dev.baseUrl}/rubrics/stats`, { token: run.token })
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    return answer.body.criteria as {
      rubric_id: string
      is_anchor: boolean
      active: boolean
      steps: { step: number; within_group_std: number | null; n: number }[]
    }[]
  }

  it('shows a criterion that grades a group alike at spread 0, and retires it after retire_after_steps', async () => {
    scenario.updater = keepAll
    scenario.scorer = oneDeadCriterion()
    const run = await createRun({ retire_after_steps: 2 })
    const anchorsAtStart = (await rubrics(run)).anchor_rubrics
    const from = stub.requests.length
    for (const step of [0, 1]) {
      // One group per step: four responses to the same prompt.
      for (const k of [0, 1, 2, 3]) {
        const rollout = {
          id: `health-${step}-${k}`,
          input: `Compute 17 * 3 [marker health] step ${step}`,
          output: `Answer: ${51 + k} (attempt ${k})`,
          supplemental_context: '51',
        }
        const answer = await callJson(`${dev.baseUrl}/score`, {
          token: run.token,
          body: { rollout, metadata: { ...METADATA, current_step: step } },
        })
        expect(answer.status, JSON.stringify(answer.body)).toBe(200)
      }
      await completeStep(run)
      const units = (await stats(run)).find((entry) => entry.rubric_id === 'adaptive-units')!
      expect(units.steps.at(-1)).toMatchObject({ step, within_group_std: 0, n: 4 })
      for (const entry of (await stats(run)).filter((item) => item.rubric_id !== 'adaptive-units'))
        expect(entry.steps.at(-1)!.within_group_std).toBeGreaterThan(0)
      if (step === 0) expect((await rubrics(run)).rubric_version).toBe(1)
    }

    // The Updater was shown each adaptive criterion's health.
    const prompt = userOf(requestsOf('updater', from)[0]!)
    expect(prompt).toMatch(/^- adaptive-units: spread 0\.000, mean 0\.50, top 0%, bottom 0%/m)
    // Step 1 retired it in a version that says why; the anchors are untouched and the other criteria stay.
    const versions = await history(run)
    const retiring = versions.at(-1)!
    expect(retiring.step).toBe(1)
    expect(retiring.diff?.retired).toEqual([
      {
        rubric_id: 'adaptive-units',
        reason: expect.stringMatching(/within-group spread below 0\.02 for 2 consecutive steps/),
      },
    ])
    const now = await rubrics(run)
    expect(now.anchor_rubrics).toEqual(anchorsAtStart)
    expect(now.adaptive_rubrics.map((rubric) => rubric.id)).toEqual(['adaptive-steps', 'adaptive-brief'])
    expect((await stats(run)).find((entry) => entry.rubric_id === 'adaptive-units')).toMatchObject({ active: false })
  })
})

describe('the audit judge', () => {
  const AUDITOR = 'auditor-model'
  const defaults = {
    backend: 'openai',
    base_url: '',
    model: 'stub-model',
    max_attempts: MAX_ATTEMPTS,
    timeout_ms: 15_000,
  }

  it('re-judges a sampled share with a second model that disagrees, and shows the divergence per step', async () => {
    // The judge gives 7 of 10 to every criterion; the auditor, on purpose, 0.
    const judge = gradeAllRubrics(7)
    const harsh = gradeAllRubrics(0)
    scenario.scorer = (body) => (body.model === AUDITOR ? harsh(body) : judge(body))
    scenario.updater = keepAll
    const run = await createRun({
      audit: { sample: 0.25 },
      agents: { default: { ...defaults, base_url: stub.baseUrl }, auditor: { model: AUDITOR } },
    })
    const from = stub.requests.length
    for (let k = 0; k < 16; k++) await score(run, `audit-${k}`, `audit${'abcdefghijklmnop'[k]}`, 0)
    const status = await completeStep(run)
    const audit = status.instances[0].update.audit
    const auditorCalls = stub.requests.slice(from).filter((body) => body.model === AUDITOR).length
    // About a quarter of the 16 scores, each re-judged once by the auditor and by no one else.
    expect(audit.sampled).toBeGreaterThanOrEqual(1)
    expect(audit.sampled).toBeLessThan(16)
    expect(auditorCalls).toBe(audit.sampled)
    expect(audit).toMatchObject({
      judged: audit.sampled,
      auditor: `openai:${stub.baseUrl}#${AUDITOR}`,
      rank_corr: null,
    })
    expect(audit.mean_abs_diff).toBeCloseTo(0.7, 10)

    const page = await fetch(`${dev.baseUrl}/dashboard/runs/${run.runId}`, {
      headers: { authorization: `Bearer ${run.token}` },
    })
    expect(page.status).toBe(200)
    expect(await page.text()).toMatch(
      new RegExp(`<td data-audit="true">\\|Δ\\| 0\\.70 · ρ — \\(${audit.sampled} of ${audit.sampled}\\)</td>`),
    )

    // The lineage of a training run that ran under this harness run carries the audit.
    const manifest = await callJson(`${dev.baseUrl}/lineage/manifests`, {
      token: run.token,
      body: {
        schema_version: '1.0',
        run_id: `${run.runId}.grpo`,
        trainer: { name: 'verl' },
        model: { name: 'qwen-7b' },
        dataset: { id: 'math', version: 'v1' },
        artifact_id: 'online-rubrics',
        started_at: '2026-11-26T00:00:00Z',
      },
    })
    expect(manifest.status, JSON.stringify(manifest.body)).toBe(201)
    const chain = await callJson(`${dev.baseUrl}/lineage/runs/${run.runId}.grpo`, { token: run.token })
    expect(chain.status, JSON.stringify(chain.body)).toBe(200)
    expect(chain.body.judge_audit).toEqual([{ step: 0, instance_id: 'global', ...audit }])
  })
})

describe('relative group judging', () => {
  /** 16 responses to one prompt: 12 distinct, the last four repeating the first four. */
  const RESPONSES = Array.from({ length: 16 }, (_, k) => `Answer: ${51 + (k % 12)}${' because'.repeat(k % 12)}`)

  async function scoreGroup(run: Run, seed: number, responses = RESPONSES) {
    const answer = await callJson(`${dev.baseUrl}/score/group`, {
      token: run.token,
      body: {
        prompt: 'Compute 17 * 3 [marker grouped]',
        responses,
        reference: '51',
        seed,
      },
    })
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    return answer.body
  }

  it('judges a group of 16 in one call, in a seeded order, identical responses alike', async () => {
    const run = await createRun({ group_scoring: 'relative' })
    const from = stub.requests.length
    const body = await scoreGroup(run, 1)
    const calls = stub.requests.slice(from)
    expect(calls.map((request) => agentOf(request))).toEqual(['group_scorer'])
    // Identical responses are judged once (12 distinct in the prompt) and get identical scores.
    const shown = answersIn(userOf(calls[0]!))
    expect(shown).toHaveLength(12)
    for (let k = 12; k < 16; k++) expect(body.scores[k]).toBe(body.scores[k - 12])
    expect(body.judging).toMatchObject({ mode: 'relative', seed: 1, groups: 1, group_calls: 1, fallbacks: [] })
    // Graded by length: the scores follow the texts, whatever label or position each had.
    expect(body.scores[0]).not.toBe(body.scores[1])

    // The same group again is a retry the ledger answers: no call.
    const retry = await scoreGroup(run, 1)
    expect(retry.scores).toEqual(body.scores)
    expect(retry.judging).toMatchObject({ groups: 0, group_calls: 0 })
    expect(stub.requests.length).toBe(from + 1)
    // Under another seed (another run, so no cache) the judge sees another order, and grades the same.
    const other = await createRun({ group_scoring: 'relative' })
    const again = await scoreGroup(other, 2)
    const reordered = answersIn(userOf(stub.requests.at(-1)!))
    expect(reordered.map((answer) => answer.text)).not.toEqual(shown.map((answer) => answer.text))
    expect(again.scores).toEqual(body.scores)
  })

  it('falls back to pointwise judging when the group reply is malformed, and says so', async () => {
    scenario.groupScorer = () => '{"answers": [{"label": "A1", "grades": []}]}'
    const run = await createRun({
      group_scoring: 'relative',
      agents: {
        default: {
          backend: 'openai',
          base_url: stub.baseUrl,
          model: 'stub-model',
          max_attempts: 1,
          timeout_ms: 15_000,
        },
      },
    })
    const distinct = Array.from({ length: 16 }, (_, k) => `Answer: ${51 + k}`)
    const from = stub.requests.length
    const body = await scoreGroup(run, 3, distinct)
    const agents = stub.requests.slice(from).map((request) => agentOf(request))
    expect(agents.filter((agent) => agent === 'group_scorer')).toHaveLength(1)
    expect(agents.filter((agent) => agent === 'scorer')).toHaveLength(16)
    expect(body.judging).toMatchObject({ mode: 'relative_with_fallback', group_calls: 1 })
    expect(body.judging.fallbacks).toEqual([{ responses: 16, reason: expect.stringMatching(/no grades|grades for/) }])
    expect(body.scores).toHaveLength(16)
    for (const score of body.scores) expect(score).toBeCloseTo(0.7, 10)
  })
})
