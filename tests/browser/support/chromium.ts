import { existsSync, mkdirSync } from 'node:fs'
import path from 'node:path'
import { chromium, errors, type Browser, type Page, type Response } from 'playwright-core'

/** Debian's package `chromium` installs the browser here; we never download one of our own. */
const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

/** Where tests save screenshots: tests/browser/screenshots/ (git-ignored). */
export const SCREENSHOT_DIR: string = path.join(import.meta.dirname, '..', 'screenshots')

/**
 * Flags for a closed network: without the background-networking ones Chromium keeps dialling Google's hosts,
 * and as root it needs --no-sandbox.
 */
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/**
 * Launches Debian's /usr/bin/chromium headless through playwright-core with a fresh user-data dir
 * (playwright's `launch` makes a new temporary profile per browser and deletes it on close). Fails with a clear message
 * naming `apt-get install chromium` when the binary is missing.
 * @example const browser = await launchChromium(); const page = await browser.newPage(); await browser.close()
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium is not installed at ${CHROMIUM_PATH}. Install Debian's package: ` +
        '`apt-get update && apt-get install -y --no-install-recommends chromium` (or set CHROMIUM_PATH).',
    )
  }
  mkdirSync(SCREENSHOT_DIR, { recursive: true })
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: FLAGS })
}

/**
 * `page.goto` as a person at a browser does it: a page that has not loaded within playwright's 30 s is asked for once
 * more (wrangler dev's proxy has held a read unanswered on a loaded machine), with a warning on stderr.
 * @example const response = await visit(page, `${dev.baseUrl}/`)
 */
export async function visit(page: Page, url: string): Promise<Response | null> {
  try {
    return await page.goto(url)
  } catch (error) {
    if (!(error instanceof errors.TimeoutError)) throw error
    console.warn(`GET ${url}: the page had not loaded within playwright's timeout; loaded once more`)
    return page.goto(url)
  }
}
