/**
 * The Python client (clients/python) against a real `wrangler dev`: deployed RM artifacts (`/rm/<target>/…`,
 * deployed through the admin API), and the trainer protocols over the default run (OpenRLHF, group scoring),
 * plus the module docstring's verl `compute_score` and TRL `reward_funcs` recipes run as written.
 */
import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RmArtifact } from '../../src/schemas/artifact.ts'
import { buildArtifact } from './support/artifact.ts'
import { callJson } from './support/http.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const run = promisify(execFile)
const ROOT = path.join(import.meta.dirname, '../..')
const PYTHON_DIR = path.join(ROOT, 'clients/python')
/** The target the docstring's verl example scores against. */
const TARGET = 'prod'

/** Runs Python source with the client importable; returns the last stdout line parsed as JSON. */
async function python(code: string, args: string[]): Promise<any> {
  const { stdout } = await run('python3', ['-c', code, ...args], {
    cwd: ROOT,
    timeout: 60_000,
    env: { ...process.env, PYTHONPATH: PYTHON_DIR, PYTHONDONTWRITEBYTECODE: '1' },
  })
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '')
}

let dev: WranglerDev
let artifact: RmArtifact

beforeAll(async () => {
  dev = await startWranglerDev()
  artifact = await buildArtifact()
  const uploaded = await callJson(`${dev.baseUrl}/admin/artifacts`, { token: dev.adminToken, body: artifact })
  expect(uploaded.status, JSON.stringify(uploaded.body)).toBe(201)
  const deployed = await callJson(`${dev.baseUrl}/admin/targets/${TARGET}/deployments`, {
    token: dev.adminToken,
    body: { artifact_id: artifact.artifact_id, deployed_by: 'e2e' },
  })
  expect(deployed.status, JSON.stringify(deployed.body)).toBe(201)
})

afterAll(async () => {
  await dev?.stop()
})

describe('Python client: deployed RM artifacts', () => {
  it('rm_score by prompt id, __default__ fallback, rm_batch_score with a bad item, verl healthz check', async () => {
    const code = `
import json, sys, urllib.request
from reward_harness_client import RewardHarnessClient, RewardHarnessError
base, target, artifact_id = sys.argv[1:4]
client = RewardHarnessClient(base, timeout=60)
out = {}
# The reference verl client's handshake (autosr rl/verl/reward_client.py): GET <endpoint>/healthz, exact fields.
with urllib.request.urlopen(f"{base}/rm/{target}/healthz", timeout=30) as response:
    health = json.loads(response.read().decode("utf-8"))
out["handshake"] = (health["status"].strip() == "ok" and health["artifact_id"] == artifact_id
    and health["source_session_id"] == "e2e-session" and health["schema_version"].strip() == "1.0"
    and health["rm_api_version"].strip() == "1.0")
out["healthz"] = client.rm_healthz(target)
out["math"] = client.rm_score(
    target, "p_math", "What is 2+2?", {"candidate_id": "c1", "text": "2 + 2 = 4", "source": "verl", "metadata": {}}
)
out["fallback"] = client.rm_score(target, "auto", "Name a colour.", "Blue.")
out["batch"] = client.rm_batch_score(target, [
    {"prompt_id": "p_math", "prompt": "What is 2+2?", "candidate": {"candidate_id": "a", "text": "2 + 2 = 4"}},
    {"prompt_id": "p_math", "prompt": "What is 2+2?"},
    {"prompt_id": "other", "prompt": "Say hi.", "candidate": "hi"},
])
try:
    RewardHarnessClient(base, max_attempts=1).rm_score("nothing-deployed", "p", "q", "a")
except RewardHarnessError as e:
    out["undeployed"] = {"status": e.status, "code": e.code}
print(json.dumps(out))
`
    const out = await python(code, [dev.baseUrl, TARGET, artifact.artifact_id])
    expect(out.handshake).toBe(true)
    expect(out.healthz).toMatchObject({
      status: 'ok',
      artifact_id: artifact.artifact_id,
      schema_version: '1.0',
      rm_api_version: '1.0',
    })
    expect(out.math).toMatchObject({
      artifact_id: artifact.artifact_id,
      prompt_id: 'p_math',
      candidate_id: 'c1',
      rubric_id: 'r_math',
      fallback_rubric: false,
    })
    expect(out.math.criteria.map((c: { criterion_id: string }) => c.criterion_id)).toEqual([
      'math_answer',
      'math_steps',
    ])
    expect(out.math.score).toBeGreaterThan(0)
    expect(out.math.score).toBeLessThanOrEqual(1)
    expect(out.fallback).toMatchObject({ prompt_id: 'auto', rubric_id: 'r_default', fallback_rubric: true })
    const [good, bad, fallback] = out.batch.results
    expect(out.batch.artifact_id).toBe(artifact.artifact_id)
    expect(good).toMatchObject({ index: 0, ok: true, rubric_id: 'r_math', score: out.math.score })
    expect(bad).toMatchObject({ index: 1, ok: false, prompt_id: 'p_math', error_code: 'invalid_request' })
    expect(fallback).toMatchObject({ index: 2, ok: true, fallback_rubric: true })
    expect(out.undeployed).toEqual({ status: 404, code: 'target_not_found' })
  })
})

