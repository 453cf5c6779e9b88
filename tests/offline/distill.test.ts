/**
 * `reward-harness distill` on a local archive: repeated judging through the reply cache (a second run makes no LLM
 * call), pairs that clear the noise bound, a split by prompt, the trainers' row formats, a summary whose counts add
 * up, the report of it, an endpoint judge behind faults, and bad input → exit 2 naming the line or field. The pure
 * pairing math is tested on its own first.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { heldOutPrompts, noiseBound, pairResponses, sampleStats, type JudgedResponse } from '../../src/distill/index.ts'
import type { ArchivedRollout, ArchiveLine } from '../../src/schemas/archive.ts'
import { gradeAllRubrics, startLlmStub, type LlmStub } from '../support/llm-stub.ts'
import { runCli } from '../support/cli.ts'

const METADATA = { high_level_goal: 'arithmetic', model_size: '7B', current_step: 0, total_steps: 10 }
const RUBRICS = [
  {
    id: 'a-correct',
    text: 'The final answer is correct.',
    weight: 2,
    is_anchor: true,
    version: 1,
    created_at: '2026-11-25T00:00:00Z',
    metadata: {},
  },
  {
    id: 'd-steps',
    text: 'Shows the key steps of the calculation.',
    weight: 1,
    is_anchor: false,
    version: 1,
    created_at: '2026-11-25T00:00:00Z',
    metadata: {},
  },
]

/** Six prompts, each with answers from right and worked to wrong, one repeated word for word. */
function archiveLines(): ArchiveLine[] {
  const lines: ArchiveLine[] = [
    { kind: 'run', run_id: 'grpo-t', from_step: 0, to_step: null, grade_max: 10, locale: 'en', prompts: {} },
    { kind: 'rubrics', instance_id: 'global', rubric_version: 1, rubrics: RUBRICS },
  ]
  for (let p = 0; p < 6; p++) {
    const [a, b] = [p + 2, p + 5]
    const answer = String(a + b)
    const outputs = [
      `${a} + ${b}: add the ones, ${a} plus ${b} makes ${answer}. The answer is ${answer}.`,
      `The answer is ${answer}.`,
      `Probably ${a + b + 1}, I think.`,
      'I cannot say.',
      `The answer is ${answer}.`,
    ]
    outputs.forEach((output, i) => {
      const rollout: ArchivedRollout = {
        run_id: 'grpo-t',
        instance_id: 'global',
        shard: i % 8,
        step: p % 3,
        rollout_id: `p${p}-r${i}`,
        input: `What is ${a} + ${b}?`,
        output,
        reference: answer,
        metadata: METADATA,
        score: 0.9 - 0.2 * i,
        criteria: [],
        rubric_version: 1,
        judge_model: 'mock:mock-heuristic-1',
        cached: false,
        scored_at: '2026-11-25T10:00:00.000Z',
      }
      lines.push(rollout)
    })
  }
  // One prompt answered once: nothing to pair it with.
  lines.push({
    ...(lines[2] as ArchivedRollout),
    rollout_id: 'lonely',
    input: 'What is 1 + 1?',
    output: '2',
    reference: '2',
  })
  return lines
}

const readJsonl = (file: string) =>
  readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line))

let work: string
let archive: string

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'distill-'))
  archive = join(work, 'archive.ndjson')
  writeFileSync(
    archive,
    `${archiveLines()
      .map((line) => JSON.stringify(line))
      .join('\n')}\n`,
  )
})
afterAll(() => rmSync(work, { recursive: true, force: true }))

