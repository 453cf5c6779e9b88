/**
 * `npm run docs:check` (alias `npm run readme:check`): the docs as a newcomer meets them. First, without a server:
 * every relative link and `#anchor` of README.md and docs/*.md resolves, and docs/configuration.md is what the schemas
 * give now. Then it starts `npm start` on the embedded defaults, checks it says at most {@link MAX_START_LINES}
 * lines before "Serving on", and runs every shell block of README.md and docs/*.md in one shell (variables carry over,
 * as in a terminal): the files in {@link DOC_ORDER} first, in that order, then any other doc alphabetically; top to
 * bottom within a file. A block preceded by `<!-- docs-check: skip (why) -->` is left out (the two commands themselves,
 * trainer recipes that need a GPU, commands that need a Cloudflare account). Stops at the first failing block and
 * names it by file and line. Run it in a fresh clone (it creates runs, targets and files as the docs say).
 * `--links` runs the static checks alone.
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { renderConfigDocs } from './config-docs.ts'
import { portIsFree } from './start.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SKIP = /<!--\s*(docs|readme)-check:\s*skip\b/
/** The order the docs' blocks run in: each file may use what an earlier one made (a deployed target, a search). */
export const DOC_ORDER = [
  'README.md',
  'docs/api.md',
  'docs/offline-cli.md',
  'docs/artifacts.md',
  'docs/lineage.md',
  'docs/trainers.md',
]
const MAX_START_LINES = 10

/** A shell block of a Markdown file and the line its fence opens on. */
export interface DocBlock {
  file: string
  line: number
  script: string
  skipped: boolean
}

/**
 * The ```sh blocks of a Markdown text, each marked skipped when the line before its fence says so.
 * @example docBlocks('README.md', readFileSync('README.md', 'utf8')).filter((block) => !block.skipped).length // 5
 */
export function docBlocks(file: string, markdown: string): DocBlock[] {
  const lines = markdown.split('\n')
  const blocks: DocBlock[] = []
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(sh|bash)\s*$/.test(lines[i]!)) continue
    const end = lines.findIndex((text, j) => j > i && text.startsWith('```'))
    if (end === -1) throw new Error(`${file}:${i + 1}: a shell block that never closes`)
    const script = lines.slice(i + 1, end).join('\n')
    blocks.push({ file, line: i + 1, script, skipped: SKIP.test(lines[i - 1] ?? '') })
    i = end
  }
  return blocks
}

/**
 * README.md and every docs/*.md, relative to `root`, in the order their blocks run.
 * @example docFiles('/repo') // ['README.md', 'docs/api.md', …]
 */
export function docFiles(root: string): string[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`)
  const rest = docs.filter((file) => !DOC_ORDER.includes(file)).sort()
  return [...DOC_ORDER.filter((file) => existsSync(join(root, file))), ...rest]
}

/**
 * One bash script running the blocks in order in one shell, printing a marker before each so a failure names it.
 * @example spawnSync('bash', ['-c', blocksScript(blocks)])
 */
export function blocksScript(blocks: readonly DocBlock[]): string {
  return [
    'set -euo pipefail',
    ...blocks
      .filter((block) => !block.skipped)
      .map((block) => `echo "::docs-check: block at ${block.file}:${block.line}" >&2\n${block.script}`),
  ].join('\n')
}

/**
 * The anchors GitHub gives a Markdown file's headings: lower case, punctuation dropped, spaces as `-`, repeats
 * numbered (`-1`, `-2`).
 * @example headingAnchors('## How a score is computed\n') // Set { 'how-a-score-is-computed' }
 */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  let fenced = false
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced
    const heading = !fenced && line.match(/^#{1,6}\s+(.*?)\s*#*\s*$/)?.[1]
    if (!heading) continue
    const slug = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-')
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    anchors.add(count === 0 ? slug : `${slug}-${count}`)
  }
  return anchors
}

/**
 * The relative links of Markdown files (outside code) that lead nowhere: a missing file, or an anchor its target has
 * no heading for. Each as `file:line: link (why)`.
 * @example deadLinks('/repo', ['README.md']) // ['README.md:12: docs/nope.md (no such file)']
 */
export function deadLinks(root: string, files: readonly string[]): string[] {
  const problems: string[] = []
  for (const file of files) {
    let fenced = false
    readFileSync(join(root, file), 'utf8')
      .split('\n')
      .forEach((line, index) => {
        if (line.startsWith('```')) fenced = !fenced
        if (fenced) return
        for (const [, target] of line.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)\)/g)) {
          const why = linkProblem(root, file, target!)
          if (why) problems.push(`${file}:${index + 1}: ${target} (${why})`)
        }
      })
  }
  return problems
}

