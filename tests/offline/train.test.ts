/**
 * `reward-harness train prepare | run | finalize | show` in process, against a loopback edge stub (healthz, the
 * deployments list, POST /runs) and a local lineage SQLite file: prepare writes a 0600 env file a shell can source and
 * records the manifest; a refused handshake (wrong artifact, unhealthy target) exits 3 and leaves nothing behind; an
 * unknown target is 2, an unreachable edge 1; run passes the trainer's exit code through and finalize turns it into
 * succeeded / failed (stage training or preflight) with the metrics; bad metrics files are refused by name.
 */
import { execFile } from 'node:child_process'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { openLocalLineage } from '../../offline/lineage/local.ts'
import { formatEnvFile, parseEnvFile } from '../../offline/train/env-file.ts'
import { runCli } from '../support/cli.ts'

const ADMIN = 'admin-token-for-tests'
const RUN_TOKEN = 'rh_run_token_0123456789abcdef'
const ARTIFACT = `rm_${'a'.repeat(64)}`
const OLD_ARTIFACT = `rm_${'b'.repeat(64)}`
const NODE = process.execPath

/** A deploy record as the edge lists it. */
function record(
  deployId: string,
  target: string,
  artifactId: string,
  deployedAt: string,
  previous: string | null = null,
) {
  return {
    deploy_id: deployId,
    target,
    artifact_id: artifactId,
    previous_artifact_id: previous,
    deployed_by: 'ci',
    deployed_at: deployedAt,
    action: 'deploy',
    dataset_sha256: '0'.repeat(64),
    config_hash: '1'.repeat(64),
  }
}

/** Targets the stub knows: deployments newest first, and what healthz says. */
const TARGETS: Record<string, { deployments: ReturnType<typeof record>[]; status: string }> = {
  prod: {
    deployments: [
      record('dep_2', 'prod', ARTIFACT, '2026-03-02T00:00:00Z', OLD_ARTIFACT),
      record('dep_1', 'prod', OLD_ARTIFACT, '2026-03-01T00:00:00Z'),
    ],
    status: 'ok',
  },
  sick: { deployments: [record('dep_9', 'sick', ARTIFACT, '2026-03-02T00:00:00Z')], status: 'degraded' },
}

let server: Server
let edge = ''
/** Every request the stub answered, for "nothing was created" checks. */
const requests: { method: string; path: string; body: unknown }[] = []

function answer(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
}

async function handle(req: IncomingMessage, res: ServerResponse) {
  let text = ''
  for await (const chunk of req) text += chunk
  const path = new URL(req.url!, 'http://stub').pathname
  requests.push({ method: req.method!, path, body: text ? JSON.parse(text) : undefined })
  const admin = req.headers.authorization === `Bearer ${ADMIN}`
  const notFound = (what: string) => answer(res, 404, { error: { code: 'not_found', message: `no ${what}` } })
  let match = path.match(/^\/admin\/targets\/([^/]+)\/deployments$/)
  if (req.method === 'GET' && match) {
    if (!admin) return answer(res, 401, { error: { code: 'unauthorized', message: 'admin only' } })
    const target = TARGETS[match[1]!]
    if (!target) return notFound(`target ${match[1]}`)
    return answer(res, 200, {
      target: match[1],
      active_artifact_id: target.deployments[0]!.artifact_id,
      deployments: target.deployments,
    })
  }
  match = path.match(/^\/rm\/([^/]+)\/healthz$/)
  if (req.method === 'GET' && match) {
    const target = TARGETS[match[1]!]
    if (!target) return notFound(`target ${match[1]}`)
    const active = target.deployments[0]!
    return answer(res, 200, {
      status: target.status,
      artifact_id: active.artifact_id,
      source_session_id: 'sess-1',
      schema_version: '1.0',
      rm_api_version: '1.0',
      target: match[1],
      deploy_id: active.deploy_id,
    })
  }
  if (req.method === 'POST' && path === '/runs') {
    if (!admin) return answer(res, 401, { error: { code: 'unauthorized', message: 'admin only' } })
    const body = JSON.parse(text) as { run_id: string; config: unknown }
    return answer(res, 201, {
      run_id: body.run_id,
      token: RUN_TOKEN,
      config: body.config,
      base_path: `/runs/${body.run_id}`,
    })
  }
  return notFound(path)
}

const dir = mkdtempSync(join(tmpdir(), 'train-'))
let counter = 0
let db = ''
const savedEnv = { admin: process.env.REWARD_HARNESS_ADMIN_TOKEN, rm: process.env.RM_TOKEN }

