/**
 * A production-mode `wrangler dev` (DEPLOYMENT=production: every route needs a token): the trainers that send no
 * headers — OpenRLHF, slime and autosr's RM client — authenticate with the token in the URL path (`/t/<token>/…`),
 * a wrong token is a 401, and no token ever reaches the server's output.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildArtifact } from './support/artifact.ts'
import { callJson } from './support/http.ts'
import { openRlhfLegacy, openRlhfSample, slimeRemoteRm, TrainerError } from './support/trainers.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const run = promisify(execFile)
const ROOT = path.join(import.meta.dirname, '../..')
const RM_TOKEN = `rh_e2e_rm_${Math.random().toString(36).slice(2)}`
const WRONG_TOKEN = `rh_e2e_wrong_${Math.random().toString(36).slice(2)}`

let dev: WranglerDev
let runToken: string
let runId: string

beforeAll(async () => {
  dev = await startWranglerDev({ deployment: 'production', vars: { RM_TOKEN } })
  const created = await callJson(`${dev.baseUrl}/runs`, {
    token: dev.adminToken,
    body: { config: { anchor_rubrics: [{ text: 'The final answer is correct.' }] } },
  })
  expect(created.status, JSON.stringify(created.body)).toBe(201)
  runToken = created.body.token
  runId = created.body.run_id
  const artifact = await buildArtifact()
  expect((await callJson(`${dev.baseUrl}/admin/artifacts`, { token: dev.adminToken, body: artifact })).status).toBe(201)
  expect(
    (
      await callJson(`${dev.baseUrl}/admin/targets/prod/deployments`, {
        token: dev.adminToken,
        body: { artifact_id: artifact.artifact_id },
      })
    ).status,
  ).toBe(201)
})

afterAll(async () => {
  await dev?.stop()
})

describe('a token in the path, in production', () => {
  it('OpenRLHF (both shapes) and slime score with the run token in their URL; without it, 401', async () => {
    const url = `${dev.baseUrl}/t/${runToken}/runs/${runId}/compat/openrlhf`
    const legacy = await openRlhfLegacy(
      [url, url],
      ['Q: 2+2? A: 4', 'Q: 3+3? A: 6'],
      ['Q: 2+2? A:', 'Q: 3+3? A:'],
      ['4', '6'],
    )
    expect(legacy.rewards).toHaveLength(2)
    const current = await openRlhfSample([url], 'Q: 5+5? A: 10', 'Q: 5+5? A:', '10')
    expect((current!.reward as number[]).length).toBe(1)
    const slime = await slimeRemoteRm(
      `${dev.baseUrl}/t/${runToken}/compat/slime`,
      { prompt: 'What is 2+2?', response: '4', label: '4' },
      { rewardKey: 'score' },
    )
    expect(slime.reward).toBeGreaterThan(0)
    const anonymous = await callJson(`${dev.baseUrl}/runs/${runId}/compat/openrlhf`, {
      body: { query: ['x'], prompts: [''], labels: [''] },
    })
    expect(anonymous.status).toBe(401)
  })

  it('a wrong token is a 401 each try: OpenRLHF raises after its 5 tries, slime after its 10', async () => {
    const logs: string[] = []
    const refused = await openRlhfLegacy([`${dev.baseUrl}/t/${WRONG_TOKEN}/compat/openrlhf`], ['Q A'], ['Q'], ['A'], {
      retryWaitMs: 20,
      log: (line) => logs.push(line),
    }).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(TrainerError)
    expect(logs.join('\n')).toMatch(/401/)
    const slime = await slimeRemoteRm(
      `${dev.baseUrl}/t/${WRONG_TOKEN}/compat/slime`,
      { prompt: 'Q', response: 'A' },
      { rewardKey: 'score', backoffScale: 0.001 },
    ).catch((error: unknown) => error)
    expect(slime).toMatchObject({ status: 401 })
    const direct = await callJson(`${dev.baseUrl}/t/${WRONG_TOKEN}/rubric_status`)
    expect(direct.status).toBe(401)
    expect(direct.body.error.code).toBe('unauthorized')
    // A run token opens its own run only, and never /rm/*.
    expect((await callJson(`${dev.baseUrl}/t/${runToken}/rm/prod/healthz`)).status).toBe(403)
  })

  it("autosr's RMScoringClient works unchanged with endpoint=<base>/t/<RM token>/rm/<target>", async () => {
    const endpoint = `${dev.baseUrl}/t/${RM_TOKEN}/rm/prod`
    const itemsFile = path.join(await mkdtemp(path.join(tmpdir(), 'rh-autosr-')), 'items.json')
    await writeFile(
      itemsFile,
      JSON.stringify([
        { prompt_id: 'p_math', prompt: 'What is 2+2?', candidate: { candidate_id: 'c1', text: '2 + 2 = 4' } },
      ]),
    )
    const harness = (url: string) =>
      run('python3', [path.join(ROOT, 'tests/e2e/support/trainer_harness.py'), 'autosr', url, itemsFile], {
        cwd: ROOT,
        timeout: 60_000,
        env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
      })
    const { stdout } = await harness(endpoint)
    const out = JSON.parse(stdout.trim().split('\n').at(-1)!)
    expect(out.healthz.status).toBe('ok')
    expect(out.scores[0].score).toBeGreaterThan(0)
    expect(out.batch.results).toHaveLength(1)
    // The same client with a wrong token fails its health check with the server's 401, and prints no token.
    const wrong = (await harness(`${dev.baseUrl}/t/${WRONG_TOKEN}/rm/prod`).catch(
      (error: { stdout?: string }) => error,
    )) as { stdout?: string }
    expect(wrong.stdout).toMatch(/401/)
    expect(wrong.stdout).not.toContain(WRONG_TOKEN)
  })

  it("the client's RMScoringClient, autosr's drop-in, sends the RM token as a header and prints none", async () => {
    const code = `
import json, sys
sys.path.insert(0, "clients/python"); sys.path.insert(0, "clients/python/recipes")
from reward_harness_client import RMScoringClient, RewardHarnessError
import autosr_client
base, good, wrong = sys.argv[1:4]
out = {}
client = RMScoringClient(base + "/rm/prod", token=good)
out["status"] = client.healthz_check()["status"]
out["score"] = client.score(prompt_id="p_math", prompt="What is 2+2?", candidate_id="c1", text="2 + 2 = 4")["score"]
for name, make in (
    ("drop_in", lambda: RMScoringClient(base + "/rm/prod", token=wrong)),
    ("drop_in_path", lambda: RMScoringClient(base + "/t/" + wrong + "/rm/prod")),
    ("autosr", lambda: autosr_client.RMScoringClient(base + "/t/" + wrong + "/rm/prod")),
):
    try:
        make().score(prompt_id="p", prompt="Q", candidate_id="c", text="A")
    except Exception as error:
        out[name] = str(error)
print(json.dumps(out))
`
    const { stdout } = await run('python3', ['-c', code, dev.baseUrl, RM_TOKEN, WRONG_TOKEN], {
      cwd: ROOT,
      timeout: 60_000,
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', REWARD_HARNESS_TOKEN: '' },
    })
    const out = JSON.parse(stdout.trim().split('\n').at(-1)!)
    expect(out).toMatchObject({ status: 'ok', score: expect.any(Number) })
    expect(out.drop_in).toMatch(/unauthorized \(HTTP 401\)/)
    expect(out.drop_in_path).toMatch(/HTTP 401/)
    for (const message of [out.drop_in, out.drop_in_path]) expect(message).not.toContain(WRONG_TOKEN)
    // What it replaces: autosr's own client puts the path's token in its message.
    expect(out.autosr).toContain(WRONG_TOKEN)
  })

  it('verl with the deployed-artifact recipe, RM token in REWARD_HARNESS_URL: one /rm score per sample', async () => {
    const samplesFile = path.join(await mkdtemp(path.join(tmpdir(), 'rh-verl-')), 'samples.jsonl')
    const samples = [
      {
        data_source: 'math',
        solution_str: '2 + 2 = 4',
        ground_truth: '4',
        extra_info: { prompt_id: 'p_math', question: 'What is 2+2?', index: 0 },
      },
      {
        data_source: 'chat',
        solution_str: 'Blue.',
        ground_truth: '',
        extra_info: { question: 'Name a colour.', index: 1 },
      },
    ]
    await writeFile(samplesFile, samples.map((line) => JSON.stringify(line)).join('\n'))
    const { stdout } = await run(
      'python3',
      [
        path.join(ROOT, 'tests/e2e/support/trainer_harness.py'),
        'verl-naive',
        path.join(ROOT, 'clients/python/recipes/verl_artifact.py'),
        samplesFile,
      ],
      {
        cwd: ROOT,
        timeout: 60_000,
        env: {
          ...process.env,
          PYTHONDONTWRITEBYTECODE: '1',
          REWARD_HARNESS_URL: `${dev.baseUrl}/t/${RM_TOKEN}`,
          REWARD_HARNESS_TARGET: 'prod',
        },
      },
    )
    const out = JSON.parse(stdout.trim().split('\n').at(-1)!)
    expect(out.rewards).toHaveLength(2)
    for (const reward of out.rewards) expect(reward >= 0 && reward <= 1).toBe(true)
    expect(out.rewards[0]).toBeGreaterThan(0)
    expect(Object.keys(out.reward_extra_info).sort()).toEqual(['fallback_rubric', 'score'])
    // The unknown prompt id fell back to the artifact's __default__ rubric.
    expect(out.reward_extra_info.fallback_rubric).toEqual([0, 1])
  })

  it("the Worker prints no token, right or wrong; only the dev server's access log shows request paths", async () => {
    const lines = dev.fullLog().split('\n')
    // wrangler dev's own access log (`[wrangler:info] POST /t/…/compat/openrlhf 200 OK`) echoes each path, as a
    // Cloudflare request log would: README says so, and clients that can send a header keep the token out of URLs.
    const accessLog = /^\[wrangler:info\] (GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) \//
    const workerOutput = lines.filter((line) => !accessLog.test(line)).join('\n')
    expect(lines.filter((line) => accessLog.test(line)).length).toBeGreaterThan(10)
    for (const token of [runToken, RM_TOKEN, WRONG_TOKEN, dev.adminToken]) expect(workerOutput).not.toContain(token)
  })
})
