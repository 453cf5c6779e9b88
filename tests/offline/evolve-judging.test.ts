import { mkdtemp, readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { loadDataset } from '../../offline/datasets/load.ts'
import { runEvolveCommand } from '../../offline/evolve/cli.ts'
import { readLog, runEvolve } from '../../offline/evolve/run.ts'
import { LIBRARY_ROLES, RoleMeter, sumUsage } from '../../src/evolve/index.ts'
import { pairItems } from '../../src/evolve/evolver.ts'
import { judgeBothOrders } from '../../src/evolve/judge.ts'
import { emptyLibrary } from '../../src/library/index.ts'
import { answerLibraryRoute } from '../../src/evolve/mock.ts'
import { jsonMockReply, MockChatModel } from '../../src/llm/mock.ts'
import { LlmError, type ChatModel } from '../../src/llm/types.ts'
import { EVOLVE_FIXTURE, evolveAgainst } from '../support/evolve-options.ts'
import { type ChatCompletionBody, type LlmStub, startLlmStub } from '../support/llm-stub.ts'

const system = (body: ChatCompletionBody) => body.messages.find((message) => message.role === 'system')?.content ?? ''
const user = (body: ChatCompletionBody) => body.messages.find((message) => message.role === 'user')?.content ?? ''
const block = (text: string, title: string) =>
  new RegExp(`${title}:\\n<<<DATA-(\\w+)\\n([\\s\\S]*?)\\nDATA-\\1>>>`).exec(text)?.[2] ?? ''

/** The role of a stub request, from the opening of its system prompt. */
function roleOf(body: ChatCompletionBody): string {
  const sys = system(body)
  if (sys.startsWith('You are the library router')) return 'router'
  if (sys.startsWith('You are the library sub-agent')) return 'sub_agent'
  if (sys.startsWith('You are the chain analyzer')) return 'chain_analyzer'
  if (sys.startsWith('You are the evolver')) return 'evolver'
  return 'tool'
}

async function goodAnswers(): Promise<Set<string>> {
  const dataset = JSON.parse(await readFile(EVOLVE_FIXTURE, 'utf8')) as {
    prompts: { candidates: { text: string; metadata: { rank: number } }[] }[]
  }
  return new Set(
    dataset.prompts.flatMap((prompt) =>
      prompt.candidates.filter((candidate) => candidate.metadata.rank === 1).map((candidate) => candidate.text),
    ),
  )
}

/** The mock, except that the Sub-Agent always prefers the answer shown first. */
function positionBiased(): ChatModel {
  const mock = new MockChatModel()
  return {
    id: 'biased',
    complete: async (request) =>
      request.task === 'library_judge'
        ? {
            text: JSON.stringify({ think: 'first is best', answer: { preference: 'A', reason: 'first' } }),
            model: 'biased',
            usage: { prompt_tokens: 10, completion_tokens: 5 },
          }
        : mock.complete(request),
  }
}

describe('evolve judges in both orders', () => {
  it('counts order disagreements as inconsistent (wrong, never a tie) in the log, results and summary', async () => {
    const { dataset, sha256 } = await loadDataset(EVOLVE_FIXTURE)
    const out = await mkdtemp(join(tmpdir(), 'evolve-orders-'))
    const seen: string[] = []
    const base = positionBiased()
    const capturing: ChatModel = {
      id: base.id,
      complete: (request) => {
        if (request.task === 'library_analyze') seen.push(request.messages.map((m) => m.content).join('\n'))
        return base.complete(request)
      },
    }
    const summary = await runEvolve({ model: capturing, dataset, datasetSha256: sha256, outDir: out, iterations: 1 })
    const log = await readLog(join(out, 'evolution-log.jsonl'))
    // no swap copies: B/A is the second order
    expect(log[0]!.settings).toMatchObject({ orders: 'both', train: 8, validation: 4 })
    expect(log[0]).toMatchObject({
      train_accuracy: 0,
      val_accuracy: 0,
      inconsistent: { train: 8, val: 4 },
      failures: { train: 0, val: 0 },
    })
    const lines = (await readFile(join(out, 'results', 'iter-0.val.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line))
    for (const line of lines) {
      expect(line).toMatchObject({
        prediction: 'inconsistent',
        verdict: 'inconsistent',
        correct: false,
        orders: { ab: 'A', ba: 'B' },
      })
      expect(line.failure).toBeUndefined()
      expect(line.chain).toMatch(/^\[order A\/B\][\s\S]*\[order B\/A: the answers exchanged\]/)
    }
    expect(summary.judging).toMatchObject({ inconsistent: summary.judging.judged, consistent: 0, failures: 0 })
    expect(summary.orders).toBe('both')
    expect(seen[0]).toContain('INCONSISTENT: the A/B and B/A orders disagreed')
  })

  it('with --orders one judges A/B only, on swap-augmented train, and a resumed run cannot switch orders', async () => {
    const out = await mkdtemp(join(tmpdir(), 'evolve-orders-'))
    const base = {
      dataset: EVOLVE_FIXTURE,
      out,
      iterations: '0',
      backend: 'mock',
      seed: '42',
      valFraction: '0.34',
      exploreMargin: '0.075',
      pruneEvery: '0',
      locale: 'en',
      concurrency: '2',
      cache: false,
    }
    const summary = await runEvolveCommand({ ...base, orders: 'one' }, () => {})
    const log = await readLog(join(out, 'evolution-log.jsonl'))
    expect(log[0]!.settings).toMatchObject({ orders: 'one', train: 16 })
    expect(log[0]!.inconsistent).toEqual({ train: 0, val: 0 })
    expect(summary.usage.sub_agent.calls).toBe(16 + 4)
    await expect(runEvolveCommand({ ...base, iterations: '1', orders: 'both' }, () => {})).rejects.toThrow(
      /cannot resume .*: orders was "one", now "both"/,
    )
    await expect(runEvolveCommand({ ...base, orders: 'three' }, () => {})).rejects.toThrow(
      /--orders must be both or one/,
    )
  })
})

describe('per-role call accounting', () => {
  it('counts calls, failures, invalid replies, cached replies and tokens per role', async () => {
    let call = 0
    const flaky: ChatModel = {
      id: 'flaky',
      complete: async (request) => {
        call++
        if (request.task === 'library_route' && call === 1) throw new LlmError('server_error', 'HTTP 500')
        if (request.task === 'library_evolve')
          return { text: 'not json', model: 'x', usage: { prompt_tokens: 7, completion_tokens: 3 } }
        return new MockChatModel().complete(request)
      },
    }
    const meter = new RoleMeter()
    const counted = meter.wrap(flaky)
    await expect(
      counted.complete({
        role: 'judge',
        messages: [],
        task: 'library_route',
        json: true,
        mock: jsonMockReply(answerLibraryRoute, { instruction: 'x', entries: [] }),
      }),
    ).rejects.toThrow('HTTP 500')
    await counted.complete({
      role: 'judge',
      messages: [{ role: 'user', content: 'abcd'.repeat(10) }],
      task: 'library_route',
      json: true,
      mock: jsonMockReply(answerLibraryRoute, { instruction: 'x', entries: [] }),
    })
    const parsing = counted as ChatModel & {
      completeParsed: <T>(
        request: Parameters<ChatModel['complete']>[0],
        parse: (reply: { text: string }) => T,
      ) => Promise<T>
    }
    await expect(
      parsing.completeParsed(
        {
          role: 'judge',
          messages: [],
          task: 'library_evolve',
          json: true,
        },
        (reply) => JSON.parse(reply.text),
      ),
    ).rejects.toThrow()
    const usage = meter.usage()
    expect(usage.router).toEqual({
      calls: 2,
      ok: 1,
      failures: 1,
      invalid_replies: 0,
      cached: 0,
      prompt_tokens: 10,
      completion_tokens: usage.router.completion_tokens,
    })
    expect(usage.evolver).toMatchObject({
      calls: 1,
      ok: 1,
      failures: 0,
      invalid_replies: 1,
      prompt_tokens: 7,
      completion_tokens: 3,
    })
    expect(usage.total).toEqual(sumUsage(LIBRARY_ROLES.map((role) => usage[role])))
  })

  describe('against a stub server', () => {
    let stub: LlmStub | undefined
    afterEach(async () => {
      await stub?.close()
      stub = undefined
    })

    it(
      "the summary's per-role calls and tokens match what the server received, a refused call is a failure, and the " +
        "log's iterations add up to the summary",
      async () => {
        const good = await goodAnswers()
        stub = await startLlmStub()
        let refused = false
        stub.intercept((body) => {
          if (roleOf(body) === 'sub_agent' && !refused) {
            refused = true
            return { kind: 'status', status: 400 }
          }
          return undefined
        })
        stub.respondWith((body) => {
          switch (roleOf(body)) {
            case 'router':
              return JSON.stringify({
                entries: [...user(body).matchAll(/^- ([a-z0-9-]+) \(/gm)].map((match) => match[1]),
              })
            case 'chain_analyzer':
              return JSON.stringify({ signals: [{ kind: 'missing_tool', suggestion: 'coverage' }], summary: 'stub' })
            case 'evolver':
              return JSON.stringify({
                op: 'add',
                entry: {
                  name: 'coverage-check',
                  kind: 'tool',
                  description: 'Checks coverage',
                  when_to_use: 'Always',
                  body: 'You check coverage. Reply with JSON {"favours": "A" | "B"}.',
                },
                rationale: 'stub',
              })
            case 'tool':
              return JSON.stringify({ favours: good.has(block(user(body), 'Answer A')) ? 'A' : 'B' })
            default: {
              const observed = body.messages.some((message) => message.content.startsWith('Observation from tool'))
              if (system(body).includes('## Tool: coverage-check') && !observed)
                return JSON.stringify({ think: 'check', tool: { name: 'coverage-check', query: 'which covers more?' } })
              return JSON.stringify({
                think: 'stub',
                answer: { preference: good.has(block(user(body), 'Answer A')) ? 'A' : 'B', reason: 'stub' },
              })
            }
          }
        })
        const options = await evolveAgainst(stub.baseUrl, { cache: false })
        const summary = await runEvolveCommand(options, () => {})
        const received: Record<string, number> = {}
        for (const body of stub.requests) received[roleOf(body)] = (received[roleOf(body)] ?? 0) + 1
        for (const role of LIBRARY_ROLES) {
          const usage = summary.usage[role]
          expect({ role, calls: usage.calls }).toEqual({ role, calls: received[role] ?? 0 })
          // The stub reports 100 prompt and 20 completion tokens for every answered call.
          expect(usage.prompt_tokens).toBe(100 * usage.ok)
          expect(usage.completion_tokens).toBe(20 * usage.ok)
        }
        expect(summary.usage.sub_agent.failures).toBe(1)
        expect(summary.usage.total.failures).toBe(1)
        expect(summary.usage.tool.calls).toBeGreaterThan(0)
        expect(summary.usage.chain_analyzer.calls).toBe(1)
        expect(summary.usage.evolver.calls).toBe(1)
        const log = await readLog(join(options.out, 'evolution-log.jsonl'))
        expect(log[0]!.failures.train + log[0]!.failures.val).toBe(1)
        expect(log[0]!.usage.sub_agent.failures).toBe(1)
        expect(sumUsage(log.map((entry) => entry.usage.total))).toEqual(summary.usage.total)
        expect(log[1]).toMatchObject({ decision: 'kept', tool_check: [{ tool: 'coverage-check', passed: true }] })
      },
    )

    it(
      'the tool-prompt check rejects a tool whose prompt does not get JSON replies, before any validation run, and ' +
        'the Evolver is told',
      async () => {
        const good = await goodAnswers()
        stub = await startLlmStub()
        let evolverCalls = 0
        stub.respondWith((body) => {
          switch (roleOf(body)) {
            case 'router':
              return JSON.stringify({
                entries: [...user(body).matchAll(/^- ([a-z0-9-]+) \(/gm)].map((match) => match[1]),
              })
            case 'chain_analyzer':
              return JSON.stringify({ signals: [{ kind: 'missing_tool', suggestion: 'a tool' }], summary: 'stub' })
            case 'evolver':
              evolverCalls++
              return evolverCalls === 1
                ? JSON.stringify({
                    op: 'add',
                    entry: {
                      name: 'chatty-tool',
                      kind: 'tool',
                      description: 'Talks',
                      when_to_use: 'Always',
                      body: 'You are the chatty tool. Say what you think in prose.',
                    },
                    rationale: 'stub',
                  })
                : JSON.stringify({
                    op: 'add',
                    entry: {
                      name: 'json-tool',
                      kind: 'tool',
                      description: 'Checks',
                      when_to_use: 'Always',
                      body: 'You are the json tool. Reply with JSON {"ok": true}.',
                    },
                    rationale: 'stub',
                  })
            case 'tool':
              return system(body).startsWith('You are the chatty tool')
                ? 'I think answer A looks fine overall.'
                : '{"ok": true}'
            default:
              return JSON.stringify({
                think: 'stub',
                answer: { preference: good.has(block(user(body), 'Answer A')) ? 'A' : 'B', reason: 'stub' },
              })
          }
        })
        const options = await evolveAgainst(stub.baseUrl, { iterations: '2', toolCheck: '4' })
        await runEvolveCommand(options, () => {})
        const log = await readLog(join(options.out, 'evolution-log.jsonl'))
        expect(log[1]).toMatchObject({
          decision: 'rejected',
          change: { key: 'add chatty-tool' },
          val_accuracy: null,
          tool_check: [{ tool: 'chatty-tool', sampled: 4, json: 0, passed: false }],
          entries: [],
        })
        expect(log[1]!.note).toBe('rejected by the tool-prompt check: chatty-tool replied JSON on 0 of 4 sample calls')
        expect(log[1]!.tool_check![0]!.examples[0]).toContain('I think answer A looks fine')
        // Never validated: no Sub-Agent ever saw the rejected tool.
        expect(
          stub.requests.filter((body) => roleOf(body) === 'sub_agent' && system(body).includes('chatty-tool')),
        ).toHaveLength(0)
        expect(
          stub.requests.filter((body) => roleOf(body) === 'tool' && system(body).startsWith('You are the chatty tool')),
        ).toHaveLength(4)
        const evolverRequests = stub.requests.filter((body) => roleOf(body) === 'evolver')
        expect(user(evolverRequests[1]!)).toContain('add chatty-tool')
        expect(log[2]).toMatchObject({
          decision: 'kept',
          change: { key: 'add json-tool' },
          tool_check: [{ tool: 'json-tool', sampled: 4, json: 4, passed: true }],
          entries: ['json-tool'],
        })
      },
    )
  })
})

describe('a dataset reference in the library judge', () => {
  it('is shown to the sub-agent in both orders, as data, and an item without one shows an empty block', async () => {
    const dataset = {
      prompts: [
        {
          prompt_id: 'gsm-1',
          prompt: 'Tom has 3 apples and buys 15 more. How many?',
          reference: '18',
          metadata: {},
          candidates: [
            { text: 'He has 18.', label: { rank: 1 }, metadata: {} },
            { text: 'He has 45.', label: { rank: 2 }, metadata: {} },
          ],
        },
      ],
    }
    const [item] = pairItems(dataset as Parameters<typeof pairItems>[0])
    expect(item).toMatchObject({ reference: '18', label: 'A' })
    const seen: string[] = []
    const model: ChatModel = {
      id: 'recording',
      complete: async (request) => {
        seen.push(request.messages.find((message) => message.role === 'user')!.content)
        return {
          text: '{"answer": {"preference": "A", "reason": "r"}}',
          model: 'm',
          usage: { prompt_tokens: 1, completion_tokens: 1 },
        }
      },
    }
    await judgeBothOrders(model, emptyLibrary(), [], item!)
    expect(seen).toHaveLength(2)
    for (const text of seen) expect(block(text, 'Reference answer for the grader, may be empty')).toBe('18')
    const { reference: _dropped, ...without } = item!
    await judgeBothOrders(model, emptyLibrary(), [], without)
    expect(block(seen.at(-1)!, 'Reference answer for the grader, may be empty')).toBe('')
  })
})
