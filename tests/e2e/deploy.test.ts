/**
 * Search → export → deploy → score, end to end against a real `wrangler dev` (D1 migrated, fresh state), every step
 * through the `reward-harness` CLI as a child process with the server's admin token in REWARD_HARNESS_ADMIN_TOKEN:
 * the deployed artifact is what `/rm/<target>/healthz` names; `/rm/<target>/score` by prompt id scores with that
 * prompt's rubric (the same score the search gave the candidate) and unseen prompts with `__default__`; a second
 * artifact on the same target records the first as previous; `rollback` re-activates the first; `deployments` lists
 * the three records newest first; an artifact edited on disk is refused by `deploy` (exit 2) and changes nothing.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { artifactId, DEFAULT_RUBRIC_KEY, type DeployRecord, type RmArtifact } from '../../src/schemas/artifact.ts'
import { contentText, imageUrls, startLlmStub, type ChatCompletionBody } from '../support/llm-stub.ts'
import { makeLibraryArtifact } from '../support/library-artifact.ts'
import { callJson } from './support/http.ts'
import { ROOT, runRewardHarness } from '../support/child.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const TARGET = 'demo'

let dev: WranglerDev
let work: string

/** `reward-harness <args>` as a child process, with the dev server's admin token. */
const cli = (args: string[]) =>
  runRewardHarness(args, { USER: 'e2e', REWARD_HARNESS_ADMIN_TOKEN: dev.adminToken }, 55_000)

const readJson = (file: string) => JSON.parse(readFileSync(file, 'utf8'))

/** A mock search of the demo dataset and its artifact; returns the search output and the artifact. */
async function searchAndExport(
  name: string,
  seed: number,
): Promise<{ output: any; artifactFile: string; artifact: RmArtifact }> {
  const output = join(work, name, 'best.json')
  const searched = await cli([
    'search',
    '--dataset',
    'examples/demo.json',
    '--backend',
    'mock',
    '--output',
    output,
    '--generations',
    '2',
    '--seed',
    String(seed),
    '--json',
  ])
  expect(searched.code, searched.err).toBe(0)
  const artifactFile = join(work, name, 'rm.json')
  const exported = await cli(['export', '--search-output', output, '--out', artifactFile, '--json'])
  expect(exported.code, exported.err).toBe(0)
  return { output: readJson(output), artifactFile, artifact: readJson(artifactFile) }
}

const health = async () => {
  const answer = await callJson(`${dev.baseUrl}/rm/${TARGET}/healthz`)
  expect(answer.status, JSON.stringify(answer.body)).toBe(200)
  return answer.body as {
    status: string
    artifact_id: string
    source_session_id: string
    schema_version: string
    rm_api_version: string
  }
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'deploy-e2e-'))
  dev = await startWranglerDev()
})

afterAll(async () => {
  await dev?.stop()
  if (work) rmSync(work, { recursive: true, force: true })
})