beforeAll(async () => {
  server = createServer(
    (req, res) =>
      void handle(req, res).catch((error: unknown) =>
        answer(res, 500, { error: { code: 'stub', message: String(error) } }),
      ),
  )
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  edge = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve))
  rmSync(dir, { recursive: true, force: true })
})
beforeEach(() => {
  db = join(dir, `lineage-${++counter}.sqlite`)
  requests.length = 0
  process.env.REWARD_HARNESS_ADMIN_TOKEN = ADMIN
  delete process.env.RM_TOKEN
})
afterEach(() => {
  for (const [name, value] of [
    ['REWARD_HARNESS_ADMIN_TOKEN', savedEnv.admin],
    ['RM_TOKEN', savedEnv.rm],
  ] as const) {
    if (value === undefined) delete process.env[name]
    else process.env[name] = value
  }
})

function file(name: string, text: string): string {
  const path = join(dir, `${counter}-${name}`)
  writeFileSync(path, text)
  return path
}

const envPath = (name: string) => join(dir, `${counter}-${name}.env`)

/** `train prepare` on the stub with this test's lineage file. */
function prepare(name: string, ...extra: string[]) {
  return runCli(
    'train',
    'prepare',
    '--url',
    edge,
    '--target',
    'prod',
    '--name',
    name,
    '--env-path',
    envPath(name),
    '--db',
    db,
    ...extra,
  )
}

function manifestOf(runId: string) {
  const { backend, close } = openLocalLineage(db)
  return backend.chain(runId).finally(close)
}

