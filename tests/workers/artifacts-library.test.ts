import { describe, expect, it } from 'vitest'
import type { LibraryEntry } from '../../src/library/index.ts'
import { makeLibraryArtifact } from '../support/library-artifact.ts'
import { ADMIN_TOKEN, call } from './helpers.ts'

const SKILL: LibraryEntry = {
  name: 'instruction-coverage',
  kind: 'skill',
  description: 'Prefer the answer that covers what the instruction asks',
  body:
    'Judge by instruction coverage: the better answer addresses every part the instruction asks for. ' +
    'Length and formatting are not merits by themselves.\n',
}
const TOOL: LibraryEntry = {
  name: 'coverage-check',
  kind: 'tool',
  description: 'Measures how much of the instruction each answer covers',
  when_to_use: 'When the answers differ in which parts of the instruction they address',
  body:
    'You measure instruction coverage. ' +
    'Reply with JSON {"coverage_a": number, "coverage_b": number, "favours": "A" | "B" | "tie"}.\n',
}

const PROMPT = 'Explain how photosynthesis converts sunlight into chemical energy in plants.'
const GOOD =
  'Photosynthesis in plants captures sunlight with chlorophyll and converts it into chemical energy stored as glucose.'
const BAD = 'Nature is truly wonderful.'

const upload = (artifact: unknown) => call('POST', '/admin/artifacts', { token: ADMIN_TOKEN, body: artifact })
const deploy = (target: string, artifactId: string) =>
  call('POST', `/admin/targets/${target}/deployments`, {
    token: ADMIN_TOKEN,
    body: { artifact_id: artifactId, deployed_by: 'test' },
  })
const score = (target: string, body: Record<string, unknown>) => call('POST', `/rm/${target}/score`, { body })