describe('pairing math', () => {
  const response = (prompt: string, text: string, samples: number[]): JudgedResponse => ({
    prompt,
    response: text,
    rollout_ids: [text],
    samples,
    online_score: samples[0] ?? 0,
  })

  it('sample statistics and the noise bound z·√(var_a/n_a + var_b/n_b)', () => {
    expect(sampleStats([0.6, 0.8])).toEqual({ mean: 0.7, spread: expect.closeTo(Math.SQRT2 / 10, 10), n: 2 })
    expect(sampleStats([0.5])).toEqual({ mean: 0.5, spread: 0, n: 1 })
    expect(noiseBound({ mean: 0.8, spread: 0.1, n: 4 }, { mean: 0.5, spread: 0.2, n: 4 }, 2)).toBeCloseTo(
      2 * Math.sqrt(0.01 / 4 + 0.04 / 4),
      10,
    )
  })

  it('keeps a pair only past the margin and the bound, best vs worst first, capped per prompt; counts add up', () => {
    const responses = [
      response('q', 'best', [0.9, 0.9, 0.9]),
      response('q', 'good', [0.8, 0.82, 0.78]),
      response('q', 'noisy', [0.2, 0.9, 0.5]),
      response('q', 'worst', [0.1, 0.1, 0.1]),
      response('q', 'same-as-worst', [0.1, 0.1, 0.1]),
      response('r', 'only', [0.5, 0.5]),
    ]
    const pairing = pairResponses(responses, { z: 1.96, minMargin: 0.05, pairsPerPrompt: 2 })
    expect(pairing.pairs[0]).toMatchObject({ chosen: 'best', rejected: expect.stringMatching(/worst/) })
    for (const pair of pairing.pairs) {
      expect(pair.gap).toBeGreaterThan(pair.bound)
      expect(pair.gap).toBeGreaterThanOrEqual(0.05)
    }
    expect(pairing.pairs.length).toBeLessThanOrEqual(2)
    expect(pairing.dropped.tie).toBe(1)
    expect(pairing.dropped.within_noise).toBeGreaterThan(0)
    expect(pairing.candidates).toBe(pairing.pairs.length + Object.values(pairing.dropped).reduce((a, b) => a + b, 0))
  })

  it('holds out a share of prompts by a seeded hash, never all and never none of two or more', () => {
    const prompts = Array.from({ length: 20 }, (_, i) => `prompt ${i}`)
    const held = heldOutPrompts(prompts, 0.25, 3)
    expect(held.size).toBe(5)
    expect(heldOutPrompts([...prompts].reverse(), 0.25, 3)).toEqual(held)
    expect(heldOutPrompts(prompts, 0.25, 4)).not.toEqual(held)
    expect(heldOutPrompts(['a', 'b'], 0.01, 0).size).toBe(1)
    expect(heldOutPrompts(['a', 'b'], 0.99, 0).size).toBe(1)
    expect(heldOutPrompts(['a'], 0.5, 0).size).toBe(0)
  })
})

