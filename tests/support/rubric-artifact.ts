import { artifactId, RmArtifactBody, type RmArtifact } from '../../src/schemas/artifact.ts'

/** One criterion of the artifact's `__default__` rubric: id, text, and any field to set beside them. */
type CriterionSpec = [id: string, text: string, extra?: Record<string, unknown>]

/**
 * A rubric artifact's body as `export` writes it, unparsed, on the mock backend, whose `__default__` rubric holds one
 * criterion per `[id, text, extra?]`; `note` makes otherwise equal artifacts distinct.
 * @example const body = rubricArtifactBody([['relevant', 'Answers the question asked.']], 'bad-input')
 */
export function rubricArtifactBody(criteria: CriterionSpec[], note = 'base') {
  return {
    schema_version: '1.0',
    kind: 'rubric',
    created_at_utc: '2026-11-22T08:00:00.000Z',
    provenance: {
      source_run_id: `search-${note}`,
      source_session_id: `session-${note}`,
      dataset_sha256: 'a'.repeat(64),
      config_hash: 'b'.repeat(64),
      settings_hash: 'c'.repeat(64),
      search_output_sha256: 'd'.repeat(64),
    },
    rubrics: {
      __default__: {
        rubric_id: 'r_default',
        criteria: criteria.map(([criterion_id, text, extra]) => ({
          criterion_id,
          text,
          weight: 1,
          criterion_type: null,
          check_points: [],
          positive_examples: [],
          negative_examples: [],
          ...extra,
        })),
        grading_protocol: { grade_max: 10, allow_na: true, num_votes: 1 },
        metadata: {},
      },
    },
    runtime: {
      backend: 'mock',
      verifier_model: 'mock-heuristic-1',
      temperature: 0,
      max_tokens: 1024,
      seed: 7,
      locale: 'en',
      extraction: { prompt: { kind: 'identity' }, candidate: { kind: 'answer' } },
      grade_max: 10,
      allow_na: true,
      num_votes: 1,
    },
    scoring_policy: { score: 'weighted_mean_of_grades', normalization: { method: 'identity', range: [0, 1] } },
    compatibility: { artifact_type: 'rm', min_rm_api_version: '1.0' },
  }
}

/**
 * A rubric artifact as `export` writes it, content-addressed ({@link rubricArtifactBody}).
 * @example const artifact = await makeRubricArtifact([['searched', 'Calls the search tool before answering.']])
 */
export async function makeRubricArtifact(criteria: CriterionSpec[], note = 'base'): Promise<RmArtifact> {
  const body = RmArtifactBody.parse(rubricArtifactBody(criteria, note))
  return { ...body, artifact_id: await artifactId(body) } as RmArtifact
}
