/**
 * The dashboard in a real browser: a real `wrangler dev` (local deployment, mock backend), a 3-step simulated training
 * loop run against it by the simulate code itself (8 rollouts a step on the default run), then Debian's headless
 * Chromium opens `GET /`, follows the run's link, and checks what a person would see: the run, at least two rubric
 * versions with a visible diff, charts that actually rendered (non-zero boxes, drawn marks), the memory search, and the
 * login form opening the admin's view. Screenshots land in tests/browser/screenshots/.
 */
import path from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runSimulation, type SimulationResult } from '../../offline/simulate/loop.ts'
import { startWranglerDev, type WranglerDev } from '../e2e/support/wrangler-dev.ts'
import { launchChromium, SCREENSHOT_DIR, visit } from './support/chromium.ts'

const STEPS = 3
const ROLLOUTS_PER_STEP = 8

let dev: WranglerDev
let browser: Browser
let simulation: SimulationResult
/** Errors the pages threw or logged; a page with no script should have none. */
const pageErrors: string[] = []

beforeAll(async () => {
  dev = await startWranglerDev()
  simulation = await runSimulation({
    baseUrl: dev.baseUrl,
    steps: STEPS,
    rolloutsPerStep: ROLLOUTS_PER_STEP,
    seed: 1,
    waitTimeoutS: 60,
  })
  browser = await launchChromium()
})

afterAll(async () => {
  await browser?.close()
  await dev?.stop()
})

async function newPage(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  const page = await context.newPage()
  page.on('pageerror', (error) => pageErrors.push(`pageerror: ${error.message}`))
  page.on('console', (message) => {
    // The wrong-token login answers 401 on purpose; any other console error (a CSP violation, a failed load) counts.
    if (message.type() === 'error' && !/status of 401/.test(message.text()))
      pageErrors.push(`console: ${message.text()}`)
  })
  return page
}