describe('search → export → deploy → score, rollback, history (wrangler dev)', () => {
  it('serves the deployed artifact, scores by prompt rubric, rolls back, lists, refuses an edited one', async () => {
    const demo = readJson(join(ROOT, 'examples/demo.json')) as {
      prompts: Array<{ prompt_id: string; prompt: string; candidates: Array<{ candidate_id: string; text: string }> }>
    }
    const first = await searchAndExport('first', 7)
    const second = await searchAndExport('second', 11)
    const idA = first.artifact.artifact_id
    const idB = second.artifact.artifact_id
    expect(idA).not.toBe(idB)

    // Deploy the first artifact: a fresh target, so no previous artifact.
    const deployA = await cli([
      'deploy',
      '--artifact',
      first.artifactFile,
      '--target',
      TARGET,
      '--url',
      dev.baseUrl,
      '--json',
    ])
    expect(deployA.code, `${deployA.err}\n${dev.logs()}`).toBe(0)
    const recordA = JSON.parse(deployA.out) as DeployRecord
    expect(recordA).toMatchObject({
      target: TARGET,
      artifact_id: idA,
      previous_artifact_id: null,
      action: 'deploy',
      deployed_by: 'e2e',
      dataset_sha256: first.artifact.provenance.dataset_sha256,
      config_hash: first.artifact.provenance.config_hash,
    })
    expect(await health()).toMatchObject({
      status: 'ok',
      artifact_id: idA,
      source_session_id: first.output.run_manifest.harness.session_id,
      schema_version: '1.0',
      rm_api_version: '1.0',
    })

    // Score by prompt id: that prompt's rubric, and the score the search gave the candidate under it.
    for (const entry of first.output.best_rubrics as Array<{
      prompt_id: string
      candidate_scores: Record<string, number>
    }>) {
      const item = demo.prompts.find((prompt) => prompt.prompt_id === entry.prompt_id)!
      for (const candidate of item.candidates.slice(0, 2)) {
        const scored = await callJson(`${dev.baseUrl}/rm/${TARGET}/score`, {
          body: {
            prompt_id: item.prompt_id,
            prompt: item.prompt,
            candidate: { candidate_id: candidate.candidate_id, text: candidate.text },
          },
        })
        expect(scored.status, JSON.stringify(scored.body)).toBe(200)
        expect(scored.body).toMatchObject({
          artifact_id: idA,
          prompt_id: item.prompt_id,
          candidate_id: candidate.candidate_id,
          rubric_id: first.artifact.rubrics[item.prompt_id]!.rubric_id,
          fallback_rubric: false,
        })
        expect(scored.body.score, `${item.prompt_id}/${candidate.candidate_id}`).toBeCloseTo(
          entry.candidate_scores[candidate.candidate_id]!,
          10,
        )
        expect(scored.body.criteria.map((criterion: { criterion_id: string }) => criterion.criterion_id)).toEqual(
          first.artifact.rubrics[item.prompt_id]!.criteria.map((criterion) => criterion.criterion_id),
        )
      }
    }
    // A prompt the search never saw: the __default__ rubric.
    const unseen = await callJson(`${dev.baseUrl}/rm/${TARGET}/score`, {
      body: {
        prompt_id: 'p_unseen',
        prompt: 'Explain why the sky is blue.',
        candidate: { candidate_id: 'c1', text: 'First, because sunlight scatters. For example, blue scatters most.' },
      },
    })
    expect(unseen.status, JSON.stringify(unseen.body)).toBe(200)
    expect(unseen.body).toMatchObject({ artifact_id: idA, rubric_id: DEFAULT_RUBRIC_KEY, fallback_rubric: true })
    expect(unseen.body.score).toBeGreaterThanOrEqual(0)
    expect(unseen.body.score).toBeLessThanOrEqual(1)

    // A second, different artifact on the same target: the first is its previous.
    const deployB = await cli(['deploy', '--artifact', second.artifactFile, '--target', TARGET, '--url', dev.baseUrl])
    expect(deployB.code, deployB.err).toBe(0)
    expect(deployB.out).toContain(`deployed ${idB} (${second.artifactFile}, uploaded) to target ${TARGET}`)
    expect(deployB.out).toMatch(new RegExp(`previous +${idA}`))
    expect((await health()).artifact_id).toBe(idB)

    // Rollback: the first is active again.
    const rollback = await cli(['rollback', '--target', TARGET, '--url', dev.baseUrl, '--json'])
    expect(rollback.code, rollback.err).toBe(0)
    expect(JSON.parse(rollback.out)).toMatchObject({
      target: TARGET,
      action: 'rollback',
      artifact_id: idA,
      previous_artifact_id: idB,
    })
    expect((await health()).artifact_id).toBe(idA)

    // History: three records, newest first.
    const listed = await cli(['deployments', '--target', TARGET, '--url', dev.baseUrl, '--json'])
    expect(listed.code, listed.err).toBe(0)
    const history = JSON.parse(listed.out) as {
      target: string
      active_artifact_id: string
      deployments: DeployRecord[]
    }
    expect(history.target).toBe(TARGET)
    expect(history.active_artifact_id).toBe(idA)
    expect(
      history.deployments.map((record) => [record.action, record.artifact_id, record.previous_artifact_id]),
    ).toEqual([
      ['rollback', idA, idB],
      ['deploy', idB, idA],
      ['deploy', idA, null],
    ])
    const times = history.deployments.map((record) => Date.parse(record.deployed_at))
    expect(times[0]!).toBeGreaterThanOrEqual(times[1]!)
    expect(times[1]!).toBeGreaterThanOrEqual(times[2]!)
    const table = await cli(['deployments', '--target', TARGET, '--url', dev.baseUrl])
    expect(table.code).toBe(0)
    expect(table.out.split('\n')[0]).toBe(`target ${TARGET}: active ${idA}, 3 deployments`)
    expect(table.out.split('\n').filter((line) => /^ {2}[* ] +\d{4}-/.test(line))).toHaveLength(3)

    // An artifact edited on disk after export: refused locally with exit 2; the edge is left as it was.
    const edited = readJson(second.artifactFile)
    edited.rubrics.p_math_trains.criteria[0].weight = 0.123
    const editedFile = join(work, 'edited.json')
    writeFileSync(editedFile, JSON.stringify(edited, null, 2))
    const refused = await cli(['deploy', '--artifact', editedFile, '--target', TARGET, '--url', dev.baseUrl, '--json'])
    expect(refused.code).toBe(2)
    expect(JSON.parse(refused.err).error).toMatchObject({ kind: 'bad_input', code: 'artifact_id_mismatch' })
    expect((await health()).artifact_id).toBe(idA)
    const after = await cli(['deployments', '--target', TARGET, '--url', dev.baseUrl, '--json'])
    expect(JSON.parse(after.out).deployments).toHaveLength(3)
  }, 240_000)

  it('shows what the edge refuses: 400 with details, 400 at deploy, 409 rollback, wrong token (exit 2)', async () => {
    const before = await health()
    // Locally valid (schema, content address) but asking for an RM API this edge does not serve: the edge's own check.
    const source = readJson(join(work, 'first', 'rm.json')) as RmArtifact
    const { artifact_id: _id, ...body } = source
    const future = { ...body, compatibility: { ...body.compatibility, min_rm_api_version: '9.0' } }
    const futureFile = join(work, 'future.json')
    writeFileSync(futureFile, JSON.stringify({ artifact_id: await artifactId(future), ...future }, null, 2))
    const text = await cli(['deploy', '--artifact', futureFile, '--target', TARGET, '--url', dev.baseUrl])
    expect(text.code, text.err).toBe(2)
    expect(text.err).toContain('error: the edge refused the request: POST /admin/artifacts → 400 invalid_artifact')
    expect(text.err).toMatch(/ {2}- compatibility\.min_rm_api_version: .*9\.0/)
    const json = await cli(['deploy', '--artifact', futureFile, '--target', TARGET, '--url', dev.baseUrl, '--json'])
    expect(json.code).toBe(2)
    expect(JSON.parse(json.err).error).toMatchObject({
      kind: 'bad_input',
      code: 'invalid_artifact',
      status: 400,
      details: [{ path: 'compatibility.min_rm_api_version', message: expect.any(String) }],
    })

    // An openai-backend artifact deployed without an LLM endpoint: stored, but the deployment is refused.
    const openai = { ...body, runtime: { ...body.runtime, backend: 'openai' as const } }
    const openaiFile = join(work, 'openai.json')
    writeFileSync(openaiFile, JSON.stringify({ artifact_id: await artifactId(openai), ...openai }, null, 2))
    const unconfigured = await cli(['deploy', '--artifact', openaiFile, '--target', TARGET, '--url', dev.baseUrl])
    expect(unconfigured.code, unconfigured.err).toBe(2)
    expect(unconfigured.err).toContain('400 llm_not_configured')
    // The edge's message names its API field; the CLI adds the flags that do the same.
    expect(unconfigured.err).toContain('hint: with the CLI, name the judge at deploy: --llm-base-url')

    const rollback = await cli(['rollback', '--target', 'empty-target', '--url', dev.baseUrl])
    expect(rollback.code).toBe(2)
    expect(rollback.err).toContain('409 nothing_to_roll_back')
    const wrongToken = await runRewardHarness(['deployments', '--target', TARGET, '--url', dev.baseUrl], {
      REWARD_HARNESS_ADMIN_TOKEN: 'wrong',
    })
    expect(wrongToken.code).toBe(2)
    expect(wrongToken.err).toContain('the edge refused the admin token')
    expect(await health()).toEqual(before)
  }, 120_000)

  it('evolve → export --library → deploy → bench url: the scores and accuracy of bench library: on it', async () => {
    const dataset = 'offline/evolve/fixtures/pairs-demo.json'
    const evolved = await cli([
      'evolve',
      '--dataset',
      dataset,
      '--out',
      join(work, 'lib'),
      '--iterations',
      '1',
      '--backend',
      'mock',
      '--json',
    ])
    expect(evolved.code, evolved.err).toBe(0)
    const libraryDir = join(work, 'lib', 'checkpoints', 'best')
    const artifactFile = join(work, 'lib-rm.json')
    const exported = await cli(['export', '--library', libraryDir, '--out', artifactFile, '--json'])
    expect(exported.code, exported.err).toBe(0)
    const deployed = await cli([
      'deploy',
      '--artifact',
      artifactFile,
      '--target',
      'lib',
      '--url',
      dev.baseUrl,
      '--json',
    ])
    expect(deployed.code, deployed.err).toBe(0)

    const edge = await cli(['bench', '--dataset', dataset, '--scorer', `url:${dev.baseUrl}#lib`, '--json'])
    expect(edge.code, edge.err).toBe(0)
    const offline = await cli(['bench', '--dataset', dataset, '--scorer', `library:${libraryDir}`, '--json'])
    expect(offline.code, offline.err).toBe(0)
    const [atEdge, local] = [JSON.parse(edge.out), JSON.parse(offline.out)]
    expect(atEdge.failures.count).toBe(0)
    expect(atEdge.overall.pairwise.ab.n).toBeGreaterThan(0)
    expect(atEdge.overall.pairwise).toEqual(local.overall.pairwise)
    // Per candidate, the edge's win rate over both orders of its pair is the offline judge's.
    expect(atEdge.scores).toEqual(local.scores)
  })

  it('a library artifact on an OpenAI-compatible endpoint judges with images, both orders, swapped', async () => {
    const pixel = (byte: number) =>
      `data:image/png;base64,${Buffer.from([0x89, 0x50, 0x4e, 0x47, byte]).toString('base64')}`
    const [source, goodEdit, badEdit] = [pixel(1), pixel(2), pixel(3)]
    const stub = await startLlmStub()
    const system = (body: ChatCompletionBody) =>
      body.messages.find((message) => message.role === 'system')?.content ?? ''
    const user = (body: ChatCompletionBody) => body.messages.find((message) => message.role === 'user')!
    // A judge that decides from the pixels only: both answers' texts are the same.
    stub.respondWith((body) => {
      if (system(body).startsWith('You are the library router')) return JSON.stringify({ entries: ['visual-edit'] })
      const shownAsA = imageUrls(user(body))[1]
      return JSON.stringify({
        think: 'compared the edits',
        answer: { preference: shownAsA === goodEdit ? 'A' : 'B', reason: 'stub' },
      })
    })
    try {
      const artifact = await makeLibraryArtifact(
        [
          {
            name: 'visual-edit',
            kind: 'skill',
            description: 'Judge photo edits by the pictures',
            body: 'Prefer the edit whose picture does what the instruction asks.\n',
          },
        ],
        { note: 'vision', runtime: { backend: 'openai', model: 'stub-vlm' } },
      )
      expect((await callJson(`${dev.baseUrl}/admin/artifacts`, { token: dev.adminToken, body: artifact })).status).toBe(
        201,
      )
      const deployed = await callJson(`${dev.baseUrl}/admin/targets/vision/deployments`, {
        token: dev.adminToken,
        body: { artifact_id: artifact.artifact_id, deployed_by: 'e2e', llm: { base_url: stub.baseUrl } },
      })
      expect(deployed.status, JSON.stringify(deployed.body)).toBe(201)

      const request = (candidateImage: string, referenceImage: string) => ({
        prompt_id: 'edit-1',
        prompt: 'Remove the red car from the photo.',
        images: [{ data_url: source }],
        reference: 'The edited photo.',
        reference_images: [{ data_url: referenceImage }],
        candidate: { candidate_id: 'c1', text: 'The edited photo.', images: [{ data_url: candidateImage }] },
      })
      const good = await callJson(`${dev.baseUrl}/rm/vision/score`, { body: request(goodEdit, badEdit) })
      expect(good.status, JSON.stringify(good.body)).toBe(200)
      expect(good.body).toMatchObject({ artifact_kind: 'library', score: 1, failures: 0, consistent: true })
      const judged = stub.requests.filter((body) => system(body).startsWith('You are the library sub-agent'))
      const shown = judged.map((body) => imageUrls(user(body)))
      expect(shown).toHaveLength(2)
      expect(shown).toEqual(
        expect.arrayContaining([
          [source, goodEdit, badEdit],
          [source, badEdit, goodEdit],
        ]),
      )
      for (const body of judged)
        expect(contentText(user(body))).toMatch(/Image instruction-1 \(of the instruction, sha256 [0-9a-f]{12}\):/)
      const router = stub.requests.find((body) => system(body).startsWith('You are the library router'))!
      expect(router.messages.every((message) => typeof message.content === 'string')).toBe(true)

      const bad = await callJson(`${dev.baseUrl}/rm/vision/score`, { body: request(badEdit, goodEdit) })
      expect(bad.body).toMatchObject({ score: 0, failures: 0, consistent: true })
    } finally {
      await stub.close()
    }
  })
})
