/**
 * The search's own CPU per LLM call, and what `reward-harness search --help` costs, as a user runs them.
 *
 *   npx tsx bench/search-cpu.ts                        # this working tree
 *   npx tsx bench/search-cpu.ts --before 5cf592e       # and a git revision, side by side, in the same run
 *
 * Each tree's CLI (its `reward-harness` bin, or offline/cli/bin.js in an older revision; each tree's build is made
 * first, with offline/cli/build.ts or offline/cli/bundle.ts, whichever it has) runs, as a child process
 * under `/usr/bin/time`, (1) `search --help` and (2) a search of autosr's demo configuration (examples/demo.json,
 * defaults, a fresh reply cache) with the openai backend against bench/loopback-llm-stub.ts (`STUB_REPLY=search`: valid
 * answers for every role, zero latency, in its own process so its CPU is not counted), at `max_concurrency=8`. CPU is
 * user + system of the CLI process; the LLM calls are the requests the stub served. Per call: the search's CPU over its
 * calls, and the same less the `--help` run's CPU (the start-up both pay). Runs alternate between the trees
 * (`--rounds`, 3), the median is printed. Last, the floor: this tree's search runs once more against a stub that
 * records every request, and bench/llm-call-floor.mjs (plain Node, node:http, nothing else) sends the same requests,
 * at the same concurrency, under /usr/bin/time: the least CPU any Node program spends on those calls.
 */
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { buildCli, CLI_BUILD_DIR } from '../offline/cli/build.ts'
import { staleInputs } from '../offline/cli/build-record.ts'
import { median } from '../src/stats/index.ts'
import { ROOT, startLoopbackStub } from './harness.ts'
import { checkoutRevision } from './worktree.ts'

const TIME = '/usr/bin/time'

interface ProcessCost {
  cpuS: number
  maxRssMb: number
}

interface TreeRound {
  help: ProcessCost
  search: ProcessCost
  calls: number
}

/** Runs a tree's bin with `args` under /usr/bin/time from `root`; its CPU seconds and peak memory. */
function timed(root: string, args: string[], scratch: string): Promise<ProcessCost> {
  const bin = existsSync(join(root, 'reward-harness')) ? 'reward-harness' : 'offline/cli/bin.js'
  return timedNode(root, [join(root, bin), ...args], scratch)
}

/** Runs `node …args` under /usr/bin/time from `root`; its CPU seconds and peak memory. */
function timedNode(root: string, args: string[], scratch: string): Promise<ProcessCost> {
  const report = join(scratch, 'time.txt')
  const argv = ['-f', '%U %S %M', '-o', report, process.execPath, ...args]
  return new Promise((resolve, reject) => {
    const child = spawn(TIME, argv, { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] })
    let err = ''
    child.stderr.on('data', (chunk: Buffer) => void (err += chunk.toString('utf8')))
    child.once('error', reject)
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`node ${args.join(' ')} exited with ${code}: ${err.slice(-2000)}`))
      const [user, system, rssKb] = readFileSync(report, 'utf8').trim().split('\n').at(-1)!.split(' ').map(Number)
      resolve({ cpuS: user! + system!, maxRssMb: rssKb! / 1024 })
    })
  })
}

const CONCURRENCY = 8

/** The search the bench measures: autosr's demo configuration against the stub at `baseUrl`. */
const searchArgs = (root: string, baseUrl: string, scratch: string) => [
  'search',
  '--dataset',
  join(root, 'examples/demo.json'),
  '--backend',
  'openai',
  '--endpoint',
  `${baseUrl},max_concurrency=${CONCURRENCY}`,
  '--model',
  'stub-model',
  '--output',
  join(scratch, 'out/best.json'),
  '--json',
]

