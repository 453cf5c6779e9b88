/**
 * `npm run judge:local`: a real (small) judge and a real embedder on loopback, from registries this project reaches
 * (PyPI only: no model hub, no compiler). On first use it makes a virtual environment under {@link judgeHome} with
 * llama.cpp's own server from the prebuilt `xllamacpp` wheel (install.ts), makes the model files from their wheels
 * (models.ts, prepare.py) and checks their SHA-256. Then it serves the judge on 127.0.0.1:$JUDGE_PORT (8090 unless
 * set) and all-MiniLM-L6-v2 on $EMBEDDER_PORT (the judge's port + 1), and prints two lines:
 * `local judge: <url> model <id>` and `local embedder: <url> model <id>`. The server's log goes to
 * `<home>/server-<port>.log`. Ctrl-C stops it. A judge of the same model already serving there is reused.
 *
 * `--model <id>` picks another judge (models.ts: `qwen2.5-coder-1.5b`); `--install-only` installs and exits; any
 * other `--name value` sets that field of the judge's llama.cpp parameters (serve.py: `-- --n_parallel 4`).
 * REWARD_HARNESS_JUDGE_THREADS sets the threads it computes on (default: the machine's cores).
 * docs/local-judge.md says what the server does with judge requests.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { openSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { availableParallelism, homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ensureInstalled, ensureModel } from './install.ts'
import { EMBEDDER_MODEL, type JudgeModel, judgeModel } from './models.ts'

const SERVE = fileURLToPath(new URL('./serve.py', import.meta.url))

/**
 * Where the judge's venv, models and logs live: REWARD_HARNESS_JUDGE_HOME, else `reward-harness/judge` in the user's
 * cache directory (XDG_CACHE_HOME, else ~/.cache), so every clone on a machine, CI's fresh ones included, shares one
 * install.
 * @example judgeHome({ HOME: '/home/me' }) // '/home/me/.cache/reward-harness/judge'
 * @internal
 */
