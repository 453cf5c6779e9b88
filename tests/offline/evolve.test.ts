import { mkdtemp, readFile, readdir, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { loadDataset } from '../../offline/datasets/load.ts'
import { runEvolveCommand } from '../../offline/evolve/cli.ts'
import { readLog, runEvolve } from '../../offline/evolve/run.ts'
import { checkpoint, loadLibrary, saveLibrary } from '../../offline/library/index.ts'
import { createBackend } from '../../offline/search/backend.ts'
import {
  analyzeChains,
  judgeWithLibrary,
  LibraryRouter,
  pairItems,
  parseTurn,
  selectChains,
  splitItems,
  swapAugment,
} from '../../src/evolve/index.ts'
import { addEntry, emptyLibrary, type Library } from '../../src/library/index.ts'
import { MockChatModel } from '../../src/llm/mock.ts'
import type { ChatModel } from '../../src/llm/types.ts'
import { EVOLVE_FIXTURE, evolveAgainst } from '../support/evolve-options.ts'
import { type ChatCompletionBody, type LlmStub, startLlmStub } from '../support/llm-stub.ts'
import { runCli } from '../support/cli.ts'

const FAST = { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 2 }

const item = {
  instruction: 'Explain the water cycle and its main stages.',
  first: 'Water cycle: evaporation, condensation, precipitation, collection.',
  second: 'Water moves.',
}
const toolLibrary: Library = addEntry(emptyLibrary('t'), {
  name: 'coverage-check',
  kind: 'tool',
  description: 'Measures instruction coverage of the water cycle answers',
  when_to_use: 'When answers differ in coverage',
  body: 'You are the coverage-check tool. Reply with JSON {"favours": "A" | "B" | "tie"}.',
})

const run = runCli

describe('evolve data helpers', () => {
  it('reads pairwise items, splits them with a seed and swaps A/B with flipped labels', async () => {
    const { dataset } = await loadDataset(EVOLVE_FIXTURE)
    const items = pairItems(dataset)
    expect(items).toHaveLength(12)
    const a = splitItems(items, 7, 0.34)
    expect(splitItems(items, 7, 0.34)).toEqual(a)
    expect(a.validation).toHaveLength(4)
    expect(splitItems(items, 8, 0.34).validation.map((x) => x.id)).not.toEqual(a.validation.map((x) => x.id))
    const swapped = swapAugment([items[0]!])
    expect(swapped[1]).toMatchObject({
      id: `${items[0]!.id}#swap`,
      first: items[0]!.second,
      second: items[0]!.first,
      label: items[0]!.label === 'A' ? 'B' : 'A',
    })
  })
})

describe('judge over a library (mock backend)', () => {
  it('runs a routed tool as a sub-call and keeps the observation in the chain', async () => {
    const model = new MockChatModel()
    const routed = await new LibraryRouter(model).route(toolLibrary, item.instruction)
    expect(routed).toEqual(['coverage-check'])
    const outcome = await judgeWithLibrary(model, toolLibrary, routed, item)
    expect(outcome).toMatchObject({ ok: true, preference: 'A', tool_calls: 1 })
    expect(outcome.chain).toMatch(/\[observation coverage-check\] \{"coverage_a"/)
  })

  it('the chain analyzer reads the chains with their tool observations against the labels', async () => {
    const mock = new MockChatModel()
    const seen: string[] = []
    const capturing: ChatModel = {
      id: mock.id,
      complete: (request) => {
        seen.push(request.messages.map((message) => message.content).join('\n'))
        return mock.complete(request)
      },
    }
    const outcome = await judgeWithLibrary(mock, toolLibrary, ['coverage-check'], item)
    if (!outcome.ok) throw new Error('expected a verdict')
    const analysis = await analyzeChains(capturing, toolLibrary, [
      {
        id: 'w1',
        instruction: item.instruction,
        label: 'B',
        prediction: outcome.preference,
        correct: outcome.preference === 'B',
        chain: outcome.chain,
      },
    ])
    expect(seen[0]).toContain('[observation coverage-check]')
    expect(seen[0]).toContain('INCORRECT (label B, prediction A)')
    expect(analysis.signals.map((signal) => signal.kind)).toEqual(['missing_skill'])
  })

  it('counts unparseable replies and LLM errors as failures, never ties', async () => {
    const garbage: ChatModel = {
      id: 'x',
      complete: async () => ({
        text: 'I think B, probably',
        model: 'x',
        usage: { prompt_tokens: 0, completion_tokens: 0 },
      }),
    }
    const outcome = await judgeWithLibrary(garbage, emptyLibrary(), [], item, { retry: FAST })
    expect(outcome.ok).toBe(false)
    expect(outcome).toMatchObject({ failure: 'invalid_reply' })
    const broken: ChatModel = { id: 'y', complete: async () => Promise.reject(new Error('boom')) }
    expect(await judgeWithLibrary(broken, emptyLibrary(), [], item, { retry: FAST })).toMatchObject({ ok: false })
  })

  it('reads preference words leniently and keeps the analyzer input bounded, errors first', () => {
    expect(parseTurn('{"answer": {"preference": " b ", "reason": "r"}}')).toMatchObject({ answer: { preference: 'B' } })
    expect(parseTurn('{"answer": {"preference": "TIE"}}')).toMatchObject({ answer: { preference: 'tie' } })
    expect(() => parseTurn('{"answer": {"preference": "both"}}')).toThrow()
    const results = [true, false, true, false].map((correct, i) => ({
      id: `r${i}`,
      instruction: 'x',
      label: 'A',
      prediction: correct ? 'A' : 'B',
      correct,
      chain: '',
    }))
    expect(selectChains(results, 3).map((result) => result.id)).toEqual(['r1', 'r3', 'r0'])
  })

  it('caches the router by instruction and library state', async () => {
    let calls = 0
    const model = new MockChatModel()
    const counting: ChatModel = {
      id: model.id,
      complete: (request) => {
        calls++
        return model.complete(request)
      },
    }
    const router = new LibraryRouter(counting)
    await router.route(toolLibrary, item.instruction)
    await router.route(toolLibrary, item.instruction)
    expect(calls).toBe(1)
    expect(await router.route(emptyLibrary(), item.instruction)).toEqual([])
    expect(calls).toBe(1)
    const failing = new LibraryRouter(
      {
        id: 'z',
        complete: async () => ({ text: 'nope', model: 'z', usage: { prompt_tokens: 0, completion_tokens: 0 } }),
      },
      { retry: FAST },
    )
    expect(await failing.route(toolLibrary, item.instruction)).toEqual([])
    expect(await failing.route(toolLibrary, item.instruction)).toEqual([])
    expect({ calls: failing.calls, failures: failing.failures }).toEqual({ calls: 2, failures: 2 })
  })
})

describe('reward-harness evolve (mock backend)', () => {
  it('runs N iterations, writes the log, iteration checkpoints and checkpoints/best, and resumes', async () => {
    const out = await mkdtemp(join(tmpdir(), 'evolve-'))
    const first = await run(
      'evolve',
      '--dataset',
      EVOLVE_FIXTURE,
      '--out',
      out,
      '--iterations',
      '2',
      '--backend',
      'mock',
      '--seed',
      '42',
    )
    expect(first.code).toBe(0)
    const log = await readLog(join(out, 'evolution-log.jsonl'))
    expect(log.map((entry) => entry.iteration)).toEqual([0, 1, 2])
    expect(log[0]!.decision).toBe('baseline')
    expect(log[1]).toMatchObject({ decision: 'kept', change: { key: 'add instruction-coverage' } })
    expect(log[1]!.val_accuracy).toBeGreaterThan(log[0]!.val_accuracy!)
    for (const entry of log) expect(entry.failures).toEqual({ train: 0, val: 0 })
    for (const dir of ['iter-0', 'iter-1', 'iter-2', 'best'])
      expect((await stat(join(out, 'checkpoints', dir, 'registry.json'))).isFile()).toBe(true)
    expect(Object.keys((await loadLibrary(join(out, 'checkpoints', 'best'))).entries)).toEqual(['instruction-coverage'])
    expect(await readdir(join(out, 'results'))).toContain('iter-1.train.jsonl')

    // A crash after rewriting checkpoints/best but before the log line: resume restores the logged best.
    await checkpoint(emptyLibrary('torn'), join(out, 'checkpoints', 'best'))
    const resumed = await run(
      'evolve',
      '--dataset',
      EVOLVE_FIXTURE,
      '--out',
      out,
      '--iterations',
      '3',
      '--backend',
      'mock',
      '--seed',
      '42',
      '--json',
    )
    expect(resumed.err).toContain('restored checkpoints/best from iter-1')
    expect(Object.keys((await loadLibrary(join(out, 'checkpoints', 'best'))).entries)).toEqual(['instruction-coverage'])
    expect(resumed.code).toBe(0)
    expect(JSON.parse(resumed.out)).toMatchObject({
      resumed_from: 2,
      best_iteration: 1,
      best_val_accuracy: log[1]!.val_accuracy,
    })
    expect((await readLog(join(out, 'evolution-log.jsonl'))).map((entry) => entry.iteration)).toEqual([0, 1, 2, 3])
    const bad = await run('evolve', '--dataset', EVOLVE_FIXTURE, '--out', out, '--val-fraction', '2')
    expect(bad.code).toBe(2)
    expect(bad.err).toMatch(/--val-fraction must be in \(0, 1\)/)
    const mismatch = await run(
      'evolve',
      '--dataset',
      EVOLVE_FIXTURE,
      '--out',
      out,
      '--iterations',
      '4',
      '--backend',
      'mock',
      '--seed',
      '7',
    )
    expect(mismatch.code).toBe(2)
    expect(mismatch.err).toMatch(/cannot resume/)
  })

  it('answers a rerun from the reply cache: no model call', async () => {
    const cacheDir = await mkdtemp(join(tmpdir(), 'cache-'))
    const first = await run(
      'evolve',
      '--dataset',
      EVOLVE_FIXTURE,
      '--out',
      await mkdtemp(join(tmpdir(), 'evolve-')),
      '--iterations',
      '1',
      '--cache-dir',
      cacheDir,
      '--json',
    )
    expect(JSON.parse(first.out).cache).toMatchObject({ dir: cacheDir })
    expect(JSON.parse(first.out).cache.misses).toBeGreaterThan(0)
    const again = await run(
      'evolve',
      '--dataset',
      EVOLVE_FIXTURE,
      '--out',
      await mkdtemp(join(tmpdir(), 'evolve-')),
      '--iterations',
      '1',
      '--cache-dir',
      cacheDir,
      '--json',
    )
    const second = JSON.parse(again.out)
    expect(second.cache.misses).toBe(0)
    expect(second.cache.hits).toBeGreaterThan(0)
    expect(second.best_val_accuracy).toBe(JSON.parse(first.out).best_val_accuracy)
    const none = await run(
      'evolve',
      '--dataset',
      EVOLVE_FIXTURE,
      '--out',
      await mkdtemp(join(tmpdir(), 'evolve-')),
      '--iterations',
      '0',
      '--no-cache',
      '--json',
    )
    expect(JSON.parse(none.out).cache).toBeNull()
  })

  it('prunes (leave-one-out) an entry whose removal keeps validation accuracy, keeping the useful one', async () => {
    const start = await mkdtemp(join(tmpdir(), 'lib-'))
    await saveLibrary(
      addEntry(emptyLibrary('start'), {
        name: 'filler-note',
        kind: 'skill',
        description: 'General notes on tone',
        body: 'Be polite.',
      }),
      start,
    )
    const out = await mkdtemp(join(tmpdir(), 'evolve-'))
    const result = await run(
      'evolve',
      '--dataset',
      EVOLVE_FIXTURE,
      '--out',
      out,
      '--iterations',
      '2',
      '--prune-every',
      '2',
      '--library',
      start,
    )
    expect(result.code).toBe(0)
    const log = await readLog(join(out, 'evolution-log.jsonl'))
    expect(log[0]!.entries).toEqual(['filler-note'])
    expect(log[1]!.entries).toEqual(['filler-note', 'instruction-coverage'])
    expect(log[2]!.pruned).toMatchObject({ removed: ['filler-note'], decision: 'kept', val_accuracy: 1 })
    expect(Object.keys((await loadLibrary(join(out, 'checkpoints', 'iter-2'))).entries)).toEqual([
      'instruction-coverage',
    ])
  })

  it('counts judge failures in the log and the per-item results, never as ties', async () => {
    const mock = new MockChatModel()
    const flaky: ChatModel = {
      id: 'flaky',
      complete: async (request) =>
        request.task === 'library_judge' &&
        request.messages.some((message) => message.content.includes('photosynthesis'))
          ? { text: 'no idea', model: 'x', usage: { prompt_tokens: 0, completion_tokens: 0 } }
          : mock.complete(request),
    }
    const { dataset, sha256 } = await loadDataset(EVOLVE_FIXTURE)
    const out = await mkdtemp(join(tmpdir(), 'evolve-'))
    await runEvolve({
      model: flaky,
      dataset,
      datasetSha256: sha256,
      outDir: out,
      iterations: 1,
      judge: { retry: FAST },
    })
    const log = await readLog(join(out, 'evolution-log.jsonl'))
    const failures = log[0]!.failures.train + log[0]!.failures.val
    expect(failures).toBeGreaterThan(0)
    const lines = [
      await readFile(join(out, 'results', 'iter-0.train.jsonl'), 'utf8'),
      await readFile(join(out, 'results', 'iter-0.val.jsonl'), 'utf8'),
    ]
      .join('')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line))
    const failed = lines.filter((line) => line.prediction === null)
    expect(failed).toHaveLength(failures)
    for (const line of failed) expect(line).toMatchObject({ correct: false, failure: 'invalid_reply' })
  })
})

