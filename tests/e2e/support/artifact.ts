import { artifactId, RmArtifactBody, type RmArtifact } from '../../../src/schemas/artifact.ts'

function rubric(rubricId: string, criteria: Array<[id: string, text: string, checkPoints: string[]]>) {
  return {
    rubric_id: rubricId,
    criteria: criteria.map(([id, text, checkPoints]) => ({
      criterion_id: id,
      text,
      weight: 1,
      criterion_type: null,
      check_points: checkPoints,
      positive_examples: [],
      negative_examples: [],
    })),
    grading_protocol: { grade_max: 10, allow_na: true, num_votes: 1 },
    metadata: {},
  }
}

/**
 * A small valid artifact on the mock backend: one rubric for `p_math`, and a `__default__` one.
 * @example const artifact = await buildArtifact()
 */
export async function buildArtifact(): Promise<RmArtifact> {
  const body = RmArtifactBody.parse({
    schema_version: '1.0',
    kind: 'rubric',
    created_at_utc: new Date().toISOString(),
    provenance: {
      source_run_id: 'e2e-search',
      source_session_id: 'e2e-session',
      dataset_sha256: '0'.repeat(64),
      config_hash: '1'.repeat(64),
      settings_hash: '2'.repeat(64),
      search_output_sha256: '3'.repeat(64),
    },
    rubrics: {
      p_math: rubric('r_math', [
        ['math_answer', 'States the answer 4.', ['4']],
        ['math_steps', 'Shows the step.', ['2 + 2']],
      ]),
      __default__: rubric('r_default', [['default_relevant', 'Answers the question asked.', []]]),
    },
    runtime: {
      backend: 'mock',
      verifier_model: 'mock-heuristic-1',
      temperature: 0,
      max_tokens: 512,
      seed: 11,
      locale: 'en',
      extraction: { prompt: { kind: 'identity' }, candidate: { kind: 'answer' } },
      grade_max: 10,
      allow_na: true,
      num_votes: 1,
    },
    scoring_policy: { score: 'weighted_mean_of_grades', normalization: { method: 'identity', range: [0, 1] } },
    compatibility: { artifact_type: 'rm', min_rm_api_version: '1.0' },
  })
  return { ...body, artifact_id: await artifactId(body) }
}
