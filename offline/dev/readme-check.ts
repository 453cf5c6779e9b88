/**
 * `npm run readme:check`: runs every shell block of README.md, top to bottom, as a newcomer would paste them into one
 * terminal, against `npm start` on the embedded defaults. A block preceded by `<!-- readme-check: skip (why) -->` is
 * left out (the two commands themselves, trainer recipes that need a GPU). Stops at the first failing block and names
 * it by its README line. Run it in a fresh clone (it creates runs, targets and files as the README says).
 */
import { spawn, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { portIsFree } from './start.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SKIP = /<!--\s*readme-check:\s*skip\b/

/** A shell block of the README and the line its fence opens on. */
export interface ReadmeBlock {
  line: number
  script: string
  skipped: boolean
}

/**
 * The ```sh blocks of a Markdown text, each marked skipped when the line before its fence says so.
 * @example readmeBlocks(readFileSync('README.md', 'utf8')).filter((block) => !block.skipped).length // 9
 */
export function readmeBlocks(markdown: string): ReadmeBlock[] {
  const lines = markdown.split('\n')
  const blocks: ReadmeBlock[] = []
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(sh|bash)\s*$/.test(lines[i]!)) continue
    const end = lines.findIndex((text, j) => j > i && text.startsWith('```'))
    if (end === -1) throw new Error(`README.md:${i + 1}: a shell block that never closes`)
    blocks.push({ line: i + 1, script: lines.slice(i + 1, end).join('\n'), skipped: SKIP.test(lines[i - 1] ?? '') })
    i = end
  }
  return blocks
}

/**
 * One bash script running the blocks in order in one shell (variables carry over, as in a terminal), printing a
 * marker before each so a failure names its block.
 * @example spawnSync('bash', ['-c', blocksScript(blocks)])
 */
export function blocksScript(blocks: readonly ReadmeBlock[]): string {
  return [
    'set -euo pipefail',
    ...blocks
      .filter((block) => !block.skipped)
      .map((block) => `echo "::readme-check: block at README.md:${block.line}" >&2\n${block.script}`),
  ].join('\n')
}

async function main(): Promise<number> {
  const blocks = readmeBlocks(readFileSync(`${ROOT}README.md`, 'utf8'))
  const port = process.env.PORT ?? '8787'
  // The blocks talk to 127.0.0.1:8787 as a newcomer would: another server there would answer in our place.
  if (!(await portIsFree(port))) {
    console.error(`readme-check: port ${port} is taken; stop what listens there first`)
    return 1
  }
  const server = spawn('npm', ['start'], {
    cwd: ROOT,
    env: { ...process.env, PORT: port },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  let serverLog = ''
  server.stdout.on('data', (chunk: Buffer) => void (serverLog += chunk.toString()))
  server.stderr.on('data', (chunk: Buffer) => void (serverLog += chunk.toString()))
  const stop = () => {
    try {
      process.kill(-server.pid!, 'SIGTERM')
    } catch {
      // Already gone.
    }
  }
  try {
    const deadline = Date.now() + 120_000
    while (
      !(await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (response) => response.ok,
        () => false,
      ))
    ) {
      if (Date.now() > deadline || server.exitCode !== null) {
        console.error(`readme-check: npm start did not serve on port ${port}:\n${serverLog.slice(-4_000)}`)
        return 1
      }
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
    const run = spawnSync('bash', ['-c', blocksScript(blocks)], {
      cwd: ROOT,
      stdio: 'inherit',
      env: { ...process.env, NO_COLOR: '1' },
    })
    const ran = blocks.filter((block) => !block.skipped).length
    if (run.status !== 0) {
      console.error(
        `readme-check: a README block failed (exit ${run.status}); the last "::readme-check" line above names it`,
      )
      return 1
    }
    console.error(`readme-check: ${ran} README blocks ran in order and succeeded (${blocks.length - ran} marked skip)`)
    return 0
  } finally {
    stop()
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) process.exit(await main())