describe('evolve against an OpenAI-compatible stub', () => {
  let stub: LlmStub | undefined
  afterEach(async () => {
    await stub?.close()
    stub = undefined
  })

  const system = (body: ChatCompletionBody) => body.messages.find((message) => message.role === 'system')?.content ?? ''
  const user = (body: ChatCompletionBody) => body.messages.find((message) => message.role === 'user')?.content ?? ''
  const block = (text: string, title: string) =>
    new RegExp(`${title}:\\n<<<DATA-(\\w+)\\n([\\s\\S]*?)\\nDATA-\\1>>>`).exec(text)?.[2] ?? ''

  async function stubModel(url: string): Promise<{ model: ChatModel; close: () => Promise<void> }> {
    const backend = await createBackend({
      backend: 'openai',
      endpoints: [url],
      maxConcurrency: 2,
      model: 'stub-model',
      models: {},
      temperature: 0,
      maxTokens: 512,
      timeoutMs: 10_000,
      maxAttempts: 1,
      seed: 1,
      mockNoise: 0,
    })
    return { model: backend.models.judge, close: backend.close }
  }

  it("a tool call's sub-call receives the same item text the sub-agent saw", async () => {
    stub = await startLlmStub()
    stub.respondWith((body) => {
      const sys = system(body)
      if (sys.startsWith('You are the library router')) return JSON.stringify({ entries: ['coverage-check'] })
      if (sys.startsWith('You are the coverage-check tool')) return '{"favours": "A", "note": "covers the stages"}'
      const observed = body.messages.some((message) => message.content.startsWith('Observation from tool'))
      return observed
        ? JSON.stringify({ think: 'the tool favours A', answer: { preference: 'A', reason: 'coverage' } })
        : JSON.stringify({
            think: 'check coverage',
            tool: { name: 'coverage-check', query: 'which covers the stages?' },
          })
    })
    const { model, close } = await stubModel(stub.baseUrl)
    try {
      const routed = await new LibraryRouter(model).route(toolLibrary, item.instruction)
      const outcome = await judgeWithLibrary(model, toolLibrary, routed, item)
      expect(outcome).toMatchObject({ ok: true, preference: 'A', tool_calls: 1 })
      expect(outcome.chain).toContain('[observation coverage-check] {"favours":"A","note":"covers the stages"}')
      const judgeCall = stub.requests.find((body) => system(body).startsWith('You are the library sub-agent'))!
      const toolCall = stub.requests.find((body) => system(body) === toolLibrary.entries['coverage-check']!.body)!
      expect(toolCall).toBeDefined()
      for (const title of ['The instruction', 'Answer A', 'Answer B']) {
        expect(block(user(toolCall), title)).toBe(block(user(judgeCall), title))
      }
      expect(block(user(toolCall), 'The instruction')).toBe(item.instruction)
      expect(block(user(toolCall), 'Answer A')).toBe(item.first)
      expect(block(user(toolCall), 'Answer B')).toBe(item.second)
      expect(block(user(toolCall), 'The judge asks')).toBe('which covers the stages?')
      // The observation goes back to the sub-agent.
      const second = stub.requests.filter((body) => system(body).startsWith('You are the library sub-agent'))[1]!
      expect(second.messages.at(-1)!.content).toContain('"favours":"A"')
    } finally {
      await close()
    }
  })

  it('--max-tokens bounds every call; --timeout-ms abandons an attempt slower than it, tried again', async () => {
    stub = await startLlmStub()
    stub.respondWith((body) => {
      const sys = system(body)
      if (sys.startsWith('You are the library router')) return JSON.stringify({ entries: [] })
      if (sys.startsWith('You are the chain analyzer'))
        return JSON.stringify({ signals: [{ kind: 'other', suggestion: 'none' }], summary: 'stub analysis' })
      if (sys.startsWith('You are the evolver'))
        return JSON.stringify({
          op: 'add',
          entry: { name: 'check', kind: 'skill', description: 'Checks the answer', body: 'Check the answer.' },
          rationale: 'stub',
        })
      return JSON.stringify({ think: 'stub', answer: { preference: 'A', reason: 'stub' } })
    })
    let stalled = false
    stub.intercept(async (body) => {
      if (stalled || !system(body).startsWith('You are the library sub-agent')) return undefined
      stalled = true
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      return undefined
    })
    const options = await evolveAgainst(stub.baseUrl, { concurrency: '1', maxTokens: '300', timeoutMs: '250' })
    const summary = await runEvolveCommand(options, () => {})
    expect(summary.iterations_done).toBe(1)
    const log = await readLog(join(options.out, 'evolution-log.jsonl'))
    expect(log[0]!.failures).toEqual({ train: 0, val: 0 })
    const first = JSON.stringify(stub.requests.find((body) => system(body).startsWith('You are the library sub-agent')))
    expect(stub.requests.filter((body) => JSON.stringify(body) === first)).toHaveLength(2)
    expect(new Set(stub.requests.map((body) => body.max_tokens))).toEqual(new Set([300]))
    await expect(runEvolveCommand({ ...options, maxTokens: '0' }, () => {})).rejects.toThrow(
      '--max-tokens must be an integer ≥ 1, not "0"',
    )
    await expect(runEvolveCommand({ ...options, timeoutMs: '1.5' }, () => {})).rejects.toThrow(
      '--timeout-ms must be an integer ≥ 1, not "1.5"',
    )
  })

  it('rolls back a change that lowers validation accuracy beyond the margin, and the log says so', async () => {
    const dataset = JSON.parse(await readFile(EVOLVE_FIXTURE, 'utf8')) as {
      prompts: { candidates: { text: string; metadata: { rank: number } }[] }[]
    }
    const good = new Set(
      dataset.prompts.flatMap((prompt) =>
        prompt.candidates.filter((candidate) => candidate.metadata.rank === 1).map((candidate) => candidate.text),
      ),
    )
    stub = await startLlmStub()
    stub.respondWith((body) => {
      const sys = system(body)
      if (sys.startsWith('You are the library router'))
        return JSON.stringify({ entries: [...user(body).matchAll(/^- ([a-z0-9-]+) \(/gm)].map((match) => match[1]) })
      if (sys.startsWith('You are the chain analyzer'))
        return JSON.stringify({ signals: [{ kind: 'other', suggestion: 'try something' }], summary: 'stub analysis' })
      if (sys.startsWith('You are the evolver'))
        return JSON.stringify({
          op: 'add',
          entry: {
            name: 'bad-skill',
            kind: 'skill',
            description: 'A misleading rubric',
            body: 'Prefer the worse answer.',
          },
          rationale: 'stub',
        })
      // Sub-agent: right without the bad skill, wrong with it.
      const aIsGood = good.has(block(user(body), 'Answer A'))
      const misled = sys.includes('## Skill: bad-skill')
      return JSON.stringify({ think: 'stub', answer: { preference: aIsGood !== misled ? 'A' : 'B', reason: 'stub' } })
    })
    const options = await evolveAgainst(stub.baseUrl, { iterations: '2' })
    const out = options.out
    const summary = await runEvolveCommand(options, () => {})
    const log = await readLog(join(out, 'evolution-log.jsonl'))
    expect(log[0]).toMatchObject({ decision: 'baseline', val_accuracy: 1, train_accuracy: 1 })
    expect(log[1]).toMatchObject({
      decision: 'rolled_back',
      change: { key: 'add bad-skill' },
      val_accuracy: 0,
      state_val_accuracy: 1,
      best_val_accuracy: 1,
      entries: [],
    })
    expect(log[1]!.note).toMatch(/rolled back: val 0\.000 < best 1\.000 - margin 0\.1/)
    expect(log[2]!.decision).toBe('rolled_back')
    expect(summary).toMatchObject({ best_iteration: 0, best_val_accuracy: 1, entries: [] })
    expect((await loadLibrary(join(out, 'checkpoints', 'best'))).entries).toEqual({})
    expect((await loadLibrary(join(out, 'checkpoints', 'iter-2'))).entries).toEqual({})
    // The evolver was told the change had been rolled back.
    const evolverCalls = stub.requests.filter((body) => system(body).startsWith('You are the evolver'))
    expect(user(evolverCalls[1]!)).toContain('add bad-skill')
  })
})
