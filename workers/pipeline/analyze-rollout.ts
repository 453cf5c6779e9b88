import { runAnalyzer } from '../../src/agents/analyzer/index.ts'
import type { Analysis } from '../../src/schemas/agents.ts'
import { instanceName } from '../../durable-objects/names.ts'
import type { AnalysisInput, InstanceAddress, RolloutKey } from '../../durable-objects/rubric-instance/index.ts'
import type { Env } from '../env.ts'
import { memoryFor } from '../memory/backends.ts'
import { MemoryStore } from '../memory/store.ts'
import type { MemoryDocument } from '../../src/schemas/memory.ts'
import { loadRunConfig } from '../runs/store.ts'
import { requestModels } from '../scoring/models.ts'
import { writeRecords } from '../scoring/persist.ts'
import { pLimit } from '../../src/llm/index.ts'

/** Workers allow 6 open connections per invocation. */
export const ANALYSES_IN_FLIGHT = 6

/** How one rollout's analysis ended: analysed now, analysed before (a redelivery), its rollout gone, or an error to retry. */
export type AnalysisJobResult = 'analysed' | 'already_done' | 'gone' | { error: unknown }

/**
 * The background half of `/score`, for rollouts of one run × instance: the Analyzer reads each recorded
 * rollout, the analyses become memory documents, and the instance marks them done — one Durable Object
 * read, one memory write and one DO write for them all. Idempotent: a redelivered rollout finds its
 * analysis done and does nothing; a failed one gets `{ error }` so the queue retries its job.
 * @example const [result] = await analyzeRollouts(env, { runId: 'default', instanceId: 'global' }, [{ step: 0, rollout_id: 'r1' }])
 */
export async function analyzeRollouts(env: Env, address: InstanceAddress, rollouts: readonly RolloutKey[], options: { inFlight?: ReturnType<typeof pLimit> } = {}): Promise<AnalysisJobResult[]> {
  const inFlight = options.inFlight ?? pLimit(ANALYSES_IN_FLIGHT)
  const [first] = rollouts
  if (!first) return []
  const { runId, instanceId } = address
  const config = await loadRunConfig(env.DB, runId)
  if (!config) return rollouts.map(() => 'gone')
  const instance = env.RUBRIC_INSTANCE.getByName(instanceName(runId, instanceId))
  const inputs = (await instance.analysisInputs(address, rollouts)) as AnalysisInput[]
  const inputOf = new Map(inputs.map((input) => [`${input.entry.step}\u0000${input.entry.rollout_id}`, input]))
  const models = requestModels(env, config)
  const analyzer = models.forRole('analyzer')
  const now = new Date().toISOString()
  try {
    const settled = await Promise.all(rollouts.map(async ({ step, rollout_id: rolloutId }): Promise<AnalysisJobResult | MemoryDocument> => {
      const input = inputOf.get(`${step}\u0000${rolloutId}`)
      if (!input) return 'gone'
      if (input.analysis_status === 'done') return 'already_done'
      try {
        const analysis = await inFlight(() => runAnalyzer(
          analyzer.model,
          { rollout: input.rollout, metadata: input.metadata, rubrics: input.rubrics, score: input.entry.score, criteria: input.entry.criteria, gradeMax: config.grade_max, locale: config.locale, prompts: config.prompts },
          { maxAttempts: analyzer.settings.max_attempts },
        ))
        return {
          id: await MemoryStore.documentId('analysis', runId, instanceId, step, rolloutId),
          run_id: runId,
          instance_id: instanceId,
          kind: 'analysis',
          step,
          text: analysisText(rolloutId, input.entry.score, analysis),
          data: { subject: rolloutId, rollout_id: rolloutId, score: input.entry.score, metadata: input.metadata, analysis },
          created_at: now,
        }
      } catch (error) {
        return { error }
      }
    }))
    const documents = settled.filter(isDocument)
    await memoryFor(env, runId).put(documents)
    await instance.recordAnalyses(documents.map((doc) => ({
      step: doc.step, rollout_id: doc.data.rollout_id as string, status: 'done', documentId: doc.id, hacking: (doc.data.analysis as Analysis).reward_hacking.flag,
    })))
    return settled.map((result) => (isDocument(result) ? 'analysed' : result))
  } finally {
    await writeRecords(env.DB, [{ runId, requestId: `analysis:${first.step}:${rollouts.map((key) => key.rollout_id).join(',')}`.slice(0, 200), calls: models.calls }])
  }
}

function isDocument(result: AnalysisJobResult | MemoryDocument): result is MemoryDocument {
  return typeof result === 'object' && 'id' in result
}

/** The text an analysis is remembered and searched by. */
function analysisText(rolloutId: string, score: number, analysis: Analysis): string {
  const hacking = analysis.reward_hacking
  return [
    `Rollout ${rolloutId} scored ${score.toFixed(2)}. ${analysis.overall_assessment}`,
    hacking.flag ? `Reward hacking (${hacking.severity}): ${hacking.tactics.join(', ')}. Evidence: ${hacking.evidence.join(' | ')}` : '',
    analysis.rubric_effectiveness ? `Rubrics: ${analysis.rubric_effectiveness}` : '',
    analysis.stage_performance ? `Stage: ${analysis.stage_performance}` : '',
    ...analysis.observations,
  ].filter(Boolean).join('\n')
}
