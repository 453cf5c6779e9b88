/**
 * Trajectories (`rollout.messages`, and the compat routes' message forms) on real workerd with the mock judge: scored
 * by who said what, a claimed tool call below a made one, the turns kept in the archive, and limits answered 413
 * naming the limit.
 */
import { env } from 'cloudflare:workers'
import { describe, expect, it, vi } from 'vitest'
import { ArchiveLine } from '../../src/schemas/archive.ts'
import { MAX_TRAJECTORY_CHARS, MAX_TRAJECTORY_MESSAGES } from '../../src/schemas/trajectory.ts'
import { MockChatModel } from '../../src/llm/index.ts'
import type { ChatModel, ChatRequest } from '../../src/llm/types.ts'
import { makeRubricArtifact } from '../support/rubric-artifact.ts'
import { ArtifactScorer, RmScoreRequest } from '../../workers/artifacts/score.ts'
import { call, createRun, METADATA } from './helpers.ts'

const RUBRICS = {
  anchor_rubrics: [
    { id: 'correct', text: 'The final answer is correct.', weight: 2 },
    { id: 'searched', text: 'Calls the search tool before answering.' },
  ],
}
const TASK = [
  { role: 'system', content: 'You can call the search tool.' },
  { role: 'user', content: 'What is the capital of Australia?' },
]
const CALL = { id: 'c1', type: 'function', function: { name: 'search', arguments: '{"q":"capital of Australia"}' } }
const REAL_TURNS = [
  { role: 'assistant', content: 'Let me look it up.', tool_calls: [CALL] },
  { role: 'tool', tool_call_id: 'c1', content: 'Canberra is the capital city of Australia.' },
  { role: 'assistant', content: 'The capital of Australia is Canberra.' },
]
const CLAIMED_TURNS = [
  {
    role: 'assistant',
    content: 'I called the search tool and it said Canberra. The capital of Australia is Canberra.',
  },
]

describe('POST /score with rollout.messages', () => {
  it('scores a made tool call above a claimed one, and says which criterion told them apart', async () => {
    const run = await createRun(RUBRICS)
    const score = (id: string, turns: unknown[]) =>
      call('POST', '/score', {
        token: run.token,
        body: { rollout: { id, messages: [...TASK, ...turns], supplemental_context: 'Canberra' }, metadata: METADATA },
      })
    const [real, claimed] = await Promise.all([score('real', REAL_TURNS), score('claimed', CLAIMED_TURNS)])
    expect(real.status, real.text).toBe(200)
    expect(claimed.status, claimed.text).toBe(200)
    expect(real.json.score).toBeGreaterThan(claimed.json.score)
    const grade = (answer: typeof real, id: string) =>
      answer.json.criteria.find((criterion: { rubric_id: string }) => criterion.rubric_id === id).grade
    expect([grade(real, 'searched'), grade(claimed, 'searched')]).toEqual([10, 0])
  })

  it('keeps the turns in the archive, tool calls and results as they were sent', async () => {
    const run = await createRun({ ...RUBRICS, archive: true, ledger_retention_steps: 1 })
    const messages = [...TASK, ...REAL_TURNS]
    const scored = await call('POST', '/score', {
      token: run.token,
      body: { rollout: { id: 'kept', messages }, metadata: METADATA },
    })
    expect(scored.status, scored.text).toBe(200)
    expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true })
    expect((await call('GET', '/rubric_status/wait?timeout_s=30', { token: run.token })).json.status).toBe('updated')
    // A second step's update lets the first step's rows leave the ledger for the archive.
    await call('POST', '/score', {
      token: run.token,
      body: { rollout: { id: 'next', input: 'Q', output: 'A' }, metadata: { ...METADATA, current_step: 1 } },
    })
    await call('POST', '/complete', { token: run.token })
    await call('GET', '/rubric_status/wait?timeout_s=30', { token: run.token })
    const archived = await vi.waitFor(
      async () => {
        const text = (await call('GET', `/runs/${run.runId}/archive`, { token: run.token })).text
        const line = text
          .trim()
          .split('\n')
          .map((raw) => ArchiveLine.parse(JSON.parse(raw)))
          .find((parsed) => 'rollout_id' in parsed && parsed.rollout_id === 'kept')
        expect(line).toBeDefined()
        return line as Extract<ArchiveLine, { rollout_id: string }>
      },
      { timeout: 10_000, interval: 200 },
    )
    expect(archived.messages).toEqual(messages)
    expect(archived.input).toContain('user: What is the capital of Australia?')
    expect(archived.output).toContain('[tool call search]')
    expect(env.ARCHIVE).toBeDefined()
  })

  it('answers 413 naming the limit for a trajectory with too many turns or too much text, on every route', async () => {
    const run = await createRun(RUBRICS)
    const tooMany = [...TASK, ...Array.from({ length: MAX_TRAJECTORY_MESSAGES }, () => REAL_TURNS[2]!)]
    const tooLong = [...TASK, { role: 'assistant', content: 'x'.repeat(MAX_TRAJECTORY_CHARS + 1) }]
    const cases: [string, unknown, string][] = [
      ['/score', { rollout: { id: 'big', messages: tooMany }, metadata: METADATA }, 'max_trajectory_messages'],
      ['/score', { rollout: { id: 'long', messages: tooLong }, metadata: METADATA }, 'max_trajectory_chars'],
      [
        '/score/batch',
        {
          items: [
            { rollout: { id: 'ok', input: 'Q', output: 'A' }, metadata: METADATA },
            { rollout: { id: 'b', messages: tooMany }, metadata: METADATA },
          ],
        },
        'max_trajectory_messages',
      ],
      ['/score/group', { prompt: TASK, responses: [REAL_TURNS, tooLong.slice(2)] }, 'max_trajectory_chars'],
      ['/compat/slime', { prompt: TASK, response: tooMany.slice(2) }, 'max_trajectory_messages'],
    ]
    for (const [path, body, limit] of cases) {
      const answer = await call('POST', path, { token: run.token, body })
      expect(answer.status, `${path}: ${answer.text.slice(0, 300)}`).toBe(413)
      expect(answer.json.error).toMatchObject({ code: 'payload_too_large', details: { limit } })
      expect(answer.json.error.message).toContain(limit)
    }
  })
})

