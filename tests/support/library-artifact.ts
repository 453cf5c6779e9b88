import { entryHash, type LibraryEntry } from '../../src/library/index.ts'
import { artifactId, LibraryArtifactBody, type LibraryArtifact } from '../../src/schemas/artifact.ts'

/**
 * A library artifact as `export --library` writes it, content-addressed: the mock backend unless `runtime` says
 * otherwise (e.g. `{ backend: 'openai', model: 'stub-vlm' }` for a stub LLM server).
 * @example const artifact = await makeLibraryArtifact([skill], { note: 'base' })
 */
export async function makeLibraryArtifact(
  entries: LibraryEntry[],
  options: { note?: string; runtime?: Record<string, unknown> } = {},
): Promise<LibraryArtifact> {
  const body = LibraryArtifactBody.parse({
    schema_version: '1.0',
    kind: 'library',
    created_at_utc: '2026-11-22T08:00:00.000Z',
    entries: await Promise.all(entries.map(async (entry) => ({ ...entry, sha256: await entryHash(entry) }))),
    provenance: {
      library_id: `lib-${options.note ?? 'base'}`,
      registry_sha256: 'e'.repeat(64),
      library_sha256: 'f'.repeat(64),
      evolution_log_sha256: null,
      best_iteration: 1,
      best_val_accuracy: 0.75,
      iterations: 2,
      dataset_sha256: 'a'.repeat(64),
    },
    runtime: {
      backend: 'mock',
      model: 'mock-heuristic-1',
      locale: 'en',
      temperature: 0,
      max_tokens: 2048,
      seed: 42,
      max_tool_calls: 3,
      ...options.runtime,
    },
    scoring_policy: {
      score: 'pairwise_win_rate_vs_reference',
      orders: 'both',
      outcome_values: { win: 1, tie: 0.5, loss: 0 },
      normalization: { method: 'identity', range: [0, 1] },
    },
    compatibility: { artifact_type: 'rm', min_rm_api_version: '1.0' },
  })
  return { ...body, artifact_id: await artifactId(body) }
}