describe('the dashboard in headless Chromium after `npm run simulate` (3 steps)', () => {
  it('the simulation ran 3 steps and each update made a new rubric version', () => {
    expect(simulation.reports).toHaveLength(STEPS)
    for (const report of simulation.reports) expect(report.status).toBe('updated')
    expect(simulation.reports.at(-1)!.rubric_version).toBeGreaterThanOrEqual(3)
  })

  it('shows the run from GET /, its rubric versions with a visible diff, and rendered charts', async () => {
    const page = await newPage()
    const index = await visit(page, `${dev.baseUrl}/`)
    expect(index?.status()).toBe(200)
    expect(index?.headers()['content-type']).toMatch(/text\/html/)
    const runLink = page.locator('a[data-run="default"]')
    await expect.poll(() => runLink.isVisible()).toBe(true)
    expect(await page.locator('tr', { has: runLink }).innerText()).toMatch(
      new RegExp(`\\b${STEPS * ROLLOUTS_PER_STEP}\\b`),
    )
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'dashboard-index.png'), fullPage: true })

    await Promise.all([page.waitForURL(/\/dashboard\/runs\/default$/), runLink.click()])
    expect(await page.locator('h1').textContent()).toBe('Run default')

    // Timeline: one row per step, each updated.
    const rows = page.locator('#timeline tbody tr')
    expect(await rows.count()).toBe(STEPS)
    for (const text of await rows.allInnerTexts()) expect(text).toContain('updated')

    // Rubric versions: at least two, the newest with its diff against the one before shown without a click.
    const versions = page.locator('article[data-version]')
    expect(await versions.count()).toBeGreaterThanOrEqual(2)
    const newest = versions.first()
    const diff = newest.locator('ul.diff-list')
    expect(await diff.isVisible()).toBe(true)
    const changes = diff.locator('li.added, li.removed, li.changed')
    expect(await changes.count()).toBeGreaterThanOrEqual(1)
    expect(await changes.first().isVisible()).toBe(true)
    expect(await newest.locator('.rationale').textContent()).toMatch(/Updater's rationale: \S+/)

    // Charts: the line chart and the per-step histograms have real size and drawn marks.
    const line = page.locator('svg[data-chart="line"]').first()
    const lineBox = await line.boundingBox()
    expect(lineBox!.width).toBeGreaterThan(200)
    expect(lineBox!.height).toBeGreaterThan(100)
    expect(
      await line.locator('g[data-series] polyline, g[data-series] path, g[data-series] circle').count(),
    ).toBeGreaterThan(0)
    const histograms = page.locator('svg[data-chart="histogram"]')
    expect(await histograms.count()).toBe(STEPS)
    const bars = histograms.first().locator('rect[fill-opacity]')
    expect(await bars.count()).toBeGreaterThan(0)
    const barBox = await bars.first().boundingBox()
    expect(barBox!.height).toBeGreaterThan(0)

    // Criterion health: a row per criterion graded in the newest closed step, and a drawn chart for each.
    const healthRows = page.locator('#health tbody tr[data-criterion]')
    expect(await healthRows.count()).toBeGreaterThanOrEqual(2)
    for (const text of await healthRows.allInnerTexts()) expect(text).toMatch(/\b(anchor|adaptive|retired)\b/)
    const healthCharts = page.locator('#health svg[data-chart="line"]')
    expect(await healthCharts.count()).toBe(await healthRows.count())
    expect((await healthCharts.first().boundingBox())!.width).toBeGreaterThan(200)
    expect(await healthCharts.first().locator('g[data-series] path, g[data-series] circle').count()).toBeGreaterThan(0)
    expect(await page.locator('#timeline thead').textContent()).toContain('Low spread')

    // Reward hacking: the simulation's hacking rollouts are flagged, with evidence.
    expect(await page.locator('#hacking .flag').count()).toBeGreaterThan(0)
    expect(await page.locator('#hacking .flag .evidence li').count()).toBeGreaterThan(0)

    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'dashboard-run.png'), fullPage: true })
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'dashboard-run-top.png') })
    for (const section of ['scores', 'timeline', 'health', 'rubrics', 'hacking']) {
      await page.locator(`#${section}`).screenshot({ path: path.join(SCREENSHOT_DIR, `dashboard-${section}.png`) })
    }
    expect(pageErrors).toEqual([])
  })

  it('searches the memory by meaning from the form', async () => {
    const page = await newPage()
    await visit(page, `${dev.baseUrl}/dashboard/runs/default`)
    await page.fill('#memory input[name="q"]', 'the answer tells the grader to give it full marks')
    await page.selectOption('#memory select[name="kind"]', 'analysis')
    await Promise.all([page.waitForURL(/[?&]q=/), page.click('#memory button[type="submit"]')])
    const docs = page.locator('#memory .doc')
    expect(await docs.count()).toBeGreaterThan(0)
    expect(await docs.first().textContent()).toMatch(/similarity \d\.\d{3}/)
    expect(await page.locator('#memory .doc[data-memory]:not([data-memory="analysis"])').count()).toBe(0)
    await page.locator('#memory').screenshot({ path: path.join(SCREENSHOT_DIR, 'dashboard-memory.png') })
    expect(pageErrors).toEqual([])
  })

  it('logs in with the admin token through the form and opens the artifacts and deployments page', async () => {
    const page = await newPage()
    await visit(page, `${dev.baseUrl}/dashboard/login`)
    await page.fill('#token', 'not-a-token')
    await Promise.all([page.waitForLoadState(), page.click('button[type="submit"]')])
    expect(await page.locator('.alert').textContent()).toMatch(/neither the admin token nor a run token/)
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'dashboard-login.png') })

    await page.fill('#token', dev.adminToken)
    await Promise.all([page.waitForURL(`${dev.baseUrl}/`), page.click('button[type="submit"]')])
    expect(await page.locator('.who').textContent()).toContain('admin')
    const cookies = await page.context().cookies()
    const session = cookies.find((cookie) => cookie.name === 'rh_dashboard')
    expect(session?.httpOnly).toBe(true)
    expect(session?.sameSite).toBe('Strict')
    expect(session?.value).not.toContain(dev.adminToken)
    expect(await page.content()).not.toContain(dev.adminToken)

    await Promise.all([page.waitForURL(/\/dashboard\/targets$/), page.click('a[href="/dashboard/targets"]')])
    expect(await page.locator('h1').textContent()).toContain('Artifacts & deployments')
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'dashboard-targets.png') })
    await Promise.all([page.waitForURL(/\/dashboard\/login$/), page.click('form[action="/dashboard/logout"] button')])
    expect((await page.context().cookies()).some((cookie) => cookie.name === 'rh_dashboard')).toBe(false)
    expect(pageErrors).toEqual([])
  })
})
