/**
 * The step protocol against its reference model (`tests/support/step-model.ts`), driven by fast-check: random runs
 * (async or sync, steps closed by count or by `/complete`) receive rounds of requests sent at once through every
 * scoring route (`/score`, `/score/batch` with repeated ids, `/score/group` with identical answers,
 * `/compat/openrlhf`, `/compat/slime`), late and concurrent retries, rollouts too large to store, `/complete`, and
 * resets of the run's objects. After each run every unanswered rollout is sent again, as a trainer would, and the
 * ledger and the archive of its closed steps must hold exactly what the trainers were told. A failing run prints its
 * seed and path: `npm run test:model -- --seed <seed> --path <path>` replays it; `--runs N` runs more (MODEL_RUNS,
 * MODEL_SEED and MODEL_PATH are the bindings it sets).
 */
import { runInDurableObject } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { LATE_RETRY_STEPS } from '../../durable-objects/ledger-shard/rows.ts'
import { coordinatorName, ledgerName } from '../../durable-objects/names.ts'
import { sha256Hex } from '../../src/hash/index.ts'
import { occurrences } from '../../workers/routes/compat.ts'
import { type Answer, type Row, StepModel } from '../support/step-model.ts'
import { METADATA, call, createRun, resetObject } from './helpers.ts'

const SHARDS = 2
// An adaptive rubric too, so the mock's updates move the version step by step (rollouts judged on the old one).
const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.', weight: 2 }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps of the calculation.' }],
}
/** Short answers, so identical ones are common (a GRPO group at low temperature). */
const RESPONSES = ['4', 'The answer is 4.', 'It is 5.', '4, because 2+2=4.']
const PROMPT = 'What is 2+2?'
const HUGE = '\u0001'.repeat(200_000)

type Pick = { retry: boolean; index: number }
type Command =
  | { kind: 'score'; pick: Pick; response: number }
  | { kind: 'batch'; picks: Pick[]; response: number }
  | { kind: 'group'; responses: number[] }
  | { kind: 'openrlhf'; responses: number[] }
  | { kind: 'slime'; response: number }
  | { kind: 'oversized' }
  | { kind: 'complete' }
  | { kind: 'reset'; target: number }

const pick = fc.record({ retry: fc.boolean(), index: fc.nat(50) })
const response = fc.nat(RESPONSES.length - 1)
const command: fc.Arbitrary<Command> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('score' as const), pick, response }), weight: 4 },
  {
    arbitrary: fc.record({ kind: fc.constant('batch' as const), picks: fc.array(pick, { maxLength: 6 }), response }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('group' as const),
      responses: fc.array(response, { minLength: 1, maxLength: 6 }),
    }),
    weight: 2,
  },
  {
    arbitrary: fc.record({ kind: fc.constant('openrlhf' as const), responses: fc.array(response, { maxLength: 5 }) }),
    weight: 1,
  },
  { arbitrary: fc.record({ kind: fc.constant('slime' as const), response }), weight: 1 },
  { arbitrary: fc.constant({ kind: 'oversized' as const }), weight: 1 },
  { arbitrary: fc.constant({ kind: 'complete' as const }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('reset' as const), target: fc.nat(SHARDS) }), weight: 1 },
)
const scenario = fc.record({
  counted: fc.boolean(),
  perStep: fc.integer({ min: 2, max: 5 }),
  // Sync runs wait up to max_wait_s (1 s) on a step that is not full: one run in four.
  sync: fc.nat(3).map((draw) => draw === 0),
  rounds: fc.array(fc.array(command, { minLength: 1, maxLength: 3 }), { minLength: 2, maxLength: 7 }),
})
type Scenario = { counted: boolean; perStep: number; sync: boolean; rounds: Command[][] }

/** What a run has sent so far: the `/score` ids it made up, and how to send each rollout again. */
interface Sent {
  ids: string[]
  resend: Map<string, () => Promise<void>>
}

const LONGEST = { rounds: 0, requests: 0 }

