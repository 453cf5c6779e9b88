import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import type { ScoreResult } from '../../src/schemas/score.ts'
import { Outbox } from '../../workers/outbox/index.ts'
import type { AnalysisJob } from '../../workers/queues/messages.ts'
import { writeRecords, type RequestRecords } from '../../workers/scoring/persist.ts'
import { pendingAnalyses } from '../../workers/scoring/score-rollout.ts'

const scoreOf = (runId: string, rolloutId: string, score: number): ScoreResult => ({
  score, rubric_version: 2, instance_id: 'global', criteria: [{ rubric_id: 'a', grade: 7, weight: 1 }], request_id: `req-${rolloutId}`,
  run_id: runId, rollout_id: rolloutId, step: 3, grade_max: 10, duplicate: false, cached: true,
})
const call = { attempt: 1, role: 'scorer', model: 'stub:m', outcome: 'ok', latency_ms: 12, prompt_tokens: 100, completion_tokens: 20, at: '2026-11-22T00:00:00.000Z' } as const

async function rowsOf(runId: string) {
  const events = await env.DB.prepare('SELECT rollout_id, step, rubric_version, score, criteria, cached, duplicate, request_id FROM score_events WHERE run_id = ? ORDER BY rollout_id').bind(runId).all()
  const calls = await env.DB.prepare('SELECT role, model, outcome, latency_ms, prompt_tokens, completion_tokens, request_id, created_at FROM llm_calls WHERE run_id = ? ORDER BY request_id').bind(runId).all()
  return { events: events.results, calls: calls.results }
}

describe('D1 records', () => {
  it('writes any number of rows in one statement per table, with every column in place', async () => {
    const runId = 'persist-write'
    const batch = Array.from({ length: 30 }, (_, i) => ({ runId, requestId: `req-${String(i).padStart(2, '0')}`, scores: [scoreOf(runId, `r${String(i).padStart(2, '0')}`, i / 30)], calls: [call] }))
    await writeRecords(env.DB, batch)
    const { events, calls } = await rowsOf(runId)
    // 30 rows × 11 columns would be 330 bound parameters: more than D1 allows in one statement.
    expect(events).toHaveLength(30)
    expect(events[1]).toEqual({ rollout_id: 'r01', step: 3, rubric_version: 2, score: 1 / 30, criteria: JSON.stringify([{ rubric_id: 'a', grade: 7, weight: 1 }]), cached: 1, duplicate: 0, request_id: 'req-01' })
    expect(calls).toHaveLength(30)
    expect(calls[0]).toEqual({ role: 'scorer', model: 'stub:m', outcome: 'ok', latency_ms: 12, prompt_tokens: 100, completion_tokens: 20, request_id: 'req-00', created_at: call.at })
  })

  it('holds rows until the flush delay, then writes them together inside the deferred work', async () => {
    const runId = 'persist-delay'
    const outbox = new Outbox<D1Database, RequestRecords>({ what: 'records', maxItems: 100, flushAfterMs: 50, write: writeRecords })
    const deferred: Promise<unknown>[] = []
    for (const id of ['a', 'b', 'c']) outbox.add(env.DB, { runId, requestId: id, scores: [scoreOf(runId, id, 0.5)], calls: [call] }, (work) => deferred.push(work))
    expect(deferred).toHaveLength(1)
    expect((await rowsOf(runId)).events).toHaveLength(0)
    await Promise.all(deferred)
    const { events, calls } = await rowsOf(runId)
    expect(events.map((row) => row.rollout_id)).toEqual(['a', 'b', 'c'])
    expect(calls).toHaveLength(3)
  })

  it('writes at once when maxItems are waiting; a request that produced nothing adds no row', async () => {
    const runId = 'persist-full'
    const outbox = new Outbox<D1Database, RequestRecords>({ what: 'records', maxItems: 3, flushAfterMs: 60_000, write: writeRecords })
    const deferred: Promise<unknown>[] = []
    outbox.add(env.DB, { runId, requestId: 'empty', calls: [] }, (work) => deferred.push(work))
    outbox.add(env.DB, { runId, requestId: 'x', scores: [scoreOf(runId, 'x', 1)], calls: [] }, (work) => deferred.push(work))
    outbox.add(env.DB, { runId, requestId: 'y', calls: [call] }, (work) => deferred.push(work))
    // The first add scheduled the (minute-long) timer; the third filled the outbox and wrote at once.
    expect(deferred).toHaveLength(2)
    await deferred[1]
    const { events, calls } = await rowsOf(runId)
    expect(events.map((row) => row.rollout_id)).toEqual(['x'])
    expect(calls.map((row) => row.request_id)).toEqual(['y'])
  })
})

describe('analysis job outbox', () => {
  it('sends the waiting rollouts as jobs of one instance each, at most 6 rollouts per job, in one sendBatch', async () => {
    const sent: { body: AnalysisJob }[][] = []
    const queue = { sendBatch: async (messages: { body: AnalysisJob }[]) => void sent.push(messages) } as unknown as Queue<AnalysisJob>
    const single = (instanceId: string, rolloutId: string): AnalysisJob => ({ type: 'analysis', runId: 'bundle-run', instanceId, rollouts: [{ step: 2, rollout_id: rolloutId }] })
    const deferred: Promise<unknown>[] = []
    // Interleaved, as concurrent /score calls of two instances add them.
    for (let i = 0; i < 8; i++) pendingAnalyses.add(queue, single('i-a', `a${i}`), (work) => deferred.push(work))
    for (let i = 0; i < 3; i++) pendingAnalyses.add(queue, single('i-b', `b${i}`), (work) => deferred.push(work))
    await Promise.all(deferred)
    expect(sent).toHaveLength(1)
    const jobs = sent[0]!.map(({ body }) => body)
    expect(jobs.map((job) => [job.instanceId, job.rollouts.map((key) => key.rollout_id)])).toEqual([
      ['i-a', ['a0', 'a1', 'a2', 'a3', 'a4', 'a5']],
      ['i-a', ['a6', 'a7']],
      ['i-b', ['b0', 'b1', 'b2']],
    ])
    expect(jobs.every((job) => job.type === 'analysis' && job.runId === 'bundle-run' && job.rollouts.every((key) => key.step === 2))).toBe(true)
  })
})
