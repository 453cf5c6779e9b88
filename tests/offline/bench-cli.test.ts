import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { blindItem, createScorer, parseScorerSpec } from '../../offline/bench/scorers.ts'
import type { BenchReport } from '../../offline/bench/run.ts'
import { runCli } from '../support/cli.ts'

const FIXTURES = 'tests/offline/fixtures/bench'

const run = runCli

async function runJson(...argv: string[]): Promise<BenchReport> {
  const result = await run(...argv, '--json')
  expect(result.err).toBe('')
  expect(result.code).toBe(0)
  return JSON.parse(result.out) as BenchReport
}

/** A bench in which nothing could be scored: exit 3, one line on stderr saying why, the report still on stdout. */
async function runNothingScored(...argv: string[]): Promise<BenchReport> {
  const result = await run(...argv, '--json')
  expect(result.code).toBe(3)
  // Under --json the reason is one JSON line on stderr.
  expect(result.err.trim().split('\n')).toHaveLength(1)
  expect(JSON.parse(result.err).error.message).toMatch(
    /^bench: none of the \d+ candidates could be scored; the first failure: /,
  )
  return JSON.parse(result.out) as BenchReport
}

describe('reward-harness bench', () => {
  const directory = mkdtempSync(join(tmpdir(), 'bench-test-'))
  afterAll(() => rmSync(directory, { recursive: true, force: true }))

  it('--scorer mock over an LLMBar-style JSON file prints accuracy with its interval', async () => {
    const result = await run('bench', '--dataset', `${FIXTURES}/llmbar.json`, '--scorer', 'mock')
    expect(result).toMatchObject({ code: 0, err: '' })
    expect(result.out).toMatch(
      /pairwise accuracy \(A\/B\)\s+\d+\.\d% \[95% CI \d+\.\d–\d+\.\d\] \(n=4, ties \d+, failures 0\)/,
    )
    expect(result.out).toContain('pairwise accuracy (B/A)')
    expect(result.out).toContain('swap-consistent accuracy')
    expect(result.out).toContain('ties count as half correct')
    const report = await runJson('bench', '--dataset', `${FIXTURES}/llmbar.json`, '--scorer', 'mock')
    expect(report.dataset).toMatchObject({ shape: 'llmbar', items: 4, candidates: 8 })
    expect(report.overall.pairwise!.ab.n).toBe(4)
    expect(report.overall.pairwise!.ab.ci95).toHaveLength(2)
    expect(report.failures.count).toBe(0)
  })

  it('--scorer mock over a JudgeBench-style JSONL file, with --out, --ties wrong and a bootstrap', async () => {
    const out = join(directory, 'jb.json')
    const result = await run(
      'bench',
      '--dataset',
      `${FIXTURES}/judgebench.jsonl`,
      '--scorer',
      'mock',
      '--ties',
      'wrong',
      '--bootstrap',
      '50',
      '--seed',
      '3',
      '--out',
      out,
    )
    expect(result).toMatchObject({ code: 0, err: '' })
    expect(result.out).toContain('ties count as wrong')
    expect(result.out).toContain('bootstrap')
    const report = JSON.parse(readFileSync(out, 'utf8')) as BenchReport
    expect(report).toMatchObject({
      scorer: 'mock',
      seed: 3,
      ties: 'wrong',
      bootstrap: 50,
      dataset: { shape: 'judgebench', items: 3 },
    })
    expect(report.overall.pairwise!.ab.bootstrap95).toHaveLength(2)
  })

  it('rubric: (a search output and a preset file) and artifact: scorers on examples/demo.json', async () => {
    const best = join(directory, 'best.json')
    const rm = join(directory, 'rm.json')
    expect((await run('search', '--dataset', 'examples/demo.json', '--backend', 'mock', '--output', best)).code).toBe(0)
    expect((await run('export', '--search-output', best, '--out', rm)).code).toBe(0)
    for (const scorer of [`rubric:${best}`, `rubric:${FIXTURES}/preset-rubric.json`, `artifact:${rm}`]) {
      const report = await runJson('bench', '--dataset', 'examples/demo.json', '--scorer', scorer)
      expect(report.scorer).toBe(scorer)
      expect(report.overall.kway).toMatchObject({ n: 3, failures: 0 })
      expect(report.overall.tail!.n).toBeGreaterThan(0)
      expect(report.failures.count).toBe(0)
    }
    const text = await run('bench', '--dataset', 'examples/demo.json', '--scorer', `artifact:${rm}`)
    expect(text.out).toMatch(/K-way accuracy \(>2 cands\)\s+\d+\.\d% \[95% CI/)
    // Benched on the data it was searched on: said, in the report and on the console.
    expect(text.out).toMatch(/IN-SAMPLE: 3 of 3 items are graded with a rubric searched on that very prompt/)
    const own = await runJson('bench', '--dataset', 'examples/demo.json', '--scorer', `rubric:${best}`)
    expect(own.in_sample).toEqual({ items: 3, of: 3 })
    // One rubric for every prompt (a held-out use): nothing in-sample, nothing said.
    const general = join(directory, 'rm-default.json')
    expect((await run('export', '--search-output', best, '--out', general, '--default-rubric', 'best')).code).toBe(0)
    const held = JSON.parse(readFileSync(general, 'utf8'))
    held.rubrics = { __default__: held.rubrics.__default__ }
    writeFileSync(general, JSON.stringify(held))
    const heldOut = await run('bench', '--dataset', 'examples/demo.json', '--scorer', `artifact:${general}`)
    expect(heldOut.code, heldOut.err).toBe(0)
    expect(heldOut.out).not.toMatch(/IN-SAMPLE/)
  }, 30_000)

  it('exits 2 on bad input: a library: that is not a library, unknown scorers, missing files, bad flags', async () => {
    const library = await run('bench', '--dataset', 'examples/demo.json', '--scorer', 'library:lib')
    expect(library.code).toBe(2)
    expect(library.err).toContain('is not a judge library (no registry.json)')
    expect((await run('bench', '--dataset', 'examples/demo.json', '--scorer', 'oracle')).code).toBe(2)
    expect((await run('bench', '--dataset', 'examples/demo.json', '--scorer', 'rubric:nope.json')).code).toBe(2)
    expect((await run('bench', '--dataset', 'nope.json', '--scorer', 'mock')).code).toBe(2)
    expect((await run('bench', '--dataset', 'examples/demo.json', '--scorer', 'mock', '--ties', 'maybe')).code).toBe(2)
    const json = await run('bench', '--dataset', 'examples/demo.json', '--scorer', 'library:lib', '--json')
    expect(JSON.parse(json.err)).toMatchObject({ error: { kind: 'bad_input', code: 'usage' } })
  })

  it('shows candidates to scorers blind: opaque ids, no labels, sources or metadata', () => {
    const item = {
      prompt_id: 'p',
      prompt: 'Q?',
      group: 'natural',
      metadata: { secret: 1 },
      candidates: [
        { candidate_id: 'chosen', text: 'A', source: 'gpt', label: { rank: 1 }, metadata: { x: 1 } },
        { candidate_id: 'rejected', text: 'B', source: 'gpt', label: { rank: 2 }, metadata: {} },
      ],
    }
    const blind = blindItem(item, 0)
    expect(blind.group).toBeUndefined()
    expect(blind.metadata).toEqual({})
    expect(blind.candidates.map((candidate) => candidate.text)).toEqual(['A', 'B'])
    for (const candidate of blind.candidates)
      expect(candidate).toMatchObject({
        candidate_id: expect.stringMatching(/^c\d$/),
        label: {},
        source: 'unknown',
        metadata: {},
      })
    expect(parseScorerSpec('url:http://h:1/#prod')).toEqual({ kind: 'url', base: 'http://h:1', target: 'prod' })
  })

  it('url: sends batch_score requests of at most 100 items (here 3), mapping results back by index', async () => {
    const sizes: number[] = []
    const fakeFetch = (async (url: string | URL | Request, init?: RequestInit) => {
      if (String(url).endsWith('/healthz')) return new Response('{}', { status: 404 })
      const { items } = JSON.parse(String(init?.body)) as { items: Array<{ candidate: { text: string } }> }
      sizes.push(items.length)
      const results = items.map((item, index) => ({ index, ok: true, score: Number(item.candidate.text) })).reverse()
      return new Response(JSON.stringify({ results }), { status: 200 })
    }) as typeof fetch
    const scorer = await createScorer(
      { kind: 'url', base: 'http://x', target: 't' },
      { concurrency: 2, seed: 0, chunkSize: 3, fetch: fakeFetch },
    )
    const items = [0, 1, 2].map((p) => ({
      prompt_id: `p${p}`,
      prompt: 'Q',
      metadata: {},
      candidates: [0, 1, 2].map((k) => ({
        candidate_id: `c${k}`,
        text: String(p * 10 + k),
        source: 'unknown',
        label: {},
        metadata: {},
      })),
    }))
    const scores = await scorer.scoreAll(items)
    expect(sizes).toEqual([3, 3, 3])
    expect(scores).toEqual([0, 1, 2].map((p) => [0, 1, 2].map((k) => ({ score: p * 10 + k }))))
    const big = await createScorer(
      { kind: 'url', base: 'http://x', target: 't' },
      { concurrency: 1, seed: 0, chunkSize: 500, fetch: fakeFetch },
    )
    sizes.length = 0
    await big.scoreAll(Array.from({ length: 70 }, (_, p) => ({ ...items[0]!, prompt_id: `q${p}` })))
    expect(sizes).toEqual([100, 100, 10])
  })

  describe('url: against a loopback batch_score stub', () => {
    let server: Server
    let base = ''
    const requests: Array<{
      url: string
      auth: string | undefined
      bytes: number
      items: Array<{ prompt_id: string; prompt: string; reference?: string; candidate: Record<string, unknown> }>
    }> = []

    beforeAll(async () => {
      server = createServer(async (request: IncomingMessage, response) => {
        let body = ''
        for await (const chunk of request) body += chunk
        if (request.method === 'GET') {
          // Only the library target says what it serves; the others answer as an edge without artifact_kind would.
          if (request.url === '/rm/lib/healthz')
            response
              .writeHead(200, { 'content-type': 'application/json' })
              .end(JSON.stringify({ status: 'ok', artifact_kind: 'library' }))
          else if (request.url === '/rm/broken/healthz')
            response.writeHead(404).end('{"error":{"code":"target_not_found","message":"no target"}}')
          else response.writeHead(404).end('{}')
          return
        }
        const { items } = JSON.parse(body) as {
          items: Array<{
            prompt_id: string
            prompt: string
            reference?: string
            candidate: { candidate_id: string; text: string }
          }>
        }
        requests.push({
          url: request.url ?? '',
          auth: request.headers.authorization,
          bytes: Buffer.byteLength(body),
          items,
        })
        if (request.url === '/rm/slow/batch_score') {
          // Injected latency, far past the --request-timeout the test sets: the client's timeout is under test.
          setTimeout(() => response.writeHead(200, { 'content-type': 'application/json' }).end('{"results":[]}'), 1_500)
          return
        }
        if (request.url === '/rm/lib/batch_score') {
          // A length judge over both orders; the second order of a pair whose reference is "yes" fails; France fails.
          const results = items.map((item, index) => {
            if (item.prompt.includes('France'))
              return { index, ok: false, error_code: 'llm_unavailable', error_message: 'stub failure' }
            const outcome = item.candidate.text.length > item.reference!.length ? 'win' : 'loss'
            const orders = [
              { order: 'candidate_first', outcome },
              {
                order: 'candidate_second',
                outcome: item.reference === 'yes' || item.candidate.text === 'yes' ? null : outcome,
              },
            ]
            return { index, ok: true, score: outcome === 'win' ? 1 : 0, orders }
          })
          response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ results }))
          return
        }
        if (request.url !== '/rm/prod/batch_score') {
          response.writeHead(404).end('{}')
          return
        }
        const results = items.map((item, index) =>
          item.candidate.text === 'Gracias means thank you in Spanish.'
            ? {
                index,
                ok: false,
                prompt_id: item.prompt_id,
                candidate_id: item.candidate.candidate_id,
                error_code: 'llm_unavailable',
                error_message: 'stub failure',
              }
            : {
                index,
                ok: true,
                prompt_id: item.prompt_id,
                candidate_id: item.candidate.candidate_id,
                score: Math.min(1, item.candidate.text.length / 50),
              },
        )
        response
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ request_id: 'r', artifact_id: 'rm_x', results, latency_ms: 1 }))
      })
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    })
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

    it('scores every candidate, counts the failing item apart (not a tie), sends no labels', async () => {
      const report = await runJson(
        'bench',
        '--dataset',
        `${FIXTURES}/llmbar.json`,
        '--scorer',
        `url:${base}#prod`,
        '--token',
        't0k',
      )
      expect(report.scorer).toBe(`url:${base}#prod`)
      expect(report.failures).toMatchObject({ count: 1, items: 1 })
      expect(report.failures.examples[0]!.error).toContain('llm_unavailable: stub failure')
      expect(report.overall.pairwise!.ab).toMatchObject({ n: 3, failures: 1, ties: 0 })
      expect(report.overall.pairwise!.swap_consistent.failures).toBe(1)
      expect(report.overall.failed_items).toBe(1)
      // length-as-score: item 1 right; item 2 ("yes" is better) and item 3 (the longer answer is wrong) wrong
      expect(report.overall.pairwise!.ab.accuracy).toBeCloseTo(1 / 3)
      const sent = requests.flatMap((request) => request.items)
      expect(sent).toHaveLength(8)
      expect(requests.every((request) => request.url === '/rm/prod/batch_score' && request.auth === 'Bearer t0k')).toBe(
        true,
      )
      for (const item of sent) expect(Object.keys(item.candidate).sort()).toEqual(['candidate_id', 'text'])
      const text = await run('bench', '--dataset', `${FIXTURES}/llmbar.json`, '--scorer', `url:${base}#prod`)
      expect(text.out).toContain('failures                    1 candidate in 1 item')
      expect(text.out).toContain('llm_unavailable: stub failure')
    })

    it(
      'a library target (healthz says so) gets each pair once, the other candidate as the reference; win rates over ' +
        'the judged orders',
      async () => {
        const before = requests.length
        const report = await runJson('bench', '--dataset', `${FIXTURES}/llmbar.json`, '--scorer', `url:${base}#lib`)
        const sent = requests.slice(before).flatMap((request) => request.items)
        expect(sent).toHaveLength(4)
        const dataset = JSON.parse(readFileSync(`${FIXTURES}/llmbar.json`, 'utf8')) as Array<{
          input: string
          output_1: string
          output_2: string
        }>
        for (const item of sent) {
          const source = dataset.find((entry) => entry.input === item.prompt)!
          expect([item.candidate.text, item.reference].sort()).toEqual([source.output_1, source.output_2].sort())
          expect(Object.keys(item.candidate).sort()).toEqual(['candidate_id', 'text'])
        }
        // Length wins: right on the colours and Spanish items, wrong on "yes" (judged in one order only); France
        // failed.
        expect(report.failures).toMatchObject({ count: 2, items: 1 })
        expect(report.failures.examples[0]!.error).toContain('llm_unavailable: stub failure')
        expect(report.overall.pairwise!.ab).toMatchObject({ n: 3, failures: 1, ties: 0 })
        expect(report.overall.pairwise!.ab.accuracy).toBeCloseTo(2 / 3)
      },
    )

    it(
      "a library target gets the dataset's images, in bodies under the edge's 1 MiB limit; an item too large alone " +
        'fails apart',
      async () => {
        const image = (kib: number, seed: number) => ({
          data_url: `data:image/png;base64,${Buffer.alloc(kib * 768, seed).toString('base64')}`,
        })
        const prompts = [600, 600, 1_200].map((kib, index) => ({
          prompt_id: `img-${index}`,
          prompt: `Describe picture ${index}.`,
          images: [image(kib, index)],
          candidates: [
            { candidate_id: 'long', text: 'A long and careful description.', metadata: { rank: 1 } },
            { candidate_id: 'short', text: 'Short.', images: [image(1, 9)], metadata: { rank: 2 } },
          ],
        }))
        const file = join(directory, 'images.json')
        writeFileSync(file, JSON.stringify({ prompts }))
        const before = requests.length
        const report = await runJson('bench', '--dataset', file, '--scorer', `url:${base}#lib`)
        const sent = requests.slice(before)
        expect(sent).toHaveLength(2)
        for (const request of sent) {
          expect(request.bytes).toBeLessThan(1024 * 1024)
          for (const item of request.items as unknown as Array<{
            images?: { data_url: string }[]
            candidate: { text: string; images?: unknown[] }
            reference_images?: unknown[]
          }>) {
            expect(item.images?.[0]?.data_url).toMatch(/^data:image\/png;base64,/)
            expect(item.candidate.text === 'Short.' ? item.candidate.images : item.reference_images).toHaveLength(1)
          }
        }
        expect(report.failures).toMatchObject({ count: 2, items: 1 })
        expect(report.failures.examples[0]).toMatchObject({ prompt_id: 'img-2' })
        expect(report.failures.examples[0]!.error).toMatch(/over the edge's 1 MiB body limit/)
        // The stub judges by length: the long description wins both orders of the two items that were sent.
        expect(report.overall.pairwise!.ab).toMatchObject({ n: 2, accuracy: 1, failures: 1 })
      },
    )

    it('a target whose /healthz fails is reported for every candidate, not scored as a rubric target', async () => {
      const before = requests.length
      const report = await runNothingScored(
        'bench',
        '--dataset',
        `${FIXTURES}/llmbar.json`,
        '--scorer',
        `url:${base}#broken`,
      )
      expect(requests.length).toBe(before)
      expect(report.failures.count).toBe(8)
      expect(report.failures.examples[0]!.error).toMatch(/\/rm\/broken\/healthz: HTTP 404: .*target_not_found/)
      const plain = await run('bench', '--dataset', `${FIXTURES}/llmbar.json`, '--scorer', `url:${base}#broken`)
      expect(plain.code).toBe(3)
      // Eight candidates failed the same way: one line with the count, not eight copies.
      expect(plain.out).toContain('failures (8, by error):\n  8× ')
      expect(plain.out.match(/\/rm\/broken\/healthz/g)).toHaveLength(1)
      expect(plain.err).toMatch(
        /^bench: none of the 8 candidates could be scored; the first failure: .*\/rm\/broken\/healthz: HTTP 404.*\n$/,
      )
    })

    it("an edge silent past --request-timeout fails the chunk's items, and the bench still reports", async () => {
      const report = await runNothingScored(
        'bench',
        '--dataset',
        `${FIXTURES}/llmbar.json`,
        '--scorer',
        `url:${base}#slow`,
        '--request-timeout',
        '0.2',
      )
      expect(report.failures.count).toBe(8)
      expect(report.failures.examples[0]!.error).toBe('no answer within 0.2 s')
      expect(report.overall.pairwise!.ab).toMatchObject({ n: 0, failures: 4 })
      const refused = await run(
        'bench',
        '--dataset',
        `${FIXTURES}/llmbar.json`,
        '--scorer',
        `url:${base}#slow`,
        '--request-timeout',
        '0',
      )
      expect(refused.code).toBe(2)
      expect(refused.err).toContain('--request-timeout')
    })

    it('an HTTP error fails every item of the chunk, reported as failures', async () => {
      const report = await runNothingScored(
        'bench',
        '--dataset',
        `${FIXTURES}/judgebench.jsonl`,
        '--scorer',
        `url:${base}#other`,
      )
      expect(report.failures.count).toBe(6)
      expect(report.overall.pairwise!.ab).toMatchObject({ n: 0, accuracy: null, failures: 3 })
    })
  })
})
