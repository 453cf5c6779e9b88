/**
 * Offline reports in a real browser: the real `search`, `evolve` and `bench` commands run on the mock backend over
 * small datasets, `reward-harness report` turns each into one HTML file, and Debian's headless Chromium opens it
 * from file:// and checks what a person would see: the headline, the sections, tables, and charts that actually
 * rendered (non-zero boxes, drawn lines, bars and markers), with no request beyond the file itself and no console
 * error (a CSP violation would be one). Screenshots land in tests/browser/screenshots/report-*.png.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LLMBAR_FIXTURES, runCli } from '../support/cli.ts'
import { launchChromium, SCREENSHOT_DIR } from './support/chromium.ts'

const LLMBAR = LLMBAR_FIXTURES

let directory: string
let browser: Browser

async function run(...argv: string[]): Promise<string> {
  const { code, out, err } = await runCli(...argv)
  if (code !== 0) throw new Error(`reward-harness ${argv.join(' ')} exited ${code}: ${err}`)
  return out
}

beforeAll(async () => {
  directory = await mkdtemp(path.join(tmpdir(), 'report-browser-'))
  await run(
    'search',
    '--dataset',
    'examples/demo.json',
    '--backend',
    'mock',
    '--mock-noise',
    '0.2',
    '--generations',
    '6',
    '--output',
    path.join(directory, 'search', 'best.json'),
  )
  await run('report', path.join(directory, 'search'), '--out', path.join(directory, 'search.html'))
  await run(
    'evolve',
    '--dataset',
    'offline/evolve/fixtures/pairs-demo.json',
    '--out',
    path.join(directory, 'evolve'),
    '--iterations',
    '3',
    '--backend',
    'mock',
  )
  await run('report', path.join(directory, 'evolve'), '--out', path.join(directory, 'evolve.html'))
  for (const subset of ['natural', 'adversarial-neighbor']) {
    await run(
      'bench',
      '--dataset',
      `${LLMBAR}/${subset}.json`,
      '--scorer',
      'mock',
      '--bootstrap',
      '200',
      '--out',
      path.join(directory, 'bench', `${subset}.json`),
    )
  }
  await run('report', path.join(directory, 'bench'), '--out', path.join(directory, 'bench.html'))
  browser = await launchChromium()
})

afterAll(async () => {
  await browser?.close()
  await rm(directory, { recursive: true, force: true })
})

/** Opens a report from file://, recording every request and console error. */
async function open(name: string): Promise<{ page: Page; requests: string[]; errors: string[]; url: string }> {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } })
  const page = await context.newPage()
  const requests: string[] = []
  const errors: string[] = []
  page.on('request', (request) => requests.push(request.url()))
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`))
  page.on('console', (message) => void (message.type() === 'error' && errors.push(`console: ${message.text()}`)))
  const url = pathToFileURL(path.join(directory, name)).href
  await page.goto(url)
  return { page, requests, errors, url }
}

/** Per chart: its kind, its box, and how many data marks (lines, markers, bars) have a non-empty box. */
async function renderedCharts(page: Page) {
  return page.locator('svg[data-chart]').evaluateAll((svgs) =>
    svgs.map((svg) => {
      const box = svg.getBoundingClientRect()
      const kind = svg.getAttribute('data-chart')
      const selector =
        kind === 'line'
          ? 'g[data-series] path, g[data-series] circle'
          : kind === 'bar'
            ? 'g[data-bar] rect'
            : 'rect[fill-opacity]'
      const marks = [...svg.querySelectorAll(selector)].filter((mark) => {
        const markBox = mark.getBoundingClientRect()
        return markBox.width > 0 && markBox.height > 0
      })
      return {
        kind,
        title: svg.getAttribute('aria-label'),
        width: box.width,
        height: box.height,
        marks: marks.length,
        whiskers: svg.querySelectorAll('path[data-part="whisker"]').length,
        noData: svg.querySelector('[data-no-data]') !== null,
      }
    }),
  )
}

async function expectCleanLoad(opened: { requests: string[]; errors: string[]; url: string }): Promise<void> {
  expect(opened.requests).toEqual([opened.url])
  expect(opened.errors).toEqual([])
}

describe('offline reports in headless Chromium', () => {
  it('search report: objective per generation, the best rubrics, settings and calls', async () => {
    const opened = await open('search.html')
    const { page } = opened
    await expectCleanLoad(opened)
    expect(await page.locator('h1').textContent()).toBe('Search report: demo.json')
    expect(await page.locator('header .kind').textContent()).toMatch(/search output/i)
    for (const heading of ['Objective per generation', 'Best rubrics (3)', 'Run settings', 'Calls'])
      expect(await page.getByRole('heading', { name: heading, exact: true }).isVisible()).toBe(true)
    for (const prompt of ['p_debug_undefined', 'p_math_trains', 'p_policy_brief'])
      expect(await page.locator('details.rubric summary', { hasText: prompt }).isVisible()).toBe(true)
    expect(
      await page
        .locator('details.rubric')
        .first()
        .locator('td', { hasText: 'The answer does what the prompt asks' })
        .isVisible(),
    ).toBe(true)
    expect(await page.locator('#calls tr', { hasText: 'verifier' }).first().innerText()).toMatch(/verifier\s+\d+/)

    const charts = await renderedCharts(page)
    expect(charts.map((chart) => `${chart.kind}:${chart.title}`)).toEqual([
      'line:Objective per generation',
      'line:Objective per generation, by prompt',
      'bar:Final objective by prompt',
    ])
    for (const chart of charts) {
      expect(chart.width).toBeGreaterThan(300)
      expect(chart.height).toBeGreaterThan(100)
      expect(chart.noData).toBe(false)
    }
    // Two series (best, mean) of 1 line + a marker per generation each; three prompt lines; three bars.
    expect(charts[0]!.marks).toBeGreaterThanOrEqual(2 * 3)
    expect(charts[1]!.marks).toBeGreaterThanOrEqual(3 * 3)
    expect(charts[2]!.marks).toBe(3)
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'report-search.png'), fullPage: true })
  })

  it('evolution report: validation accuracy with markers, the change log and the final library', async () => {
    const opened = await open('evolve.html')
    const { page } = opened
    await expectCleanLoad(opened)
    expect(await page.locator('h1').textContent()).toBe('Judge library evolution')
    const rows = page.locator('#changes tbody tr')
    expect(await rows.count()).toBe(4)
    expect(await rows.first().innerText()).toMatch(/^0\s+baseline/)
    expect(await page.locator('#changes .badge.kept').count()).toBeGreaterThanOrEqual(1)
    expect(await page.locator('#library .card h3').first().textContent()).toMatch(/^[a-z0-9-]+ skill$/)

    const [chart] = await renderedCharts(page)
    expect(chart).toMatchObject({ kind: 'line', title: 'Validation accuracy per iteration', noData: false })
    expect(chart!.width).toBeGreaterThan(300)
    // Train, validation and best-so-far lines over 4 iterations (a path + 4 markers each), plus the kept markers.
    expect(chart!.marks).toBeGreaterThanOrEqual(3 * 5 + 1)
    const kept = await page
      .locator('svg[data-chart] g[data-series="kept change"] circle')
      .evaluateAll((circles) => circles.map((circle) => circle.getBoundingClientRect().width))
    expect(kept.length).toBeGreaterThanOrEqual(1)
    for (const width of kept) expect(width).toBeGreaterThan(4)
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'report-evolve.png'), fullPage: true })
  })

  it('bench report of two LLMBar subsets: accuracy with intervals, whiskered bars, scores, failures', async () => {
    const opened = await open('bench.html')
    const { page } = opened
    await expectCleanLoad(opened)
    expect(await page.locator('h1').textContent()).toBe('Benchmark: mock on 2 subsets')
    const table = page.locator('#accuracy table')
    expect(await table.locator('thead').innerText()).toMatch(
      /subset\s+items\s+pairwise A\/B\s+pairwise B\/A\s+swap-consistent\s+failed items/,
    )
    for (const subset of ['natural', 'adversarial-neighbor'])
      expect(await table.locator('tbody tr', { hasText: subset }).innerText()).toMatch(
        /\d+\.\d%\s+95% CI \d+\.\d%–\d+\.\d%\s+bootstrap/,
      )
    expect(await page.locator('#failures').textContent()).toContain('No scorer failures')

    const charts = await renderedCharts(page)
    expect(charts.map((chart) => chart.kind)).toEqual(['bar', 'histogram'])
    expect(charts[0]).toMatchObject({
      title: 'Swap-consistent accuracy by subset',
      marks: 2,
      whiskers: 2,
      noData: false,
    })
    expect(charts[1]!.marks).toBeGreaterThan(3)
    for (const chart of charts) expect(chart.width * chart.height).toBeGreaterThan(300 * 100)
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'report-bench.png'), fullPage: true })
  })
})