describe('the step protocol, against its model', () => {
  it('holds for random interleavings of every scoring route, retries, large items and resets', async () => {
    const runs = Number(env.MODEL_RUNS || 20)
    const seed = env.MODEL_SEED ? Number(env.MODEL_SEED) : undefined
    const path = env.MODEL_PATH || undefined
    await fc.assert(
      fc.asyncProperty(scenario, async (drawn) => {
        const violations = await runScenario(drawn)
        expect(violations, JSON.stringify(drawn)).toEqual([])
      }),
      { numRuns: runs, ...(seed === undefined ? {} : { seed }), ...(path ? { path } : {}), endOnFailure: true },
    )
    console.log(`step model: ${runs} runs, the longest ${LONGEST.rounds} rounds and ${LONGEST.requests} answers`)
  }, 600_000)
})

async function runScenario(drawn: Scenario): Promise<string[]> {
  const perStep = drawn.counted ? drawn.perStep : null
  const run = await createRun({
    ...RUBRICS,
    rollouts_per_step: perStep,
    mode: drawn.sync ? 'sync' : 'async',
    max_wait_s: 1,
    ledger_shards: SHARDS,
    ledger_retention_steps: 100,
    archive: true,
  })
  const model = new StepModel({ perStep, lateRetrySteps: LATE_RETRY_STEPS, sync: drawn.sync })
  const sent: Sent = { ids: [], resend: new Map() }
  for (const round of drawn.rounds) await Promise.all(round.map((one) => send(run, one, model, sent)))
  // A trainer sends again what got no answer; a 503 says when.
  for (let attempt = 0; attempt < 5 && model.unanswered().length > 0; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 1_100))
    await Promise.all(model.unanswered().map((id) => sent.resend.get(id)?.()))
  }
  LONGEST.rounds = Math.max(LONGEST.rounds, drawn.rounds.length)
  LONGEST.requests = Math.max(LONGEST.requests, model.count)
  // The trainer is done: a run closed by /complete closes its last step.
  if (perStep === null) await call('POST', '/complete', { token: run.token })
  const rows = await ledgerRows(run.runId)
  // A full step closes on its own shortly after its last seat was leased (the coordinator's sweep), unread.
  const expected = perStep === null ? undefined : Math.floor(rows.length / perStep)
  const collecting = await closedThrough(run.runId, expected)
  return [
    ...model.violations(rows, perStep === null ? undefined : collecting),
    ...stillUnanswered(model),
    ...(await archiveViolations(run.runId, rows, collecting)),
  ]
}

function stillUnanswered(model: StepModel): string[] {
  return model.unanswered().map((id) => `${id} never got a 200 answer after 5 retries`)
}

type Run = { runId: string; token: string }

async function send(run: Run, one: Command, model: StepModel, sent: Sent): Promise<void> {
  switch (one.kind) {
    case 'score':
      return scoreOne(run, idOf(sent, one.pick), RESPONSES[one.response]!, model, sent)
    case 'batch':
      return scoreBatch(
        run,
        one.picks.map((picked) => idOf(sent, picked)),
        RESPONSES[one.response]!,
        model,
        sent,
      )
    case 'group':
      return scoreGroup(
        run,
        one.responses.map((index) => RESPONSES[index]!),
        model,
        sent,
      )
    case 'openrlhf':
      return scoreOpenRlhf(
        run,
        one.responses.map((index) => RESPONSES[index]!),
        model,
        sent,
      )
    case 'slime':
      return scoreSlime(run, RESPONSES[one.response]!, model, sent)
    case 'oversized': {
      const res = await call('POST', '/score', {
        token: run.token,
        body: { rollout: { id: 'huge', input: PROMPT, output: HUGE, supplemental_context: HUGE }, metadata: METADATA },
      })
      if (res.status !== 413 || res.json?.error?.code !== 'payload_too_large')
        throw new Error(`an oversized rollout was answered ${res.status} ${res.text.slice(0, 200)}`)
      return
    }
    case 'complete':
      await call('POST', '/complete', { token: run.token })
      return
    case 'reset':
      return resetObject(
        one.target === 0
          ? env.RUN_COORDINATOR.getByName(coordinatorName(run.runId))
          : env.LEDGER.getByName(ledgerName(run.runId, 'global', one.target - 1)),
      )
  }
}

