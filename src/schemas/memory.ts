import { z } from 'zod'

/**
 * What a memory document records: one rollout's analysis, a step's summary, a summary of summaries, or a rubric change.
 */
export const MemoryKind = z.enum(['analysis', 'batch_summary', 'meta_summary', 'rubric_update'])
export type MemoryKind = z.infer<typeof MemoryKind>

/**
 * One remembered item of a run, kept in D1 (the source of truth) and mirrored as a vector for retrieval.
 * Ids are at most 64 bytes because Vectorize refuses longer vector ids.
 * @example MemoryDocument.parse({ id: 'm-1', run_id: 'grpo-1', instance_id: 'global', kind: 'analysis', step: 3, text:
 *   'The answer skipped the check.', data: {}, created_at: '2026-01-01T00:00:00.000Z' })
 */
export const MemoryDocument = z.object({
  id: z.string().min(1).max(64),
  run_id: z.string().min(1).max(64),
  instance_id: z.string().min(1).max(128),
  kind: MemoryKind,
  step: z.number().int().nonnegative(),
  text: z.string().min(1).max(50_000),
  /** The structured form the text was rendered from (an analysis, a summary, a rubric diff). */
  data: z.record(z.string(), z.unknown()),
  created_at: z.string(),
})
export type MemoryDocument = z.infer<typeof MemoryDocument>

/**
 * Which memories a search may see: always one run, optionally one instance and some kinds.
 * @example MemoryScope.parse({ run_id: 'grpo-1', instance_id: 'in-3f1c', kinds: ['analysis'] })
 */
export const MemoryScope = z.object({
  run_id: z.string().min(1).max(64),
  instance_id: z.string().min(1).max(128).optional(),
  kinds: z.array(MemoryKind).min(1).optional(),
})
export type MemoryScope = z.infer<typeof MemoryScope>

/**
 * One semantic search over a run's memory.
 * @example MemoryQuery.parse({ run_id: 'grpo-1', text: 'answers that skip verification', top_k: 5 })
 * @internal
 */
export const MemoryQuery = MemoryScope.extend({
  text: z.string().min(1).max(10_000),
  top_k: z.number().int().min(1).max(100),
})
export type MemoryQuery = z.infer<typeof MemoryQuery>

/**
 * A document found by a search, with its cosine similarity to the query (−1…1, higher is closer).
 * @example const hit: MemoryHit = { document_id: 'm-1', score: 0.82, kind: 'analysis', step: 3, instance_id: 'global' }
 */
export const MemoryHit = z.object({
  document_id: z.string(),
  score: z.number(),
  kind: MemoryKind,
  step: z.number().int().nonnegative(),
  instance_id: z.string(),
})
export type MemoryHit = z.infer<typeof MemoryHit>