export function judgeHome(env: Record<string, string | undefined> = process.env): string {
  if (env.REWARD_HARNESS_JUDGE_HOME) return resolve(env.REWARD_HARNESS_JUDGE_HOME)
  return resolve(env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache'), 'reward-harness', 'judge')
}

/** A local judge that answers: its OpenAI base URL and model id, the embedder's, and how to stop what was started. */
export interface LocalJudge {
  url: string
  model: string
  embedder: { url: string; model: string; dimensions: number }
  /** True when a judge:local already serving these ports was found and is used as it is. */
  reused: boolean
  /** Stops the server this call started; a reused one is left running. */
  stop: (signal?: NodeJS.Signals) => void
  /** Resolves when the server this call started exits (never, for a reused one). */
  exited: Promise<number | null>
}

/** Options of {@link startLocalJudge}. */
export interface LocalJudgeOptions {
  port: number
  /** The embedder's own port (a caller that picks `port` free picks this one free too). */
  embedderPort: number
  /** A judge model id of models.ts; the first one unless set. */
  model?: string
  home?: string
  /** `--name value` pairs: fields of the judge's llama.cpp parameters, set after ours. */
  extraArgs?: string[]
}

/**
 * Starts the judge and the embedder on 127.0.0.1 (installing what is missing) and resolves once both answer
 * `/v1/models`; a port that already serves the model asked for is reused, one that answers with another model is an
 * error naming it. The server's output goes to `<home>/server-<port>.log` (one per port: a test's judge and yours do
 * not share one).
 * @example const judge = await startLocalJudge(localJudgePorts()); console.log(judge.url); judge.stop()
 */
export async function startLocalJudge(options: LocalJudgeOptions): Promise<LocalJudge> {
  const home = options.home ?? judgeHome()
  const model = judgeModel(options.model)
  const { embedderPort } = options
  const url = `http://127.0.0.1:${options.port}/v1`
  const embedderUrl = `http://127.0.0.1:${embedderPort}/v1`
  const described = {
    url,
    model: model.id,
    embedder: { url: embedderUrl, model: EMBEDDER_MODEL.id, dimensions: EMBEDDER_MODEL.dimensions },
  }
  const wanted = [
    { url, id: model.id, variable: 'JUDGE_PORT', port: options.port },
    { url: embedderUrl, id: EMBEDDER_MODEL.id, variable: 'EMBEDDER_PORT', port: embedderPort },
  ]
  const serving = await Promise.all(wanted.map(async (want) => ({ ...want, ids: await servedIds(want.url) })))
  for (const { ids, id, url: where, variable, port } of serving)
    if (ids !== undefined && !ids.includes(id))
      throw new Error(
        `${where} serves ${ids.join(', ') || 'something else'}, not ${id}. Serve elsewhere: ${variable}=${port + 2}`,
      )
  const missing = serving.filter((entry) => entry.ids === undefined)
  if (missing.length === 0) return { ...described, reused: true, stop: () => {}, exited: new Promise(() => {}) }

  const python = await ensureInstalled(home)
  const threads = Number(process.env.REWARD_HARNESS_JUDGE_THREADS || availableParallelism())
  const entries = []
  if (missing.some((entry) => entry.id === model.id))
    entries.push(await judgeEntry(home, python, model, options.port, threads, options.extraArgs ?? []))
  if (missing.some((entry) => entry.id === EMBEDDER_MODEL.id)) {
    const gguf = await ensureModel(home, python, EMBEDDER_MODEL)
    // One thread: a text is ~15 ms of work, and the judge keeps the machine's cores.
    entries.push({ model: gguf, alias: EMBEDDER_MODEL.id, port: embedderPort, threads: 1, embedding: true })
    Object.assign(entries.at(-1)!, { n_ctx: EMBEDDER_MODEL.contextLength, n_parallel: 1, cache_ram_mib: 0 })
  }
  const server = spawnServer(python, home, entries)
  await waitUntilServing(server, missing)
  return {
    ...described,
    reused: false,
    stop: (signal = 'SIGINT') => server.process.kill(signal),
    exited: server.exited,
  }
}

/** serve.py's entry for the judge: every slot gets the model's whole window; `extraArgs` are set last. */
async function judgeEntry(
  home: string,
  python: string,
  model: JudgeModel,
  port: number,
  threads: number,
  extraArgs: readonly string[],
) {
  const gguf = await ensureModel(home, python, model)
  return {
    model: gguf,
    alias: model.id,
    port,
    threads,
    n_ctx: model.contextLength * model.parallel,
    n_parallel: model.parallel,
    set: parameterArgs(extraArgs),
  }
}

/**
 * `--name value` (or `--name=value`) pairs as a record of llama.cpp parameter fields.
 * @example parameterArgs(['--n_parallel', '4', '--cpuparams.n_threads=1'])
 *   // { n_parallel: '4', 'cpuparams.n_threads': '1' }
 * @internal
 */
export function parameterArgs(args: readonly string[]): Record<string, string> {
  const set: Record<string, string> = {}
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!
    if (!arg.startsWith('--')) throw new Error(`judge:local: "${arg}" is not a --name value pair`)
    const [name, inline] = arg.slice(2).split(/=(.*)/s, 2)
    const value = inline ?? args[++index]
    if (value === undefined) throw new Error(`judge:local: --${name} has no value`)
    set[name!] = value
  }
  return set
}

/** serve.py on `entries`, its output in `<home>/server-<port of the first>.log`. */
function spawnServer(python: string, home: string, entries: { port: number }[]) {
  const logPath = join(home, `server-${entries[0]!.port}.log`)
  pruneServerLogs(home, SERVER_LOGS_KEPT - 1)
  const logFd = openSync(logPath, 'w')
  // OpenMP threads that spin while they wait for a core take it from the other thread of the same matrix product:
  // with anything else running on two cores (the Worker it judges for), PASSIVE answered 2–3× sooner.
  const child = spawn(python, [SERVE, JSON.stringify(entries)], {
    stdio: ['ignore', logFd, logFd],
    env: { OMP_WAIT_POLICY: 'PASSIVE', ...process.env, PYTHONUNBUFFERED: '1' },
  })
  const exited = new Promise<number | null>((done) => child.on('exit', done))
  return { process: child, exited, logPath }
}

async function waitUntilServing(
  server: { process: ChildProcess; exited: Promise<number | null>; logPath: string },
  wanted: readonly { url: string; id: string }[],
): Promise<void> {
  const { logPath } = server
  const deadline = Date.now() + 180_000
  for (const { url, id } of wanted) {
    while (!(await servedIds(url))?.includes(id)) {
      const code = await Promise.race([server.exited, new Promise((done) => setTimeout(done, 250, 'waiting'))])
      if (code !== 'waiting' || Date.now() > deadline) {
        server.process.kill('SIGKILL')
        const tail = readFileSync(logPath, 'utf8').trimEnd().split('\n').slice(-20).join('\n')
        throw new Error(`${tail}\nthe local judge did not answer on ${url}/models (log: ${logPath})`)
      }
    }
  }
}