/** A new id, or one sent before (a retry: late or concurrent, whichever the round makes it). */
function idOf(sent: Sent, picked: Pick): string {
  if (picked.retry && sent.ids.length > 0) return sent.ids[picked.index % sent.ids.length]!
  const id = `m-${sent.ids.length}`
  sent.ids.push(id)
  return id
}

async function scoreOne(run: Run, id: string, output: string, model: StepModel, sent: Sent): Promise<void> {
  const body = {
    rollout: { id, input: PROMPT, output: `${output} (${id})`, supplemental_context: '4' },
    metadata: METADATA,
  }
  const once = async () => {
    const res = await call('POST', '/score', { token: run.token, body })
    model.answered(answerOf('/score', id, res.status, res.json, res.headers.get('retry-after')))
  }
  sent.resend.set(id, once)
  await once()
}

async function scoreBatch(run: Run, ids: string[], output: string, model: StepModel, sent: Sent): Promise<void> {
  if (ids.length === 0) return
  const items = ids.map((id) => ({
    rollout: { id, input: PROMPT, output: `${output} (${id})`, supplemental_context: '4' },
    metadata: METADATA,
  }))
  const once = async () => {
    const res = await call('POST', '/score/batch', { token: run.token, body: { items } })
    ids.forEach((id, index) => {
      const result = res.status === 200 ? res.json.results[index] : res.json
      const status = res.status === 200 ? (result.error ? statusOf(result.error.code) : 200) : res.status
      model.answered(answerOf('/score/batch', id, status, result, res.headers.get('retry-after') ?? '1'))
    })
  }
  for (const id of ids) sent.resend.set(id, once)
  await once()
}

async function scoreGroup(run: Run, responses: string[], model: StepModel, sent: Sent): Promise<void> {
  const body = { prompt: PROMPT, responses, reference: '4' }
  const ids = await contentIds(
    'group',
    responses.map((text) => `${PROMPT}\u0000${text}`),
  )
  const once = async () => {
    const res = await call('POST', '/score/group', { token: run.token, body })
    ids.forEach((id, index) => {
      const answer: Answer =
        res.status === 200
          ? {
              rolloutId: id,
              route: '/score/group',
              status: 200,
              version: res.json.rubric_versions[index],
              score: res.json.scores[index],
            }
          : answerOf('/score/group', id, res.status, res.json, res.headers.get('retry-after'))
      if (res.status === 200 && res.json.rollout_ids[index] !== id) throw new Error(`group ids are not ${ids}`)
      model.answered(answer)
    })
  }
  for (const id of ids) sent.resend.set(id, once)
  await once()
}

async function scoreOpenRlhf(run: Run, responses: string[], model: StepModel, sent: Sent): Promise<void> {
  const prompt = `<|user|>${PROMPT}<|assistant|>`
  const body = {
    query: responses.map((text) => prompt + text),
    prompts: responses.map(() => prompt),
    labels: responses.map(() => '4'),
  }
  const ids = await contentIds('orlhf', body.query)
  const once = async () => {
    const res = await call('POST', '/compat/openrlhf', { token: run.token, body })
    ids.forEach((id, index) => {
      const logs = res.json?.extra_logs
      model.answered(
        res.status === 200
          ? {
              rolloutId: id,
              route: '/compat/openrlhf',
              status: 200,
              version: logs.rubric_version[index],
              score: res.json.rewards[index],
              duplicate: logs.duplicate[index] === 1,
            }
          : answerOf('/compat/openrlhf', id, res.status, res.json, res.headers.get('retry-after')),
      )
    })
  }
  for (const id of ids) sent.resend.set(id, once)
  await once()
}

async function scoreSlime(run: Run, response: string, model: StepModel, sent: Sent): Promise<void> {
  const [id] = await contentIds('slime', [`${PROMPT}\u0000${response}`], false)
  const once = async () => {
    const res = await call('POST', '/compat/slime', {
      token: run.token,
      body: { prompt: PROMPT, response, label: '4' },
    })
    model.answered(answerOf('/compat/slime', id!, res.status, res.json, res.headers.get('retry-after')))
  }
  sent.resend.set(id!, once)
  await once()
}