async function measureTree(root: string, stub: Awaited<ReturnType<typeof startLoopbackStub>>): Promise<TreeRound> {
  const scratch = mkdtempSync(join(tmpdir(), 'bench-search-cpu-'))
  try {
    const help = await timed(root, ['search', '--help'], scratch)
    const before = await stub.calls()
    const search = await timed(root, searchArgs(root, stub.baseUrl, scratch), scratch)
    return { help, search, calls: (await stub.calls()) - before }
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

/**
 * The floor: the requests this tree's search sends, recorded by the stub, sent again by bench/llm-call-floor.mjs;
 * its median CPU over `rounds` and the number of calls.
 */
async function measureFloor(rounds: number): Promise<{ cpuS: number; calls: number }> {
  const scratch = mkdtempSync(join(tmpdir(), 'bench-search-floor-'))
  const requests = join(scratch, 'requests.jsonl')
  writeFileSync(requests, '')
  const stub = await startLoopbackStub({ STUB_REPLY: 'search', STUB_RECORD: requests })
  try {
    await timed(ROOT, searchArgs(ROOT, stub.baseUrl, scratch), scratch)
    // The stub goes on recording what the floor sends: the floor replays a copy of the search's requests.
    const searchRequests = join(scratch, 'search-requests.jsonl')
    const recorded = readFileSync(requests, 'utf8')
    writeFileSync(searchRequests, recorded)
    const calls = recorded.split('\n').filter(Boolean).length
    const floor = join(ROOT, 'bench/llm-call-floor.mjs')
    const cpu: number[] = []
    for (let round = 0; round < rounds; round++) {
      cpu.push((await timedNode(ROOT, [floor, searchRequests, stub.baseUrl, String(CONCURRENCY)], scratch)).cpuS)
    }
    return { cpuS: median(cpu)!, calls }
  } finally {
    stub.stop()
    rmSync(scratch, { recursive: true, force: true })
  }
}

/**
 * Builds a checked-out revision's CLI (offline/cli/build.ts, or offline/cli/bundle.ts before it), so both trees run
 * as `npm ci` leaves them; a revision with neither runs its sources through tsx, as it did then.
 */
function buildRevisionBundle(root: string): void {
  const script = ['offline/cli/build.ts', 'offline/cli/bundle.ts'].find((path) => existsSync(join(root, path)))
  if (script) execFileSync(process.execPath, ['--import', 'tsx', script], { cwd: root, stdio: 'ignore' })
}

/** The medians of a tree's rounds, per call. */
function summarise(rounds: TreeRound[]) {
  const calls = median(rounds.map((round) => round.calls))!
  const helpCpu = median(rounds.map((round) => round.help.cpuS))!
  const searchCpu = median(rounds.map((round) => round.search.cpuS))!
  return {
    calls,
    helpCpu,
    helpRss: median(rounds.map((round) => round.help.maxRssMb))!,
    searchCpu,
    searchRss: median(rounds.map((round) => round.search.maxRssMb))!,
    perCallMs: median(rounds.map((round) => (round.search.cpuS / round.calls) * 1000))!,
    perCallLessStartMs: median(rounds.map((round) => ((round.search.cpuS - round.help.cpuS) / round.calls) * 1000))!,
  }
}

async function main() {
  const { values } = parseArgs({ options: { before: { type: 'string' }, rounds: { type: 'string', default: '3' } } })
  if (!existsSync(TIME)) throw new Error(`${TIME} is needed to measure a child process's CPU and memory`)
  if (staleInputs(ROOT, CLI_BUILD_DIR).length > 0) await buildCli()
  const trees: { label: string; root: string }[] = [{ label: 'this tree', root: ROOT }]
  const checkedOut = values.before ? checkoutRevision(values.before, 'bench-search-cpu-') : undefined
  if (checkedOut) {
    buildRevisionBundle(checkedOut.root)
    trees.unshift({ label: values.before!, root: checkedOut.root })
  }
  const stub = await startLoopbackStub({ STUB_REPLY: 'search' })
  const rounds = new Map(trees.map((tree) => [tree.label, [] as TreeRound[]]))
  try {
    for (let round = 0; round < Number(values.rounds); round++) {
      for (const tree of trees) rounds.get(tree.label)!.push(await measureTree(tree.root, stub))
    }
  } finally {
    stub.stop()
    checkedOut?.remove()
  }
  const floor = await measureFloor(Number(values.rounds))
  const git = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()
  console.log(
    `search CPU per LLM call and search --help (median of ${values.rounds} alternating rounds; this tree at ${git})`,
  )
  const table = [
    ['tree', 'help CPU s', 'help RSS MB', 'search CPU s', 'RSS MB', 'LLM calls', 'CPU/call ms', 'less start-up ms'],
  ]
  const summaries = trees.map((tree) => ({ label: tree.label, ...summarise(rounds.get(tree.label)!) }))
  for (const s of summaries) {
    table.push([
      s.label,
      s.helpCpu.toFixed(2),
      s.helpRss.toFixed(0),
      s.searchCpu.toFixed(2),
      s.searchRss.toFixed(0),
      String(s.calls),
      s.perCallMs.toFixed(2),
      s.perCallLessStartMs.toFixed(2),
    ])
  }
  table.push([
    'floor: bare node:http, same calls',
    '',
    '',
    floor.cpuS.toFixed(2),
    '',
    String(floor.calls),
    ((floor.cpuS / floor.calls) * 1000).toFixed(2),
    '',
  ])
  const widths = table[0]!.map((_, column) => Math.max(...table.map((line) => line[column]!.length)))
  for (const line of table) console.log(line.map((cell, column) => cell.padStart(widths[column]!)).join('  '))
  if (summaries.length === 2) {
    const [then, now] = summaries as [(typeof summaries)[0], (typeof summaries)[0]]
    const ratio = (after: number, before: number) => (after / before).toFixed(2)
    console.log(
      `\nafter ÷ before: help CPU ${ratio(now.helpCpu, then.helpCpu)}, help RSS ${ratio(now.helpRss, then.helpRss)}, ` +
        `CPU per call ${ratio(now.perCallMs, then.perCallMs)}, ` +
        `less start-up ${ratio(now.perCallLessStartMs, then.perCallLessStartMs)}, ` +
        `search RSS ${ratio(now.searchRss, then.searchRss)}`,
    )
  }
  const now = summaries.at(-1)!
  const aboveFloorMs = ((now.searchCpu - floor.cpuS) / now.calls) * 1000
  console.log(
    `this tree ÷ floor: CPU per call ${(now.perCallMs / ((floor.cpuS / floor.calls) * 1000)).toFixed(2)}; ` +
      `the search's own CPU above the floor: ${aboveFloorMs.toFixed(2)} ms per call`,
  )
}

await main()
