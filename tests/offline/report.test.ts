import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { objectiveByGeneration } from '../../offline/report/search.ts'
import { type ChatCompletionBody, type LlmStub, startLlmStub } from '../support/llm-stub.ts'
import { LLMBAR_FIXTURES, runCli } from '../support/cli.ts'

const LLMBAR = LLMBAR_FIXTURES
const PLANTED = '<script>alert("pwned")</script>'
const ESCAPED = '&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;'

const run = runCli

/** Runs `report` and returns the page; the run must succeed. */
async function report(input: string, out: string): Promise<{ html: string; out: string }> {
  const result = await run('report', input, '--out', out)
  expect(result.err).toBe('')
  expect(result.code).toBe(0)
  return { html: await readFile(out, 'utf8'), out: result.out }
}

/** The page loads nothing and runs nothing: no script, no external stylesheet, every link an in-page anchor. */
function expectSelfContained(html: string): void {
  expect(html).toMatch(/^<!doctype html>/)
  expect(html).not.toMatch(/<script/i)
  expect(html).not.toMatch(/<link|<iframe|<img|<object|<embed|@import|url\(/i)
  expect(html).not.toMatch(/\s(src|href)\s*=\s*["']?\s*(https?:)?\/\//i)
  for (const [, value] of html.matchAll(/\s(?:src|href)\s*=\s*"([^"]*)"/gi)) expect(value).toMatch(/^#[\w-]+$/)
  // The only URL inside a tag is the SVG namespace, which loads nothing (URLs from the inputs are escaped text).
  for (const [tag] of html.matchAll(/<[^>]*>/g))
    for (const [url] of tag.matchAll(/https?:\/\/[^\s"'>]*/g)) expect(url).toBe('http://www.w3.org/2000/svg')
  expect(html).toContain(`Content-Security-Policy" content="default-src 'none'`)
}

/** The svg charts of a page, each with its data-chart kind and the names of its series. */
function charts(html: string): Array<{ kind: string; title: string; svg: string }> {
  return [...html.matchAll(/<svg [^>]*data-chart="(\w+)" aria-label="([^"]*)"[\s\S]*?<\/svg>/g)].map((match) => ({
    kind: match[1]!,
    title: match[2]!,
    svg: match[0],
  }))
}

const textOf = (html: string) => html.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ')
const circlesIn = (svg: string, series: string) =>
  (new RegExp(`<g data-series="${series}">(.*?)</g>`).exec(svg)?.[1]?.match(/<circle/g) ?? []).length

describe('reward-harness report', () => {
  let directory: string
  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'report-test-'))
  })
  afterAll(() => rm(directory, { recursive: true, force: true }))

  describe('of a search output', () => {
    let outputDir: string
    let best: {
      best_rubrics: Array<{ prompt_id: string; history: number[]; rubric: { criteria: Array<{ text: string }> } }>
      run_manifest: { run_id: string; seed: number }
      usage: { total: { requests: number; cache_hits: number; calls: number } }
    }
    beforeAll(async () => {
      outputDir = join(directory, 'search')
      const result = await run(
        'search',
        '--dataset',
        'examples/demo.json',
        '--backend',
        'mock',
        '--generations',
        '4',
        '--output',
        join(outputDir, 'best.json'),
      )
      expect(result.code).toBe(0)
      best = JSON.parse(await readFile(join(outputDir, 'best.json'), 'utf8'))
    })

    it('finds the output in its directory and says what it detected', async () => {
      const result = await run('report', outputDir, '--out', join(directory, 'search.html'))
      expect(result).toMatchObject({ code: 0, err: '' })
      expect(result.out).toContain(`detected search output: ${join(outputDir, 'best.json')}`)
      expect(result.out).toMatch(/wrote .*search\.html \(\d+ KB, 3 charts\)/)
      const json = await run('report', outputDir, '--out', join(directory, 'search.html'), '--json')
      expect(JSON.parse(json.out)).toMatchObject({
        input: { kind: 'search', label: 'search output', files: [join(outputDir, 'best.json')] },
        charts: 3,
        title: 'Search report: demo.json',
      })
    })

    it(
      'charts the objective per generation (best and mean), and lists every best rubric, the run settings and the ' +
        'call counts',
      async () => {
        const { html } = await report(join(outputDir, 'best.json'), join(directory, 'search.html'))
        expectSelfContained(html)
        const found = charts(html)
        expect(found.map((chart) => `${chart.kind}:${chart.title}`)).toEqual([
          'line:Objective per generation',
          'line:Objective per generation, by prompt',
          'bar:Final objective by prompt',
        ])
        const generations = Math.max(...best.best_rubrics.map((entry) => entry.history.length))
        expect(circlesIn(found[0]!.svg, 'best prompt')).toBe(generations)
        expect(circlesIn(found[0]!.svg, 'mean over 3 prompts')).toBe(generations)
        for (const entry of best.best_rubrics) expect(found[1]!.svg).toContain(`data-series="${entry.prompt_id}"`)
        const text = textOf(html)
        for (const entry of best.best_rubrics) {
          expect(text).toContain(entry.prompt_id)
          for (const criterion of entry.rubric.criteria)
            expect(html).toContain(
              criterion.text.replaceAll('&', '&amp;').replaceAll('"', '&quot;').replaceAll("'", '&#39;'),
            )
        }
        expect(text).toContain(best.run_manifest.run_id)
        expect(text).toMatch(new RegExp(`seed ${best.run_manifest.seed}\\b`))
        const { requests, cache_hits: hits, calls } = best.usage.total
        expect(text).toContain(`total ${[requests, hits, calls].map((n) => n.toLocaleString('en-US')).join(' ')}`)
      },
    )

    it('escapes text from the output: a rubric with a planted <script> stays text', async () => {
      const planted = structuredClone(best)
      planted.best_rubrics[0]!.rubric.criteria[0]!.text = `Reward ${PLANTED} answers`
      planted.best_rubrics[0]!.prompt_id = `p-<img src=x onerror=alert(1)>`
      const file = join(directory, 'planted', 'best.json')
      await mkdir(join(directory, 'planted'), { recursive: true })
      await writeFile(file, JSON.stringify(planted))
      const { html } = await report(file, join(directory, 'planted.html'))
      expectSelfContained(html)
      expect(html).toContain(`Reward ${ESCAPED} answers`)
      expect(html).toContain('p-&lt;img src=x onerror=alert(1)&gt;')
    })

    it('takes best/mean per generation over prompts, a stopped prompt keeping its last value', () => {
      expect(objectiveByGeneration([[0.5, 0.7, 0.9], [0.3], []])).toEqual({
        best: [
          { x: 0, y: 0.5 },
          { x: 1, y: 0.7 },
          { x: 2, y: 0.9 },
        ],
        mean: [
          { x: 0, y: 0.4 },
          { x: 1, y: 0.5 },
          { x: 2, y: 0.6 },
        ],
      })
    })
  })

  describe('of an evolution log', () => {
    let stub: LlmStub | undefined
    afterEach(async () => {
      await stub?.close()
      stub = undefined
    })

    it(
      'charts validation accuracy per iteration with the kept change marked, the change log and the final library ' +
        '(mock backend)',
      async () => {
        const out = join(directory, 'evolve-mock')
        expect(
          (
            await run(
              'evolve',
              '--dataset',
              'offline/evolve/fixtures/pairs-demo.json',
              '--out',
              out,
              '--iterations',
              '3',
              '--backend',
              'mock',
            )
          ).code,
        ).toBe(0)
        const log = (await readFile(join(out, 'evolution-log.jsonl'), 'utf8'))
          .trim()
          .split('\n')
          .map(
            (line) =>
              JSON.parse(line) as {
                decision: string
                entries: string[]
                change: { key: string } | null
                usage: { total: { calls: number } }
              },
          )
        const result = await run('report', out, '--out', join(directory, 'evolve.html'))
        expect(result.out).toContain(`detected evolution log: ${join(out, 'evolution-log.jsonl')}`)
        const html = await readFile(join(directory, 'evolve.html'), 'utf8')
        expectSelfContained(html)
        const [chart] = charts(html)
        expect(chart).toMatchObject({ kind: 'line', title: 'Validation accuracy per iteration' })
        const kept = log.filter((line) => line.decision === 'kept')
        expect(kept.length).toBeGreaterThan(0)
        expect(circlesIn(chart!.svg, 'kept change')).toBe(kept.length)
        expect(circlesIn(chart!.svg, 'validation \\(library in use\\)')).toBe(log.length)
        expect(html.match(/<span class="badge kept">kept<\/span>/g)).toHaveLength(kept.length)
        for (const line of kept) expect(html).toContain(`<code>${line.change!.key}</code>`)
        for (const name of log.at(-1)!.entries)
          expect(html).toContain(`<code>${name}</code> <span class="badge baseline">skill</span>`)
        const calls = log.reduce((sum, line) => sum + line.usage.total.calls, 0)
        expect(calls).toBeGreaterThan(0)
        expect(/<section id="calls">[\s\S]*?<\/section>/.exec(html)![0]).toContain(
          `<td><strong>total</strong></td><td class="num">${calls.toLocaleString('en-US')}</td>`,
        )

        // The log alone (no checkpoints beside it): the entries are named, never taken from some other library.
        const alone = join(directory, 'log-alone')
        await mkdir(alone, { recursive: true })
        await writeFile(join(alone, 'evolution-log.jsonl'), await readFile(join(out, 'evolution-log.jsonl')))
        const { html: bare } = await report(join(alone, 'evolution-log.jsonl'), join(directory, 'evolve-alone.html'))
        expect(bare).not.toContain('<span class="badge baseline">skill</span>')
        expect(textOf(bare)).toContain(
          `Entries: ${log.at(-1)!.entries.join(', ')}. (No checkpoints/iter-3 with the content hash the log recorded`,
        )
      },
    )

    it('marks a rolled-back change and escapes what the model wrote (openai backend on a loopback stub)', async () => {
      stub = await startLlmStub()
      const dataset = JSON.parse(await readFile('offline/evolve/fixtures/pairs-demo.json', 'utf8')) as {
        prompts: { candidates: { text: string; metadata: { rank: number } }[] }[]
      }
      const good = new Set(
        dataset.prompts.flatMap((prompt) =>
          prompt.candidates.filter((candidate) => candidate.metadata.rank === 1).map((candidate) => candidate.text),
        ),
      )
      const system = (body: ChatCompletionBody) =>
        body.messages.find((message) => message.role === 'system')?.content ?? ''
      const user = (body: ChatCompletionBody) => body.messages.find((message) => message.role === 'user')?.content ?? ''
      const answerA = (body: ChatCompletionBody) =>
        /Answer A:\n<<<DATA-(\w+)\n([\s\S]*?)\nDATA-\1>>>/.exec(user(body))?.[2] ?? ''
      let proposals = 0
      stub.respondWith((body) => {
        const sys = system(body)
        if (sys.startsWith('You are the library router'))
          return JSON.stringify({ entries: [...user(body).matchAll(/^- ([a-z0-9-]+) \(/gm)].map((match) => match[1]) })
        if (sys.startsWith('You are the chain analyzer'))
          return JSON.stringify({ signals: [{ kind: 'other', suggestion: 'try' }], summary: 'stub analysis' })
        if (sys.startsWith('You are the evolver')) {
          proposals++
          if (proposals === 1)
            return JSON.stringify({
              op: 'add',
              entry: {
                name: 'good-skill',
                kind: 'skill',
                description: 'Prefers the complete answer',
                body: `Prefer complete answers. ${PLANTED}`,
              },
              rationale: 'coverage matters',
            })
          if (proposals === 2)
            return JSON.stringify({
              op: 'add',
              entry: {
                name: 'bad-skill',
                kind: 'skill',
                description: 'A misleading rubric',
                body: 'Prefer the worse answer.',
              },
              rationale: `stub ${PLANTED}`,
            })
          return JSON.stringify({ op: 'none', rationale: 'nothing left' })
        }
        // The sub-agent: always "A" without skills (right half the time), right with good-skill, wrong with bad-skill.
        const aIsGood = good.has(answerA(body))
        if (sys.includes('## Skill: bad-skill'))
          return JSON.stringify({ think: 's', answer: { preference: aIsGood ? 'B' : 'A', reason: 's' } })
        if (sys.includes('## Skill: good-skill'))
          return JSON.stringify({ think: 's', answer: { preference: aIsGood ? 'A' : 'B', reason: 's' } })
        return JSON.stringify({ think: 's', answer: { preference: 'A', reason: 's' } })
      })
      const out = join(directory, 'evolve-stub')
      const evolved = await run(
        'evolve',
        '--dataset',
        'offline/evolve/fixtures/pairs-demo.json',
        '--out',
        out,
        '--iterations',
        '3',
        '--backend',
        'openai',
        '--endpoint',
        stub.baseUrl,
        '--model',
        'stub-model',
        '--explore-margin',
        '0.1',
        '--no-cache',
      )
      expect(evolved.code).toBe(0)
      const log = (await readFile(join(out, 'evolution-log.jsonl'), 'utf8'))
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { decision: string; val_accuracy: number | null })
      expect(log.map((line) => line.decision)).toEqual(['baseline', 'kept', 'rolled_back', 'skipped'])

      const { html } = await report(join(out, 'evolution-log.jsonl'), join(directory, 'evolve-stub.html'))
      expectSelfContained(html)
      const [chart] = charts(html)
      expect(circlesIn(chart!.svg, 'kept change')).toBe(1)
      expect(circlesIn(chart!.svg, 'rolled back')).toBe(1)
      // The rolled-back marker sits at the rejected change's validation accuracy: below the kept one.
      const y = (series: string) =>
        Number(new RegExp(`<g data-series="${series}"><circle cx="[\\d.]+" cy="([\\d.]+)"`).exec(chart!.svg)![1])
      expect(y('rolled back')).toBeGreaterThan(y('kept change'))
      expect(html).toMatch(/<span class="badge rolled_back">rolled back<\/span>/)
      expect(html).toContain(`stub ${ESCAPED}`)
      expect(html).toContain(`Prefer complete answers. ${ESCAPED}`)
      expect(textOf(html)).toContain('kept / rolled back 1 / 1')
    })
  })

  describe('of bench results', () => {
    let server: Server
    let base = ''
    beforeAll(async () => {
      // A batch_score endpoint that fails one candidate, with markup in its error message.
      server = createServer(async (request, response) => {
        // An edge whose /healthz names no artifact kind: a rubric target.
        if (request.method === 'GET')
          return void response.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}')
        let body = ''
        for await (const chunk of request) body += chunk
        const { items } = JSON.parse(body) as {
          items: Array<{ prompt_id: string; candidate: { candidate_id: string; text: string } }>
        }
        const results = items.map((item, index) =>
          index === 0 && item.prompt_id.endsWith('0')
            ? { index, ok: false, error_code: 'llm_unavailable', error_message: `stub ${PLANTED}` }
            : { index, ok: true, score: Math.min(1, item.candidate.text.length / 400) },
        )
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ results }))
      })
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    })
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

    it(
      'tables accuracy with its intervals, draws bars with CI whiskers and the scores, and says there were no ' +
        'failures',
      async () => {
        const file = join(directory, 'bench', 'natural.json')
        expect(
          (
            await run(
              'bench',
              '--dataset',
              `${LLMBAR}/natural.json`,
              '--scorer',
              'mock',
              '--bootstrap',
              '100',
              '--out',
              file,
            )
          ).code,
        ).toBe(0)
        const bench = JSON.parse(await readFile(file, 'utf8')) as {
          overall: {
            pairwise: Record<
              'ab' | 'ba' | 'swap_consistent',
              { accuracy: number; ci95: [number, number]; bootstrap95: [number, number] }
            >
          }
        }
        const result = await run('report', file, '--out', join(directory, 'bench.html'))
        expect(result.out).toContain(`detected bench result: ${file}`)
        const html = await readFile(join(directory, 'bench.html'), 'utf8')
        expectSelfContained(html)
        const found = charts(html)
        expect(found.map((chart) => chart.kind)).toEqual(['bar', 'histogram'])
        expect(found[0]!.svg.match(/data-part="whisker"/g)).toHaveLength(3)
        expect(found[1]!.svg).toContain('n = 200')
        const pct = (value: number) => `${(value * 100).toFixed(1)}%`
        const { swap_consistent: swap } = bench.overall.pairwise
        expect(html).toContain(
          `<strong>${pct(swap.accuracy)}</strong><span class="ci">95% CI ` +
            `${pct(swap.ci95[0])}–${pct(swap.ci95[1])}</span><span class="ci">bootstrap ` +
            `${pct(swap.bootstrap95[0])}–${pct(swap.bootstrap95[1])}</span>`,
        )
        expect(found[0]!.svg).toContain(`<title>swap-consistent: ${Number(swap.accuracy.toPrecision(3))} [`)
        expect(textOf(html)).toContain('No scorer failures')
      },
    )

    it('reads a directory of results as subsets, one bar each, with scorer failures shown apart, escaped', async () => {
      const dir = join(directory, 'bench-subsets')
      for (const subset of ['natural', 'adversarial-neighbor']) {
        expect(
          (
            await run(
              'bench',
              '--dataset',
              `${LLMBAR}/${subset}.json`,
              '--scorer',
              `url:${base}#prod`,
              '--token',
              't',
              '--out',
              join(dir, `${subset}.json`),
            )
          ).code,
        ).toBe(0)
      }
      const result = await run('report', dir, '--out', join(directory, 'bench-subsets.html'))
      expect(result.out).toContain(
        `detected bench result: ${join(dir, 'adversarial-neighbor.json')}, ${join(dir, 'natural.json')}`,
      )
      const html = await readFile(join(directory, 'bench-subsets.html'), 'utf8')
      expectSelfContained(html)
      const bySubset = charts(html).find((chart) => chart.title.endsWith('by subset'))!
      expect([...bySubset.svg.matchAll(/<g data-bar="([^"]+)">/g)].map((match) => match[1])).toEqual([
        'adversarial-neighbor',
        'natural',
      ])
      const failures = /<section id="failures">([\s\S]*?)<\/section>/.exec(html)![1]!
      expect(failures).toContain(`stub ${ESCAPED}`)
      expect(failures).toMatch(/<h2>Failures \([1-9]\d*\)<\/h2>/)
      // Failures are not in the accuracy table's n: each subset's n counts only judged items.
      const natural = JSON.parse(await readFile(join(dir, 'natural.json'), 'utf8')) as {
        failures: { count: number }
        overall: { pairwise: { ab: { n: number; failures: number } } }
      }
      expect(natural.failures.count).toBeGreaterThan(0)
      expect(html).toContain(`n=${natural.overall.pairwise.ab.n}`)
      expect(natural.overall.pairwise.ab.n + natural.overall.pairwise.ab.failures).toBe(100)
    })
  })

  describe('bad input', () => {
    it.each([
      [
        'a file that is none of the three',
        ['README.md'],
        /README\.md: not a recognised input \(line 1 is not JSON\); expected a search output/,
      ],
      [
        'a JSON object of another kind',
        ['package.json'],
        /package\.json: not a recognised input \(a JSON object with keys "name", "version"/,
      ],
      ['a missing path', ['nope/none.json'], /nope\/none\.json: no such file or directory/],
      [
        'a directory without an input',
        ['examples/'],
        /examples\/: no search output, evolution-log\.jsonl or bench result in this directory/,
      ],
    ])('exits 2 for %s, saying what it expected', async (_case, argv, message) => {
      const result = await run('report', ...argv, '--out', join(directory, 'never.html'))
      expect(result.code).toBe(2)
      expect(result.err).toMatch(message)
      await expect(readFile(join(directory, 'never.html'))).rejects.toThrow()
    })

    it('exits 2 on a malformed bench result (naming the field), a non-HTML --out, a mixed-kind dir', async () => {
      const broken = join(directory, 'broken.json')
      await writeFile(broken, JSON.stringify({ schema_version: 1, scorer: 'mock', overall: { items: 'many' } }))
      const malformed = await run('report', broken, '--out', join(directory, 'never.html'))
      expect(malformed.code).toBe(2)
      expect(malformed.err).toMatch(
        /broken\.json: looks like a bench result \(it has "overall" and "scorer"\) but dataset: /,
      )
      const json = await run('report', broken, '--out', join(directory, 'never.html'), '--json')
      expect(JSON.parse(json.err)).toMatchObject({ error: { kind: 'bad_input', code: 'usage' } })
      expect((await run('report', broken, '--out', join(directory, 'report.txt'))).err).toContain(
        '--out: the report is HTML',
      )
      const mixed = join(directory, 'mixed')
      await mkdir(mixed, { recursive: true })
      await writeFile(join(mixed, 'best.json'), await readFile(join(directory, 'search', 'best.json')))
      await writeFile(join(mixed, 'bench.json'), await readFile(join(directory, 'bench', 'natural.json')))
      const both = await run('report', mixed, '--out', join(directory, 'never.html'))
      expect(both.code).toBe(2)
      expect(both.err).toContain('holds both search outputs (best.json) and bench results (bench.json); pass one file')
    })
  })
})