/** The ids the compat routes give samples: content hashes, the k-th copy of one content in a request with `#k`. */
async function contentIds(prefix: string, contents: string[], counted = true): Promise<string[]> {
  const named = counted ? occurrences(contents) : contents
  return Promise.all(named.map(async (content) => `${prefix}-${(await sha256Hex(content)).slice(0, 32)}`))
}

function answerOf(route: string, rolloutId: string, status: number, json: any, retryAfter: string | null): Answer {
  if (status !== 200) return { rolloutId, route, status, code: json?.error?.code ?? json?.code, retryAfter }
  return {
    rolloutId,
    route,
    status,
    step: json.step,
    version: json.rubric_version,
    score: json.score,
    duplicate: json.duplicate,
  }
}

function statusOf(code: string): number {
  return code === 'overloaded' || code === 'llm_unavailable' ? 503 : code === 'payload_too_large' ? 413 : 400
}

async function ledgerRows(runId: string): Promise<Row[]> {
  const rows: Row[] = []
  for (let shard = 0; shard < SHARDS; shard++) {
    const kept = await runInDurableObject(env.LEDGER.getByName(ledgerName(runId, 'global', shard)), (_o, state) => {
      const exists = state.storage.sql.exec(`SELECT count(*) AS n FROM sqlite_master WHERE name = 'ledger'`).one().n
      if (!exists) return []
      return state.storage.sql
        .exec<{ rollout_id: string; step: number; rubric_version: number; score: number }>(
          'SELECT rollout_id, step, rubric_version, score FROM ledger',
        )
        .toArray()
    })
    for (const row of kept)
      rows.push({
        instanceId: 'global',
        rolloutId: row.rollout_id,
        step: row.step,
        version: row.rubric_version,
        score: row.score,
      })
  }
  return rows
}

/** The step the run collects once it is `expected` (or after 5 s, whatever it is then; at once with none). */
async function closedThrough(runId: string, expected: number | undefined): Promise<number> {
  let collecting = await collectingStep(runId)
  for (
    const deadline = Date.now() + 5_000;
    expected !== undefined && collecting !== expected && Date.now() < deadline;
  ) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    collecting = await collectingStep(runId)
  }
  return collecting
}

/**
 * The archive of the closed steps must hold what the ledger holds, row for row (and so what the trainers were told):
 * each shard writes a closed step once its update has committed, so this waits for it (10 s at most).
 */
async function archiveViolations(runId: string, rows: readonly Row[], collecting: number): Promise<string[]> {
  const key = (row: Row) => `${row.step} ${row.rolloutId} v${row.version} ${row.score}`
  const expected = rows
    .filter((row) => row.step < collecting)
    .map(key)
    .sort()
  let archived: string[] = []
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
    archived = (await archivedRows(runId)).map(key).sort()
    if (JSON.stringify(archived) === JSON.stringify(expected)) return []
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  const missing = expected.filter((row) => !archived.includes(row))
  const extra = archived.filter((row) => !expected.includes(row))
  return [`the archive of steps before ${collecting} lacks [${missing.join('; ')}] and has [${extra.join('; ')}]`]
}

async function archivedRows(runId: string): Promise<Row[]> {
  const listed = await env.ARCHIVE!.list({ prefix: `runs/${runId}/steps/` })
  const texts = await Promise.all(listed.objects.map(async (object) => (await env.ARCHIVE!.get(object.key))!.text()))
  return texts
    .join('')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line))
    .map((line) => ({
      instanceId: line.instance_id,
      rolloutId: line.rollout_id,
      step: line.step,
      version: line.rubric_version,
      score: line.score,
    }))
}

async function collectingStep(runId: string): Promise<number> {
  return runInDurableObject(env.RUN_COORDINATOR.getByName(coordinatorName(runId)), (_o, state) => {
    const row = state.storage.sql
      .exec<{ value: string }>(`SELECT value FROM meta WHERE key = 'collecting_step'`)
      .toArray()[0]
    return row ? Number(row.value) : 0
  })
}