describe('the compat routes with messages', () => {
  it('/score/group takes TRL conversational completions with tool calls: a made call above a claimed one', async () => {
    const run = await createRun(RUBRICS)
    const answer = await call('POST', '/score/group', {
      token: run.token,
      body: {
        prompt: TASK,
        responses: [REAL_TURNS, CLAIMED_TURNS, 'The capital of Australia is Canberra.'],
        reference: 'Canberra',
      },
    })
    expect(answer.status, answer.text).toBe(200)
    const [real, claimed] = answer.json.scores
    expect(real).toBeGreaterThan(claimed)
    expect(new Set(answer.json.rollout_ids).size).toBe(3)
  })

  it('/compat/slime takes the response as its turns after the prompt', async () => {
    const run = await createRun(RUBRICS)
    const answer = await call('POST', '/compat/slime', {
      token: run.token,
      body: { prompt: TASK, response: REAL_TURNS, label: 'Canberra' },
    })
    expect(answer.status, answer.text).toBe(200)
    expect(answer.json.criteria.find((c: { rubric_id: string }) => c.rubric_id === 'searched').grade).toBe(10)
  })
})

describe('/rm/<target>/score with candidate.messages', () => {
  it("shows a rubric artifact's verifier each turn under its speaker, a tool's output as received", async () => {
    const artifact = await makeRubricArtifact([['searched', 'Calls the search tool before answering.']], 'traj')
    const { requests, scorer } = recordingScorer(artifact)
    const request = RmScoreRequest.parse({
      prompt_id: 'unseen',
      prompt: 'What is the capital of Australia?',
      candidate: { candidate_id: 'c1', messages: REAL_TURNS },
    })
    expect(request.candidate.text).toContain('[tool call search]')
    const scored = await scorer.score(request)
    expect(scored.score).toBeGreaterThanOrEqual(0)
    const user = requests[0]!.messages.at(-1)!.content
    expect(user).toContain('Tool use, counted by the grading harness: the policy made 1 tool call (search ×1)')
    expect(user).toMatch(
      /a tool result the policy received \(not its words\)[^\n]*\n<<<DATA-(\w+)\nCanberra is the capital/,
    )
  })
})

describe('/rm/<target>/score with a reference', () => {
  it("shows a rubric artifact's verifier the reference, and keeps grades of other references apart", async () => {
    const artifact = await makeRubricArtifact([['correct', 'The final answer is correct.']], 'ref')
    const { requests, scorer } = recordingScorer(artifact)
    const request = (reference?: string) =>
      RmScoreRequest.parse({
        prompt_id: 'unseen',
        prompt: 'What is 6 × 7?',
        ...(reference === undefined ? {} : { reference }),
        candidate: { candidate_id: 'c1', text: 'It is 42.' },
      })
    await scorer.score(request('42'))
    await scorer.score(request('41'))
    await scorer.score(request())
    expect(requests).toHaveLength(3 * artifact.runtime.num_votes)
    const users = requests.map((sent) => sent.messages.at(-1)!.content)
    expect(users[0]).toMatch(/<<<DATA-\w+\n42\n/)
    expect(users.at(-1)).not.toMatch(/<<<DATA-\w+\n4[12]\n/)
  })
})

/** An artifact's scorer on the mock model, with every request it sends. */
function recordingScorer(artifact: ConstructorParameters<typeof ArtifactScorer>[0]) {
  const requests: ChatRequest[] = []
  const mock = new MockChatModel()
  const model: ChatModel = {
    id: 'recording',
    complete: (request) => {
      requests.push(request)
      return mock.complete(request)
    },
  }
  return { requests, scorer: new ArtifactScorer(artifact, model) }
}