describe('reward-harness distill --archive', () => {
  it(
    're-judges 3 times on the mock, keeps only pairs past the bound, splits by prompt, and a second run makes no LLM ' +
      'call',
    async () => {
      const out = join(work, 'mock')
      const cache = join(work, 'cache')
      const args = [
        'distill',
        '--archive',
        archive,
        '--repeats',
        '3',
        '--out',
        out,
        '--cache-dir',
        cache,
        '--held-out',
        '0.34',
        '--mock-noise',
        '0.3',
        '--json',
      ]
      const first = await runCli(...args)
      expect(first.code, first.err).toBe(0)
      const summary = JSON.parse(first.out)
      expect(summary.rollouts).toEqual({ archived: 31, distinct: 25, merged_duplicates: 6 })
      expect(summary.prompts).toMatchObject({ seen: 7, single_response: 1, judged: 6 })
      expect(summary.judgements).toMatchObject({ requested: 24 * 3, succeeded: 24 * 3, failed: 0, llm_calls: 24 * 3 })
      const droppedTotal = Object.values(summary.pairs.dropped as Record<string, number>).reduce((a, b) => a + b, 0)
      expect(summary.pairs.candidates).toBe(summary.pairs.kept + droppedTotal)
      expect(summary.pairs.kept).toBe(summary.pairs.train + summary.pairs.held_out)
      expect(summary.pairs.kept).toBeGreaterThan(0)
      expect(summary.prompts.paired).toBe(summary.prompts.train + summary.prompts.held_out)
      expect(summary.agreement.pairwise).toBeGreaterThan(0.5)

      // Every TRL pair's chosen mean beats its rejected mean by more than the bound (stats from the pointwise rows).
      const points = new Map(
        [...readJsonl(join(out, 'pointwise.train.jsonl')), ...readJsonl(join(out, 'pointwise.held_out.jsonl'))].map(
          (row) => [`${row.prompt}\u0000${row.response}`, row],
        ),
      )
      const train = readJsonl(join(out, 'trl.train.jsonl'))
      const heldOut = readJsonl(join(out, 'trl.held_out.jsonl'))
      expect(train.length).toBe(summary.pairs.train)
      expect(heldOut.length).toBe(summary.pairs.held_out)
      for (const row of [...train, ...heldOut]) {
        expect(Object.keys(row).sort()).toEqual(['chosen', 'prompt', 'rejected'])
        const chosen = points.get(`${row.prompt}\u0000${row.chosen}`)
        const rejected = points.get(`${row.prompt}\u0000${row.rejected}`)
        expect(chosen.n).toBe(3)
        const bound = 1.96 * Math.sqrt(chosen.spread ** 2 / chosen.n + rejected.spread ** 2 / rejected.n)
        expect(chosen.score - rejected.score).toBeGreaterThan(bound - 1e-6)
        expect(chosen.score - rejected.score).toBeGreaterThanOrEqual(0.05 - 1e-6)
      }
      const trainPrompts = new Set(train.map((row) => row.prompt))
      expect(heldOut.length).toBeGreaterThan(0)
      for (const row of heldOut) expect(trainPrompts.has(row.prompt)).toBe(false)
      // Some repeat moved a grade: the spread is real, not zero everywhere.
      expect([...points.values()].some((row) => row.spread > 0)).toBe(true)

      const openrlhf = readJsonl(join(out, 'openrlhf.train.jsonl'))
      expect(openrlhf.map(({ margin: _margin, ...rest }) => rest)).toEqual(train)
      for (const row of openrlhf) expect(row.margin).toBeGreaterThan(0)

      const again = await runCli(...args)
      expect(again.code, again.err).toBe(0)
      const second = JSON.parse(again.out)
      expect(second.judgements).toMatchObject({ llm_calls: 0, cache_hits: 24 * 3 })
      expect(readJsonl(join(out, 'trl.train.jsonl'))).toEqual(train)

      const report = await runCli('report', join(out, 'summary.json'), '--out', join(work, 'distill.html'))
      expect(report.code, report.err).toBe(0)
      expect(report.out).toContain('distill summary')
      const html = readFileSync(join(work, 'distill.html'), 'utf8')
      // The headline tile and the pairs table name each count beside its label, as the summary has it.
      const { kept, train: trainPairs, held_out: heldOutPairs, candidates, dropped } = summary.pairs
      expect(html).toContain(
        '<div class="tile"><div class="tile-label">pairs kept</div>' +
          `<div class="tile-value">${kept}</div><div class="tile-hint">${trainPairs} train · ${heldOutPairs} held out` +
          '</div></div>',
      )
      expect(html).toContain(
        `<tbody><tr><td>candidates</td><td class="num">${candidates}</td></tr>` +
          `<tr><td>kept</td><td class="num">${kept}</td></tr>`,
      )
      expect(Object.keys(dropped)).toEqual(['tie', 'below_margin', 'within_noise', 'over_prompt_cap'])
      for (const [reason, count] of Object.entries(dropped))
        expect(html).toContain(`<tr><td>dropped: <code>${reason}</code></td><td class="num">${count}</td></tr>`)
    },
  )

  it('writes conversational rows, and --repeats 0 pairs on the online scores alone with no judge at all', async () => {
    const out = join(work, 'online')
    const run = await runCli(
      'distill',
      '--archive',
      archive,
      '--repeats',
      '0',
      '--format',
      'trl',
      '--conversational',
      '--out',
      out,
      '--cache-dir',
      join(work, 'cache-none'),
      '--json',
    )
    expect(run.code, run.err).toBe(0)
    const summary = JSON.parse(run.out)
    expect(summary.settings.judges).toEqual(['online'])
    expect(summary.judgements.llm_calls).toBe(0)
    expect(summary.outputs.map((output: { format: string }) => output.format)).toEqual(['trl', 'trl'])
    const row = readJsonl(join(out, 'trl.train.jsonl'))[0]
    expect(row.prompt).toEqual([{ role: 'user', content: expect.stringMatching(/^What is/) }])
    expect(row.chosen).toEqual([{ role: 'assistant', content: expect.any(String) }])
  })

  it('refuses bad input with exit 2 and a message naming the line or the field', async () => {
    const lines = readFileSync(archive, 'utf8').trim().split('\n')
    const notJson = join(work, 'not-json.ndjson')
    writeFileSync(notJson, [...lines.slice(0, 4), '{"run_id": "grpo-t", oops', ...lines.slice(4)].join('\n'))
    const bad = await runCli('distill', '--archive', notJson, '--out', join(work, 'bad'))
    expect(bad.code).toBe(2)
    expect(bad.err).toContain(`${notJson}:5: not JSON`)

    const missing = join(work, 'missing-field.ndjson')
    const broken = JSON.parse(lines[3]!)
    delete broken.output
    writeFileSync(missing, [...lines.slice(0, 3), JSON.stringify(broken), ...lines.slice(4)].join('\n'))
    const field = await runCli('distill', '--archive', missing, '--out', join(work, 'bad'))
    expect(field.code).toBe(2)
    expect(field.err).toContain(`${missing}:4: field "output"`)

    const empty = join(work, 'empty.ndjson')
    writeFileSync(empty, `${lines[0]}\n`)
    const none = await runCli('distill', '--archive', empty, '--out', join(work, 'bad'))
    expect(none.code).toBe(2)
    expect(none.err).toContain('holds no scored rollouts')

    const noRubrics = join(work, 'no-rubrics.ndjson')
    writeFileSync(noRubrics, [lines[0], ...lines.slice(2)].join('\n'))
    const rubricless = await runCli('distill', '--archive', noRubrics, '--out', join(work, 'bad'))
    expect(rubricless.code).toBe(2)
    expect(rubricless.err).toMatch(/rubric version 1 of instance "global", but the archive has no rubrics line/)

    const absent = await runCli('distill', '--archive', join(work, 'nope.ndjson'), '--out', join(work, 'bad'))
    expect(absent.code).toBe(2)
    expect(absent.err).toContain('cannot read (ENOENT)')
    expect((await runCli('distill', '--out', join(work, 'bad'))).code).toBe(2)
    expect((await runCli('distill', '--archive', archive, '--out', join(work, 'bad'), '--held-out', '2')).code).toBe(2)
    expect((await runCli('distill', '--archive', archive, '--out', join(work, 'bad'), '--judge', 'gpt-4')).code).toBe(2)
  })
})