describe('train prepare', () => {
  it('checks the target, creates the online run, records the manifest, puts the token in a 0600 env file', async () => {
    const config = file(
      'online.json',
      JSON.stringify({ config: { anchor_rubrics: [{ text: 'The final answer is correct.' }] } }),
    )
    const prepared = await prepare(
      'grpo-1',
      '--expect-artifact',
      ARTIFACT,
      '--online-run',
      config,
      '--trainer',
      'verl',
      '--model',
      'qwen-7b',
      '--dataset',
      'gsm8k@v3',
      '--json',
    )
    expect(prepared.code, prepared.err).toBe(0)
    expect(prepared.out + prepared.err).not.toContain(RUN_TOKEN)
    expect(JSON.parse(prepared.out)).toMatchObject({
      training_run_id: 'grpo-1',
      artifact_id: ARTIFACT,
      deploy_id: 'dep_2',
      target: 'prod',
      online_run: { run_id: 'grpo-1' },
      token_source: 'online_run',
      lineage: db,
    })
    expect(requests.find((request) => request.path === '/runs')?.body).toEqual({
      run_id: 'grpo-1',
      config: { anchor_rubrics: [{ text: 'The final answer is correct.' }] },
    })

    expect(statSync(envPath('grpo-1')).mode & 0o777).toBe(0o600)
    expect(parseEnvFile(readFileSync(envPath('grpo-1'), 'utf8'))).toEqual({
      REWARD_HARNESS_URL: edge,
      REWARD_HARNESS_TOKEN: RUN_TOKEN,
      REWARD_HARNESS_RUN_ID: 'grpo-1',
      REWARD_HARNESS_TARGET: 'prod',
      REWARD_HARNESS_ARTIFACT_ID: ARTIFACT,
      REWARD_HARNESS_DEPLOY_ID: 'dep_2',
      REWARD_HARNESS_TRAINING_RUN_ID: 'grpo-1',
      REWARD_HARNESS_LINEAGE_DB: db,
    })
    expect((await manifestOf('grpo-1'))?.manifest).toMatchObject({
      run_id: 'grpo-1',
      harness_run_id: 'grpo-1',
      artifact_id: ARTIFACT,
      deploy_id: 'dep_2',
      target: 'prod',
      trainer: { name: 'verl' },
      model: { name: 'qwen-7b' },
      dataset: { id: 'gsm8k', version: 'v3' },
      config: { edge_url: edge, online_run_id: 'grpo-1' },
    })
  })

  it('writes an env file a POSIX shell sources to the same values, quotes included', async () => {
    const values = { REWARD_HARNESS_URL: 'http://127.0.0.1:1', ODD: `it's "quoted" $HOME \`x\` \\ end` }
    const path = file('quoted.env', formatEnvFile(values))
    expect(parseEnvFile(readFileSync(path, 'utf8'))).toEqual(values)
    const { stdout } = await promisify(execFile)('sh', ['-c', `set -a; . "$1"; printf '%s' "$ODD"`, 'sh', path])
    expect(stdout).toBe(values.ODD)
  })

  it('without an online run, records defaults and takes the token from RM_TOKEN', async () => {
    process.env.RM_TOKEN = 'rm-secret-1'
    const prepared = await prepare('plain-1')
    expect(prepared.code, prepared.err).toBe(0)
    expect(prepared.out).toContain('prepared training run plain-1')
    expect(prepared.out).not.toContain('rm-secret-1')
    expect(requests.some((request) => request.path === '/runs')).toBe(false)
    const env = parseEnvFile(readFileSync(envPath('plain-1'), 'utf8'))
    expect(env.REWARD_HARNESS_TOKEN).toBe('rm-secret-1')
    expect(env.REWARD_HARNESS_RUN_ID).toBeUndefined()
    expect((await manifestOf('plain-1'))?.manifest).toMatchObject({
      trainer: { name: 'unspecified' },
      model: { name: 'unspecified' },
      dataset: { id: 'unspecified', version: 'unspecified' },
    })
    expect((await manifestOf('plain-1'))?.manifest.harness_run_id).toBeUndefined()
  })

  it('exits 3 for a target serving another artifact, before creating, writing or recording anything', async () => {
    const config = file('online.json', JSON.stringify({ anchor_rubrics: [{ text: 'x' }] }))
    const refused = await prepare('wrong-1', '--expect-artifact', OLD_ARTIFACT, '--online-run', config)
    expect(refused.code).toBe(3)
    expect(refused.err).toContain(`serves ${ARTIFACT}, not the expected ${OLD_ARTIFACT}`)
    expect(existsSync(envPath('wrong-1'))).toBe(false)
    expect(requests.some((request) => request.method === 'POST')).toBe(false)
    expect(await manifestOf('wrong-1')).toBeUndefined()
  })

  it('refuses an unhealthy target with exit 3', async () => {
    const refused = await runCli(
      'train',
      'prepare',
      '--url',
      edge,
      '--target',
      'sick',
      '--name',
      'sick-1',
      '--env-path',
      envPath('sick-1'),
      '--db',
      db,
    )
    expect(refused.code).toBe(3)
    expect(refused.err).toContain('status "degraded"')
    expect(existsSync(envPath('sick-1'))).toBe(false)
  })

  it('exits 2 for an unknown target, no admin token, a non-JSON config file, or a name already recorded', async () => {
    const unknown = await runCli(
      'train',
      'prepare',
      '--url',
      edge,
      '--target',
      'nope',
      '--name',
      'u-1',
      '--env-path',
      envPath('u-1'),
      '--db',
      db,
    )
    expect(unknown.code).toBe(2)
    expect(unknown.err).toContain('unknown target "nope"')

    const notJson = file('broken.json', '{"config": ')
    const broken = await prepare('b-1', '--online-run', notJson)
    expect(broken.code).toBe(2)
    expect(broken.err).toContain(notJson)
    expect(existsSync(envPath('b-1'))).toBe(false)

    expect((await prepare('twice-1')).code).toBe(0)
    const again = await prepare('twice-1')
    expect(again.code).toBe(2)
    expect(again.err).toContain('already recorded')

    delete process.env.REWARD_HARNESS_ADMIN_TOKEN
    const tokenless = await prepare('t-1')
    expect(tokenless.code).toBe(2)
    expect(tokenless.err).toContain('REWARD_HARNESS_ADMIN_TOKEN')
    expect(requests.filter((request) => request.method === 'POST')).toEqual([])
  })

  it('exits 2 for an --online-run file with a misspelt key: the key and the key it meant, no request', async () => {
    const rubrics = { anchor_rubrics: [{ text: 'The final answer is correct.' }] }
    const cases = [
      [
        { ...rubrics, rubric_mode: 'per_instance', rollout_per_step: 8 },
        '(root): unknown keys "rubric_mode" (did ' +
          'you mean rubrics_mode?), "rollout_per_step" (did you mean rollouts_per_step?)',
      ],
      [
        { config: { ...rubrics, agents: { scorer: { modle: 'judge' } } } },
        'config.agents.scorer: unknown key ' + '"modle" (did you mean model?)',
      ],
      [{ run_id: 'k-2', confg: rubrics }, '(root): unknown key "confg" (did you mean config?)'],
    ] as const
    for (const [index, [content, message]] of cases.entries()) {
      const config = file(`misspelt-${index}.json`, JSON.stringify(content))
      const refused = await prepare(`k-${index}`, '--online-run', config)
      expect(refused.code, message).toBe(2)
      expect(refused.err).toContain(`--online-run ${config}: `)
      expect(refused.err).toContain(message)
      expect(existsSync(envPath(`k-${index}`))).toBe(false)
    }
    expect(requests.filter((request) => request.method === 'POST')).toEqual([])
  })

  it('exits 1 when the edge cannot be reached', async () => {
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const port = (closed.address() as AddressInfo).port
    await new Promise((resolve) => closed.close(resolve))
    const unreachable = await runCli(
      'train',
      'prepare',
      '--url',
      `http://127.0.0.1:${port}`,
      '--target',
      'prod',
      '--name',
      'x-1',
      '--env-path',
      envPath('x-1'),
      '--db',
      db,
    )
    expect(unreachable.code).toBe(1)
    expect(unreachable.err).toContain('cannot reach the edge')
    expect(existsSync(envPath('x-1'))).toBe(false)
  })
})

