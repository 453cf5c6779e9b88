/**
 * Hostile inputs, round 4 (issue 39), in workerd: an extraction pattern past the regex budget is refused at upload
 * naming its field.
 */
import { describe, expect, it } from 'vitest'
import { artifactId, RmArtifactBody } from '../../src/schemas/artifact.ts'
import { ADMIN_TOKEN, call } from './helpers.ts'

/** A valid mock-backend artifact whose prompt extraction is `pattern`. */
async function artifactWithPattern(pattern: string) {
  const body = RmArtifactBody.parse({
    schema_version: '1.0',
    kind: 'rubric',
    created_at_utc: '2026-11-22T08:00:00.000Z',
    provenance: {
      source_run_id: 'hostile',
      source_session_id: 'hostile',
      dataset_sha256: 'a'.repeat(64),
      config_hash: 'b'.repeat(64),
      settings_hash: 'c'.repeat(64),
      search_output_sha256: 'd'.repeat(64),
    },
    rubrics: { __default__: { rubric_id: 'r', criteria: [{ criterion_id: 'c', text: 'Answers the question.' }] } },
    runtime: {
      backend: 'mock',
      verifier_model: 'mock-heuristic-1',
      temperature: 0,
      max_tokens: 1024,
      seed: 7,
      locale: 'en',
      extraction: { prompt: { kind: 'regex', pattern: 'x' }, candidate: { kind: 'answer' } },
      grade_max: 10,
      allow_na: true,
      num_votes: 1,
    },
    scoring_policy: { score: 'weighted_mean_of_grades', normalization: { method: 'identity', range: [0, 1] } },
    compatibility: { artifact_type: 'rm', min_rm_api_version: '1.0' },
  })
  // Set after parsing: the schema would refuse a pattern past the budget before the upload could.
  const raw = structuredClone(body)
  raw.runtime.extraction.prompt = { kind: 'regex', pattern, join: '\n\n' }
  return { ...raw, artifact_id: await artifactId(raw) }
}

describe('the regex budget at upload', () => {
  it('refuses (.*a){1000} with 400 invalid_artifact naming runtime.extraction.prompt.pattern', async () => {
    const res = await call('POST', '/admin/artifacts', {
      token: ADMIN_TOKEN,
      body: await artifactWithPattern('(.*a){1000}'),
    })
    expect(res.status).toBe(400)
    expect(res.json.error.code).toBe('invalid_artifact')
    expect(res.json.error.details).toContainEqual({
      path: 'runtime.extraction.prompt.pattern',
      message: expect.stringMatching(/compiles to 5002 RE2 instructions; at most 100/),
    })
    const accepted = await call('POST', '/admin/artifacts', {
      token: ADMIN_TOKEN,
      body: await artifactWithPattern('(.*a){19}'),
    })
    expect([200, 201]).toContain(accepted.status)
  })
})