describe("reading the edge's archive", () => {
  it('follows the `more` lines page by page, with the token, and keeps every line', async () => {
    const lines = readFileSync(archive, 'utf8').trim().split('\n')
    const pages = [
      [...lines.slice(0, 12), JSON.stringify({ kind: 'more', after: 'runs/grpo-t/steps/000001/global.3.ndjson' })],
      [lines[0]!, ...lines.slice(12)],
    ]
    const asked: URL[] = []
    const fetchPage = (async (input: URL | RequestInfo, init?: RequestInit) => {
      const url = new URL(String(input))
      asked.push(url)
      expect(new Headers(init?.headers).get('authorization')).toBe('Bearer rh_page-token')
      return new Response(`${pages[asked.length - 1]!.join('\n')}\n`, {
        headers: { 'content-type': 'application/x-ndjson' },
      })
    }) as typeof fetch
    const { readArchive } = await import('../../offline/distill/archive.ts')
    const read = await readArchive({
      kind: 'edge',
      url: 'http://edge.test/',
      runId: 'grpo-t',
      token: 'rh_page-token',
      fromStep: 0,
      toStep: 2,
      fetch: fetchPage,
    })
    expect(asked.map((url) => url.pathname)).toEqual(['/runs/grpo-t/archive', '/runs/grpo-t/archive'])
    expect(asked[0]!.searchParams.get('after')).toBeNull()
    expect(asked[1]!.searchParams.get('after')).toBe('runs/grpo-t/steps/000001/global.3.ndjson')
    expect(asked[1]!.searchParams.get('to_step')).toBe('2')
    expect(read.rollouts.map((rollout) => rollout.rollout_id)).toEqual(
      lines.slice(2).map((line) => JSON.parse(line).rollout_id),
    )
    expect(read.rubrics.size).toBe(1)
  })
})