function linkProblem(root: string, file: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined
  const [path, anchor] = target.split('#', 2) as [string, string | undefined]
  const resolved = path ? resolve(root, dirname(file), path) : join(root, file)
  if (!resolved.startsWith(root)) return 'outside the repository'
  if (!existsSync(resolved)) return 'no such file'
  if (anchor === undefined || statSync(resolved).isDirectory() || !resolved.endsWith('.md')) return undefined
  if (!headingAnchors(readFileSync(resolved, 'utf8')).has(anchor))
    return `no heading #${anchor} in ${relative(root, resolved)}`
  return undefined
}

/** The checks that need no server; the problems found, each a line. */
function staticProblems(files: readonly string[]): string[] {
  const problems = deadLinks(ROOT, files)
  if (readFileSync(join(ROOT, 'docs/configuration.md'), 'utf8') !== renderConfigDocs())
    problems.push('docs/configuration.md is not what the schemas give now: run npm run docs:config and commit it')
  return problems
}

/** Starts `npm start` and resolves once it serves, with its output so far; rejects with that output otherwise. */
async function startServer(port: string): Promise<{ log: () => string; stop: () => void }> {
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
  const deadline = Date.now() + 120_000
  while (!serverLog.includes('Serving on')) {
    if (Date.now() > deadline || server.exitCode !== null) {
      stop()
      throw new Error(`npm start did not serve on port ${port}:\n${serverLog.slice(-4_000)}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  return { log: () => serverLog, stop }
}

async function main(): Promise<number> {
  const files = docFiles(ROOT)
  const problems = staticProblems(files)
  for (const problem of problems) console.error(`docs-check: ${problem}`)
  if (problems.length > 0) return 1
  console.error(`docs-check: the links of ${files.length} files resolve and docs/configuration.md is current`)
  if (process.argv.includes('--links')) return 0

  const blocks = files.flatMap((file) => docBlocks(file, readFileSync(join(ROOT, file), 'utf8')))
  const port = process.env.PORT ?? '8787'
  // The blocks talk to 127.0.0.1:8787 as a newcomer would: another server there would answer in our place.
  if (!(await portIsFree(port))) {
    console.error(`docs-check: port ${port} is taken; stop what listens there first`)
    return 1
  }
  let server: Awaited<ReturnType<typeof startServer>>
  try {
    server = await startServer(port)
  } catch (error) {
    console.error(`docs-check: ${(error as Error).message}`)
    return 1
  }
  try {
    const before = server.log().slice(0, server.log().indexOf('Serving on')).trimEnd().split('\n')
    if (before.length > MAX_START_LINES) {
      console.error(
        `docs-check: npm start said ${before.length} lines before "Serving on" (${MAX_START_LINES} at most):`,
      )
      console.error(before.join('\n'))
      return 1
    }
    const run = spawnSync('bash', ['-c', blocksScript(blocks)], {
      cwd: ROOT,
      stdio: 'inherit',
      env: { ...process.env, NO_COLOR: '1' },
    })
    const ran = blocks.filter((block) => !block.skipped).length
    if (run.status !== 0) {
      console.error(`docs-check: a block failed (exit ${run.status}); the last "::docs-check" line above names it`)
      return 1
    }
    console.error(`docs-check: ${ran} blocks of ${files.length} files ran in order, ${blocks.length - ran} marked skip`)
    return 0
  } finally {
    server.stop()
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) process.exit(await main())
