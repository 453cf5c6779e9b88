/**
 * A trainer run under the harness against a real `wrangler dev`, every step through the `reward-harness` CLI as a
 * child process: an artifact deployed to a target, `train prepare` (handshake on the deployed artifact, an online
 * run, the manifest, the env file), `train run` of a Python trainer that scores 4 samples through
 * `/compat/openrlhf` with the run token, `train finalize` with the metrics it wrote, and `train show` printing
 * artifact → deployment → training run → result. A mismatched `--expect-artifact` exits 3 with no env file and no
 * record; a target with nothing deployed is exit 2.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { DeployRecord, RmArtifact } from '../../src/schemas/artifact.ts'
import { buildArtifact } from './support/artifact.ts'
import { ROOT, runRewardHarness } from '../support/child.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const TRAINER = join(ROOT, 'tests/e2e/support/dummy_trainer.py')
const TARGET = 'train-e2e'

let dev: WranglerDev
let work: string
let db: string
let artifact: RmArtifact
let deployment: DeployRecord

/** `reward-harness <args>` as a child process, with the dev server's admin token and no RM_TOKEN. */
const cli = (args: string[]) =>
  runRewardHarness(args, { RM_TOKEN: undefined, USER: 'e2e', REWARD_HARNESS_ADMIN_TOKEN: dev.adminToken }, 55_000)

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'train-e2e-'))
  db = join(work, 'lineage.sqlite')
  dev = await startWranglerDev()
  artifact = await buildArtifact()
  const artifactFile = join(work, 'rm.json')
  writeFileSync(artifactFile, JSON.stringify(artifact))
  const deployed = await cli(['deploy', '--artifact', artifactFile, '--target', TARGET, '--url', dev.baseUrl, '--json'])
  expect(deployed.code, `${deployed.err}\n${dev.logs()}`).toBe(0)
  deployment = JSON.parse(deployed.out) as DeployRecord
})

afterAll(async () => {
  await dev?.stop()
  if (work) rmSync(work, { recursive: true, force: true })
})

describe('train prepare → run → finalize → show (wrangler dev)', () => {
  it('runs a Python trainer on a run scored by the edge; records artifact → deployment → run → result', async () => {
    const config = join(work, 'online.json')
    writeFileSync(config, JSON.stringify({ config: { anchor_rubrics: [{ text: 'The final answer is correct.' }] } }))
    const envPath = join(work, 'e2e-train-1.env')
    const metrics = join(work, 'metrics.json')

    const prepared = await cli([
      'train',
      'prepare',
      '--url',
      dev.baseUrl,
      '--target',
      TARGET,
      '--expect-artifact',
      artifact.artifact_id,
      '--online-run',
      config,
      '--name',
      'e2e-train-1',
      '--env-path',
      envPath,
      '--db',
      db,
      '--trainer',
      'dummy',
      '--dataset',
      'arith@v1',
      '--json',
    ])
    expect(prepared.code, `${prepared.err}\n${dev.logs()}`).toBe(0)
    expect(JSON.parse(prepared.out)).toMatchObject({
      training_run_id: 'e2e-train-1',
      artifact_id: artifact.artifact_id,
      deploy_id: deployment.deploy_id,
      target: TARGET,
      online_run: { run_id: 'e2e-train-1' },
    })
    expect(statSync(envPath).mode & 0o777).toBe(0o600)
    const token = readFileSync(envPath, 'utf8').match(/^REWARD_HARNESS_TOKEN='([^']+)'$/m)?.[1]
    expect(token).toBeTruthy()
    expect(prepared.out + prepared.err).not.toContain(token)

    const ran = await cli(['train', 'run', '--env-path', envPath, '--', 'python3', TRAINER, metrics])
    expect(ran.code, `${ran.out}\n${ran.err}\n${dev.logs()}`).toBe(0)
    expect(ran.out).toMatch(/^dummy_trainer: e2e-train-1: 1 step, 4 samples, reward_mean=/m)
    const written = JSON.parse(readFileSync(metrics, 'utf8')) as { reward_mean: number; steps: number }
    expect(written.steps).toBe(1)
    expect(written.reward_mean).toBeGreaterThanOrEqual(0)
    expect(written.reward_mean).toBeLessThanOrEqual(1)

    const finalized = await cli(['train', 'finalize', '--env-path', envPath, '--metrics', metrics, '--json'])
    expect(finalized.code, finalized.err).toBe(0)
    expect(JSON.parse(finalized.out).result).toMatchObject({
      run_id: 'e2e-train-1',
      status: 'succeeded',
      metrics: { reward_mean: written.reward_mean, steps: 1, exit_code: 0 },
    })

    const shown = await cli(['train', 'show', 'e2e-train-1', '--db', db])
    expect(shown.code, shown.err).toBe(0)
    expect(shown.out).toContain(`artifact    ${artifact.artifact_id}`)
    expect(shown.out).toContain(`deployment  ${deployment.deploy_id} on target ${TARGET}`)
    expect(shown.out).toContain('training    e2e-train-1: dummy · model unspecified · dataset arith@v1')
    expect(shown.out).toMatch(/result {6}succeeded at .*reward_mean=\d\.\d{4}/)
    expect(`${prepared.out}${ran.out}${ran.err}${finalized.out}${shown.out}`).not.toContain(token)
  })

  it('refuses a mismatched --expect-artifact (exit 3), an empty target (exit 2), leaving nothing behind', async () => {
    const envPath = join(work, 'e2e-train-2.env')
    const refused = await cli([
      'train',
      'prepare',
      '--url',
      dev.baseUrl,
      '--target',
      TARGET,
      '--expect-artifact',
      `rm_${'0'.repeat(64)}`,
      '--name',
      'e2e-train-2',
      '--env-path',
      envPath,
      '--db',
      db,
    ])
    expect(refused.code).toBe(3)
    expect(refused.err).toContain(`serves ${artifact.artifact_id}`)
    expect(existsSync(envPath)).toBe(false)
    const notRecorded = await cli(['train', 'show', 'e2e-train-2', '--db', db])
    expect(notRecorded.code).toBe(2)
    expect(notRecorded.err).toContain('no training run "e2e-train-2"')

    const empty = await cli([
      'train',
      'prepare',
      '--url',
      dev.baseUrl,
      '--target',
      'nothing-here',
      '--name',
      'e2e-train-3',
      '--env-path',
      envPath,
      '--db',
      db,
    ])
    expect(empty.code).toBe(2)
    expect(empty.err).toContain('unknown target "nothing-here"')
    expect(existsSync(envPath)).toBe(false)
  })
})