describe('distill with an OpenAI-compatible judge on loopback', () => {
  let stub: LlmStub
  beforeAll(async () => {
    stub = await startLlmStub()
  })
  afterAll(() => stub.close())

  it('sends each repeat with its own seed, rides out 500s and an unparseable reply, caches good answers', async () => {
    // The stub grades by the answer's length and the seed, so repeats differ and a worked answer wins.
    stub.respondWith((body) => {
      const user = body.messages.find((message) => message.role === 'user')!.content
      const worked = /add the ones/.test(user) ? 3 : 0
      return gradeAllRubrics(Math.min(10, 4 + worked + (Number(body.seed) % 2)))(body)
    })
    stub.script(
      { kind: 'status', status: 500 },
      { kind: 'content', text: 'I think it deserves a 7.' },
      { kind: 'status', status: 503 },
    )
    const out = join(work, 'endpoint')
    const args = [
      'distill',
      '--archive',
      archive,
      '--repeats',
      '2',
      '--judge',
      `${stub.baseUrl},model=stub-model,max_concurrency=2`,
      '--out',
      out,
      '--cache-dir',
      join(work, 'cache-endpoint'),
      '--format',
      'pointwise',
      '--json',
    ]
    const run = await runCli(...args)
    expect(run.code, run.err).toBe(0)
    const summary = JSON.parse(run.out)
    expect(summary.judgements).toMatchObject({ requested: 48, succeeded: 48, failed: 0 })
    const scorerRequests = stub.requests.filter((body) => body.model === 'stub-model')
    expect(new Set(scorerRequests.map((body) => body.seed))).toEqual(new Set([0, 1]))
    // 48 good answers, plus the two faults and the unparseable reply asked again.
    expect(scorerRequests.length).toBe(48 + 3)
    expect(summary.judgements.llm_calls).toBe(48 + 1)
    const rows = readJsonl(join(out, 'pointwise.train.jsonl'))
    expect(rows.every((row) => row.n === 2 && row.spread > 0)).toBe(true)

    const before = stub.requests.length
    const again = await runCli(...args)
    expect(again.code, again.err).toBe(0)
    expect(JSON.parse(again.out).judgements.llm_calls).toBe(0)
    expect(stub.requests.length).toBe(before)

    // Two judges: each judges every response --repeats times, and every sample counts in its mean and spread.
    const both = await runCli(
      'distill',
      '--archive',
      archive,
      '--repeats',
      '2',
      '--judge',
      'mock',
      '--judge',
      `${stub.baseUrl},model=stub-model`,
      '--out',
      join(work, 'two-judges'),
      '--cache-dir',
      join(work, 'cache-endpoint'),
      '--format',
      'pointwise',
      '--json',
    )
    expect(both.code, both.err).toBe(0)
    const twoJudges = JSON.parse(both.out)
    expect(twoJudges.settings.judges).toEqual([
      expect.stringMatching(/^mock:/),
      expect.stringMatching(/^pool:stub-model/),
    ])
    expect(twoJudges.judgements).toMatchObject({ requested: 96, succeeded: 96, llm_calls: 48 })
    expect(readJsonl(join(work, 'two-judges', 'pointwise.train.jsonl')).every((row) => row.n === 4)).toBe(true)
  })
})