/** The model ids a server lists at `<url>/models`; undefined when nothing answers there (or not yet, 503). */
async function servedIds(url: string): Promise<string[] | undefined> {
  try {
    const response = await fetch(`${url}/models`, { signal: AbortSignal.timeout(2_000) })
    if (!response.ok) return undefined
    const body = (await response.json()) as { data?: { id?: unknown }[] }
    return (body.data ?? []).map((entry) => String(entry.id))
  } catch {
    return undefined
  }
}

/** How many `server-<port>.log` files the judge home keeps: each start on a new port writes one. */
const SERVER_LOGS_KEPT = 8

/**
 * Deletes all but the `keep` newest server logs of a judge home, so that starts on ever new ports (each test file
 * takes a free one) do not fill it.
 * @example pruneServerLogs(judgeHome(), 7)
 * @internal
 */
export function pruneServerLogs(home: string, keep: number): void {
  const logs = readdirSync(home)
    .filter((name) => /^server-\d+\.log$/.test(name))
    .map((name) => ({ path: join(home, name), at: statSync(join(home, name)).mtimeMs }))
    .sort((a, b) => b.at - a.at)
  for (const { path } of logs.slice(keep)) rmSync(path, { force: true })
}

/**
 * Takes `--model <id>` and `--install-only` out of judge:local's arguments; the rest are llama.cpp parameters.
 * @example cliArgs(['--model', 'qwen2.5-coder-1.5b', '--n_parallel', '4']) // { model: 'qwen2.5-coder-1.5b', … }
 * @internal
 */
export function cliArgs(args: readonly string[]): { model?: string; installOnly: boolean; rest: string[] } {
  const rest: string[] = []
  let model: string | undefined
  let installOnly = false
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!
    if (arg === '--install-only') installOnly = true
    else if (arg === '--model') model = args[++index]
    else if (arg.startsWith('--model=')) model = arg.slice('--model='.length)
    else rest.push(arg)
  }
  return { ...(model === undefined ? {} : { model }), installOnly, rest }
}

/**
 * The lines judge:local prints once the judge answers: the judge's first, the embedder's second.
 * @example judgeLines(judge) // ['local judge: http://127.0.0.1:8090/v1 model smollm2-135m', 'local embedder: …']
 */
export function judgeLines(judge: LocalJudge): string[] {
  return [
    `local judge: ${judge.url} model ${judge.model}`,
    `local embedder: ${judge.embedder.url} model ${judge.embedder.model}`,
  ]
}

/**
 * The ports the commands serve on: `JUDGE_PORT` (8090) and `EMBEDDER_PORT` (the judge's + 1), as the docs say.
 * @example startLocalJudge({ ...localJudgePorts(), model: 'qwen2.5-coder-1.5b' })
 */
export function localJudgePorts(env: NodeJS.ProcessEnv = process.env): { port: number; embedderPort: number } {
  const port = Number(env.JUDGE_PORT || 8090)
  return { port, embedderPort: env.EMBEDDER_PORT ? Number(env.EMBEDDER_PORT) : port + 1 }
}

async function main(args: readonly string[]): Promise<void> {
  const { model, installOnly, rest } = cliArgs(args)
  if (installOnly) {
    const home = judgeHome()
    const python = await ensureInstalled(home)
    await ensureModel(home, python, judgeModel(model))
    await ensureModel(home, python, EMBEDDER_MODEL)
    console.log(`judge:local: installed in ${home}`)
    return
  }
  const judge = await startLocalJudge({
    ...localJudgePorts(),
    ...(model === undefined ? {} : { model }),
    extraArgs: rest,
  }).catch((error: Error) => {
    console.error(`judge:local: ${error.message}`)
    process.exit(1)
  })
  for (const line of judgeLines(judge)) console.log(line)
  if (judge.reused) {
    console.log('judge:local: already serving there (another judge:local); nothing started')
    return
  }
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => judge.stop(signal))
  process.exit((await judge.exited) ?? 0)
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main(process.argv.slice(2))