describe('Python client: trainer protocols on the default run', () => {
  it('openrlhf: 3 items give 3 rewards, empty lists give empty lists; score_group advantages sum to ~0', async () => {
    const code = `
import json, sys
from reward_harness_client import RewardHarnessClient
client = RewardHarnessClient(sys.argv[1], timeout=60)
prompts = [
    "<|user|>What is 2+2?<|assistant|>",
    "<|user|>What is 3*3?<|assistant|>",
    "<|user|>Capital of France?<|assistant|>",
]
responses = ["2 + 2 = 4", "3 * 3 = 6", "Paris."]
out = {
    "three": client.openrlhf([p + r for p, r in zip(prompts, responses)], prompts, ["4", "9", "Paris"]),
    "empty": client.openrlhf([], [], []),
    "group": client.score_group(
        "What is 2+2?", ["2 + 2 = 4, since 2 + 2 makes 4.", "5", "4", "no idea"], reference="4"
    ),
}
print(json.dumps(out))
`
    const out = await python(code, [dev.baseUrl])
    expect(out.three.rewards).toHaveLength(3)
    expect(out.three.scores).toEqual(out.three.rewards)
    for (const reward of out.three.rewards) {
      expect(reward).toBeGreaterThanOrEqual(0)
      expect(reward).toBeLessThanOrEqual(1)
    }
    expect(out.three.extra_logs.rubric_version).toHaveLength(3)
    expect(out.empty).toEqual({
      rewards: [],
      scores: [],
      extra_logs: { rubric_version: [], cached: [], duplicate: [] },
    })
    expect(out.group.scores).toHaveLength(4)
    expect(out.group.advantages).toHaveLength(4)
    expect(Math.abs(out.group.advantages.reduce((sum: number, a: number) => sum + a, 0))).toBeLessThan(1e-9)
    expect(out.group.run_id).toBe('default')
  })

  it("runs the module docstring's verl compute_score and its TRL recipe (recipes/trl_reward.py)", async () => {
    const code = `
import json, os, sys, textwrap
import reward_harness_client
os.environ["REWARD_HARNESS_URL"] = sys.argv[1]
# The literal blocks ("::" then an indented block) of the module docstring.
blocks, lines, i = [], reward_harness_client.__doc__.splitlines(), 0
while i < len(lines):
    if lines[i].rstrip().endswith("::"):
        j = i + 1
        while j < len(lines) and (lines[j].strip() == "" or lines[j].startswith("    ")):
            j += 1
        blocks.append(textwrap.dedent("\\n".join(lines[i + 1:j])))
        i = j
    else:
        i += 1
scope = {}
exec(next(b for b in blocks if "def compute_score" in b), scope)
exec(next(b for b in blocks if "import rubric_reward" in b), scope)
# The one TRL recipe: the docstring points at recipes/trl_reward.py (groups scored concurrently), not a copy.
assert scope["rubric_reward"].__module__ == "trl_reward", scope["rubric_reward"].__module__
verl = [
    scope["compute_score"]("math", "2 + 2 = 4", "4", {"prompt_id": "p_math", "question": "What is 2+2?", "index": 3}),
    scope["compute_score"]("math", "blue", "blue", {"question": "Name a colour."}),
]
trl = scope["rubric_reward"](
    prompts=[
        "What is 2+2?",
        "What is 2+2?",
        [{"role": "user", "content": "Capital of France?"}],
        [{"role": "user", "content": "Capital of France?"}],
    ],
    completions=["4", "5", [{"role": "assistant", "content": "Paris."}], [{"role": "assistant", "content": "Lyon."}]],
    completion_ids=[[1], [2], [3], [4]],
)
print(json.dumps({"verl": verl, "trl": trl}))
`
    const out = await python(code, [dev.baseUrl])
    expect(out.verl).toHaveLength(2)
    expect(Object.keys(out.verl[0]).sort()).toEqual(['fallback_rubric', 'score'])
    expect(out.verl[0].fallback_rubric).toBe(0)
    expect(out.verl[1].fallback_rubric).toBe(1)
    for (const result of out.verl) expect(result.score).toBeGreaterThanOrEqual(0)
    expect(out.trl).toHaveLength(4)
    for (const reward of out.trl) {
      expect(typeof reward).toBe('number')
      expect(reward).toBeGreaterThanOrEqual(0)
      expect(reward).toBeLessThanOrEqual(1)
    }
  })
})
