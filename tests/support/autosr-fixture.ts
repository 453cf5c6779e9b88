import { createHash } from 'node:crypto'

/** A credential planted in the fixture: it must never reach an output file, stdout or stderr. */
export const SECRET = 'sk-or-v1-planted-secret-0123456789'

/**
 * An autosr artifact as autosr's rm.export writes it (reference autosr.md §1.2, §1.6), with API keys planted where a
 * careless export or a hand edit could leave them; a fresh copy on every call, for a test to edit.
 * @example const fixture = autosrFixture(); fixture.runtime_snapshot.seed = 1.5
 */
export function autosrFixture(): any {
  const protocol = { output_format: 'json', allow_na: true, num_votes: 3, vote_method: 'majority', strict_json: true }
  return {
    schema_version: '1.0',
    artifact_id: 'rm_20260222T120000_123456Z',
    created_at_utc: '2026-02-22T12:00:00.123456+00:00',
    source_session_id: '20260222_115500_000001',
    source_run_id: '20260222T115500_000001Z',
    dataset_hash: createHash('sha256').update('dataset').digest('hex'),
    config_hash: createHash('sha256').update('config').digest('hex'),
    api_key: SECRET,
    rubric: {
      p_trains: {
        rubric_id: 'p_trains_r0_raise_bar_4821',
        criteria: [
          {
            criterion_id: 'task_fit',
            text: 'Answers the question asked; for high scores, require verifiable details or concrete evidence.',
            weight: 0.42,
            criterion_type: 'factual',
            check_points: ['trains', 'speed', 'meet'],
            positive_examples: [],
            negative_examples: [],
          },
          {
            criterion_id: 'structure',
            text: 'Lays the working out in order.',
            weight: 0.25,
            criterion_type: 'format',
            check_points: ['first', 'second', '1.', '2.'],
            positive_examples: ['First, … Second, …'],
            negative_examples: [],
          },
          {
            criterion_id: 'completeness',
            text: 'Covers every part of the question.',
            weight: 0.33,
            criterion_type: 'Completeness',
            check_points: [],
            positive_examples: [],
            negative_examples: [],
          },
        ],
        grading_protocol: protocol,
        metadata: { origin: 'heuristic_initializer' },
      },
      p_brief: {
        rubric_id: 'p_brief_llm_init_77',
        criteria: [
          { criterion_id: 'claims', text: 'Backs every claim with a source.', weight: 2, criterion_type: 'Reasoning' },
          {
            criterion_id: 'no_fluff',
            text: 'No filler.',
            weight: 1,
            criterion_type: null,
            negative_examples: ['in conclusion', 'as an ai language model'],
          },
        ],
        grading_protocol: protocol,
        metadata: { origin: 'llm_initializer', provider: { name: 'openrouter', OPENROUTER_API_KEY: SECRET } },
      },
    },
    scoring_policy: { policy_version: '1.0', objective: {}, search: { mode: 'evolutionary' }, score_key: 'x' },
    normalization: { method: 'identity', score_range: [0.0, 1.0] },
    compatibility: { artifact_type: 'rm', min_rm_api_version: '1.0', output_schema: 'reward_score_v1' },
    runtime_snapshot: {
      seed: 11,
      extraction: { strategy: 'tag', tag_name: 'content', pattern: null, join_separator: '\n' },
      candidate_extraction: { strategy: 'answer', join_separator: '\n\n' },
      llm: {
        base_url: 'https://openrouter.ai/api/v1',
        timeout: 30.0,
        max_retries: 2,
        retry_backoff_base: 0.5,
        retry_backoff_max: 8.0,
        retry_jitter: 0.2,
        fail_soft: false,
        default_model: 'stepfun/step-3.5-flash:free',
        verifier_model: 'qwen/qwen3-8b',
        prompt_language: 'zh',
        api_key: SECRET,
      },
    },
  }
}