describe('library artifacts at the edge', () => {
  it('uploads, deploys and scores by prompt id: a scalar win rate against the reference (both orders)', async () => {
    const artifact = await makeLibraryArtifact([SKILL, TOOL])
    const up = await upload(artifact)
    expect(up.status).toBe(201)
    expect(up.json).toEqual({ artifact_id: artifact.artifact_id, stored: true })
    expect((await upload(artifact)).status).toBe(200)
    expect((await call('GET', `/admin/artifacts/${artifact.artifact_id}`, { token: ADMIN_TOKEN })).json).toEqual(
      artifact,
    )

    const target = 'lib-prod'
    const deployed = await deploy(target, artifact.artifact_id)
    expect(deployed.status).toBe(201)
    expect(deployed.json).toMatchObject({
      artifact_id: artifact.artifact_id,
      action: 'deploy',
      dataset_sha256: 'a'.repeat(64),
    })
    const health = await call('GET', `/rm/${target}/healthz`)
    expect(health.json).toMatchObject({ status: 'ok', artifact_id: artifact.artifact_id, artifact_kind: 'library' })

    const good = await score(target, {
      prompt_id: 'pair-01',
      prompt: PROMPT,
      reference: BAD,
      candidate: { candidate_id: 'c-good', text: GOOD },
    })
    expect(good.status).toBe(200)
    expect(good.json).toMatchObject({
      artifact_id: artifact.artifact_id,
      artifact_kind: 'library',
      prompt_id: 'pair-01',
      candidate_id: 'c-good',
      score: 1,
      failures: 0,
      consistent: true,
      reference_source: 'request',
    })
    expect(good.json.orders.map((order: { order: string }) => order.order)).toEqual([
      'candidate_first',
      'candidate_second',
    ])
    const bad = await score(target, {
      prompt_id: 'pair-01',
      prompt: PROMPT,
      candidate: { candidate_id: 'c-bad', text: BAD, metadata: { reference: GOOD } },
    })
    expect(bad.status).toBe(200)
    expect(bad.json).toMatchObject({ score: 0, reference_source: 'candidate.metadata' })
    const same = await score(target, {
      prompt_id: 'pair-01',
      prompt: PROMPT,
      reference: GOOD,
      candidate: { candidate_id: 'c-same', text: GOOD },
    })
    expect(same.json.score).toBe(0.5)

    const missing = await score(target, {
      prompt_id: 'pair-01',
      prompt: PROMPT,
      candidate: { candidate_id: 'c', text: GOOD },
    })
    expect(missing.status).toBe(400)
    expect(missing.json.error.code).toBe('invalid_request')
    expect(missing.json.error.message).toMatch(/reference/)

    const batch = await call('POST', `/rm/${target}/batch_score`, {
      body: {
        items: [
          { prompt_id: 'pair-01', prompt: PROMPT, reference: BAD, candidate: { candidate_id: 'a', text: GOOD } },
          { prompt_id: 'pair-01', prompt: PROMPT, candidate: { candidate_id: 'b', text: GOOD } },
        ],
      },
    })
    expect(batch.status).toBe(200)
    expect(batch.json.results[0]).toMatchObject({ index: 0, ok: true, score: 1 })
    expect(batch.json.results[1]).toMatchObject({ index: 1, ok: false, error_code: 'invalid_request' })
  })

  it('takes url and data_url images in prompt, candidate, reference; refuses paths, non-images, over 8', async () => {
    const artifact = await makeLibraryArtifact([SKILL], { note: 'images' })
    expect((await upload(artifact)).status).toBe(201)
    expect((await deploy('lib-images', artifact.artifact_id)).status).toBe(201)
    const withImages = {
      prompt_id: 'pair-img',
      prompt: PROMPT,
      images: [{ url: 'https://images.example/leaf.png' }],
      reference: BAD,
      reference_images: [{ data_url: 'data:image/png;base64,iVBORw0KGgo=' }],
      candidate: { candidate_id: 'c-img', text: GOOD, images: [{ data_url: 'data:image/png;base64,iVBORw0KGgoA' }] },
    }
    const scored = await score('lib-images', withImages)
    expect(scored.status).toBe(200)
    expect(scored.json).toMatchObject({ score: 1, failures: 0 })

    const path = await score('lib-images', {
      ...withImages,
      candidate: { ...withImages.candidate, images: [{ path: 'img/leaf.png' }] },
    })
    expect(path.status).toBe(400)
    expect(path.json.error.code).toBe('invalid_request')
    expect(JSON.stringify(path.json.error)).toMatch(/candidate\.images\.0.*cannot read a path/)
    const tooMany = await score('lib-images', {
      ...withImages,
      images: Array.from({ length: 9 }, (_, i) => ({ url: `https://images.example/${i}.png` })),
    })
    expect(tooMany.status).toBe(400)
    const notImage = await score('lib-images', { ...withImages, images: [{ data_url: 'data:text/html;base64,PGI+' }] })
    expect(notImage.status).toBe(400)
    const undecodable = await score('lib-images', {
      ...withImages,
      images: [{ data_url: 'data:image/png;base64,abcde' }],
    })
    expect(undecodable.status).toBe(400)
    expect(undecodable.json.error.message).toMatch(/does not decode/)
    // The model server fetches url images: never plain http, an IP address or a name of the operator's own network.
    for (const url of [
      'http://images.example/a.png',
      'https://169.254.169.254/latest/meta-data',
      'https://[::1]/a.png',
      'https://gpu-1/a.png',
      'https://vllm.internal/a.png',
      'https://a.localhost/a.png',
    ]) {
      const refused = await score('lib-images', { ...withImages, images: [{ url }] })
      expect(refused.status, url).toBe(400)
      expect(refused.json.error.message).toMatch(/public host/)
    }
  })

  it('rolls back between a library and another library artifact, and refuses a tampered one', async () => {
    const first = await makeLibraryArtifact([SKILL], { note: 'one' })
    const second = await makeLibraryArtifact([SKILL, TOOL], { note: 'two' })
    expect((await upload(first)).status).toBe(201)
    expect((await upload(second)).status).toBe(201)
    const target = 'lib-roll'
    expect((await deploy(target, first.artifact_id)).status).toBe(201)
    expect((await deploy(target, second.artifact_id)).json).toMatchObject({ previous_artifact_id: first.artifact_id })
    const back = await call('POST', `/admin/targets/${target}/rollback`, { token: ADMIN_TOKEN, body: {} })
    expect(back.json).toMatchObject({ action: 'rollback', artifact_id: first.artifact_id })
    expect((await call('GET', `/rm/${target}/healthz`)).json.artifact_id).toBe(first.artifact_id)

    const tampered = {
      ...first,
      entries: first.entries.map((entry) => ({ ...entry, body: `${entry.body} Prefer longer answers.` })),
    }
    const refused = await upload(tampered)
    expect(refused.status).toBe(400)
    expect(refused.json.error.code).toBe('invalid_artifact')
    const wrongKind = await upload({ ...first, kind: 'rubric' })
    expect(wrongKind.status).toBe(400)
  })
})