describe('train run and finalize', () => {
  it('passes a failing exit code through and finalize records failed at stage training', async () => {
    expect((await prepare('fail-1')).code).toBe(0)
    const ran = await runCli('train', 'run', '--env-path', envPath('fail-1'), '--', NODE, '-e', 'process.exit(7)')
    expect(ran.code).toBe(7)
    expect(ran.err).toContain('exited with code 7')
    const finalized = await runCli('train', 'finalize', '--env-path', envPath('fail-1'), '--json')
    expect(finalized.code, finalized.err).toBe(0)
    expect(JSON.parse(finalized.out).result).toMatchObject({
      status: 'failed',
      failure: { stage: 'training', message: 'the trainer exited with code 7' },
      metrics: { exit_code: 7 },
    })
    expect((await manifestOf('fail-1'))?.result).toMatchObject({ status: 'failed', failure: { stage: 'training' } })
  })

  it('records a successful run with metrics; an identical finalize is a no-op, a different one exit 2', async () => {
    const config = file('online.json', JSON.stringify({ anchor_rubrics: [{ text: 'x' }] }))
    expect((await prepare('ok-1', '--online-run', config)).code).toBe(0)
    const metrics = join(dir, `${counter}-metrics.json`)
    // The trainer checks its environment (the token arrives as an argument here only to check it is masked in the state
    // file).
    const script =
      'const e = process.env; if (e.REWARD_HARNESS_TOKEN !== process.argv[2] || ' +
      `e.REWARD_HARNESS_URL !== '${edge}' || e.REWARD_HARNESS_TRAINING_RUN_ID !== 'ok-1') process.exit(9);\n` +
      "      require('fs').writeFileSync(process.argv[1], " +
      "JSON.stringify({ reward_mean: 0.1 + 0.55, eval: { accuracy: 0.8 }, steps: 2 })); console.log('trained ok-1')"
    const ran = await runCli(
      'train',
      'run',
      '--env-path',
      envPath('ok-1'),
      '--',
      NODE,
      '-e',
      script,
      metrics,
      RUN_TOKEN,
    )
    expect(ran.code, ran.err).toBe(0)
    expect(ran.out).toBe('trained ok-1\n')
    const state = JSON.parse(readFileSync(`${envPath('ok-1')}.state.json`, 'utf8'))
    expect(state.run).toMatchObject({ exit_code: 0, command: [NODE, '-e', script, metrics, '***'] })
    expect(JSON.stringify(state)).not.toContain(RUN_TOKEN)

    const finalized = await runCli('train', 'finalize', '--env-path', envPath('ok-1'), '--metrics', metrics)
    expect(finalized.code, finalized.err).toBe(0)
    expect(finalized.out).toContain('recorded: training run ok-1 succeeded')
    // A mean as floating point leaves it (0.6500000000000001) is printed to four decimals; the record keeps it whole.
    expect(finalized.out).toMatch(/^ {2}metrics {2}reward_mean=0\.6500 eval\.accuracy=0\.8000 steps=2 /m)
    const result = (await manifestOf('ok-1'))!.result!
    expect(result).toMatchObject({
      status: 'succeeded',
      metrics: { reward_mean: 0.1 + 0.55, 'eval.accuracy': 0.8, steps: 2, exit_code: 0 },
    })
    expect(result.metrics.duration_s).toBeGreaterThanOrEqual(0)
    expect(result.finished_at).toBe(state.run.ended_at)

    const again = await runCli('train', 'finalize', '--env-path', envPath('ok-1'), '--metrics', metrics)
    expect(again.code, again.err).toBe(0)
    expect(again.out).toContain('already recorded (identical)')
    const conflicting = await runCli(
      'train',
      'finalize',
      '--env-path',
      envPath('ok-1'),
      '--metrics',
      metrics,
      '--metric',
      'reward_mean=0.1',
    )
    expect(conflicting.code).toBe(2)
    expect(conflicting.err).toContain('different result')
  })

  it('records failed at stage preflight when the trainer never ran, and exit 127 for a missing command', async () => {
    expect((await prepare('never-1')).code).toBe(0)
    const finalized = await runCli('train', 'finalize', '--env-path', envPath('never-1'), '--json')
    expect(finalized.code, finalized.err).toBe(0)
    expect(JSON.parse(finalized.out).result).toMatchObject({
      status: 'failed',
      failure: { stage: 'preflight' },
      metrics: {},
    })
    const refused = await runCli('train', 'run', '--env-path', envPath('never-1'), '--', NODE, '-e', '0')
    expect(refused.code).toBe(2)
    expect(refused.err).toContain('already finalized')

    expect((await prepare('missing-1')).code).toBe(0)
    const missing = await runCli(
      'train',
      'run',
      '--env-path',
      envPath('missing-1'),
      '--',
      'reward-harness-no-such-trainer',
      '--flag',
    )
    expect(missing.code).toBe(127)
    expect(missing.err).toContain('cannot start "reward-harness-no-such-trainer": command not found')
    const after = await runCli('train', 'finalize', '--env-path', envPath('missing-1'), '--json')
    expect(JSON.parse(after.out).result).toMatchObject({
      status: 'failed',
      failure: { stage: 'training', message: expect.stringContaining('command not found') },
      metrics: { exit_code: 127 },
    })
  })

  it('refuses a metrics file that is not JSON or holds a non-number value, naming the file and the field', async () => {
    expect((await prepare('metrics-1')).code).toBe(0)
    expect((await runCli('train', 'run', '--env-path', envPath('metrics-1'), '--', NODE, '-e', '0')).code).toBe(0)
    const broken = file('broken-metrics.json', '{"reward_mean": 0.5,\n "steps": two}')
    const notJson = await runCli('train', 'finalize', '--env-path', envPath('metrics-1'), '--metrics', broken)
    expect(notJson.code).toBe(2)
    expect(notJson.err).toContain(`${broken}: line 2: not valid JSON`)
    expect(notJson.err).toMatch(/at column 11/)
    const text = file('text-metrics.json', JSON.stringify({ reward_mean: 0.5, eval: { note: 'good' } }))
    const notNumber = await runCli('train', 'finalize', '--env-path', envPath('metrics-1'), '--metrics', text)
    expect(notNumber.code).toBe(2)
    expect(notNumber.err).toContain('"eval.note" is not a finite number')
    const badFlag = await runCli('train', 'finalize', '--env-path', envPath('metrics-1'), '--metric', 'loss=low')
    expect(badFlag.code).toBe(2)
    expect(badFlag.err).toContain('"loss" is not a finite number')
    expect((await manifestOf('metrics-1'))?.result).toBeNull()
  })
})

describe('train show', () => {
  it('prints artifact → deployment → training run → result, by id, from the env file, and as "latest"', async () => {
    expect((await prepare('show-1', '--trainer', 'trl', '--dataset', 'math@v1')).code).toBe(0)
    expect((await runCli('train', 'run', '--env-path', envPath('show-1'), '--', NODE, '-e', '0')).code).toBe(0)
    expect(
      (await runCli('train', 'finalize', '--env-path', envPath('show-1'), '--metric', 'reward_mean=0.7')).code,
    ).toBe(0)

    const shown = await runCli('train', 'show', 'show-1', '--db', db)
    expect(shown.code, shown.err).toBe(0)
    const lines = shown.out.split('\n')
    expect(lines[0]).toBe(`artifact    ${ARTIFACT}`)
    expect(lines[1]).toBe('deployment  dep_2 on target prod')
    expect(lines[2]).toMatch(/^training {4}show-1: trl · model unspecified · dataset math@v1 · started /)
    expect(lines[3]).toMatch(/^result {6}succeeded at .* · reward_mean=0\.7000 exit_code=0 duration_s=/)

    const fromEnv = await runCli('train', 'show', '--env-path', envPath('show-1'))
    expect(fromEnv.out).toContain('training    show-1')
    expect(fromEnv.out).toMatch(/trainer {5}exit 0 · /)
    const latest = JSON.parse((await runCli('train', 'show', 'latest', '--db', db, '--json')).out)
    expect(latest).toMatchObject({
      run_id: 'show-1',
      artifact_id: ARTIFACT,
      deploy_id: 'dep_2',
      target: 'prod',
      result: { status: 'succeeded' },
    })
    const unknown = await runCli('train', 'show', 'nobody', '--db', db)
    expect(unknown.code).toBe(2)
  })
})
