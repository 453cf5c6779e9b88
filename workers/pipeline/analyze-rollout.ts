import { runAnalyzer } from '../../src/agents/analyzer/index.ts'
import type { Analysis } from '../../src/schemas/agents.ts'
import { instanceName } from '../../durable-objects/names.ts'
import type { AnalysisInput } from '../../durable-objects/rubric-instance/index.ts'
import type { Env } from '../env.ts'
import { memoryFor } from '../memory/backends.ts'
import { MemoryStore } from '../memory/store.ts'
import type { AnalysisJob } from '../queues/messages.ts'
import { loadRunConfig } from '../runs/store.ts'
import { requestModels } from '../scoring/models.ts'
import { writeRecords } from '../scoring/persist.ts'

/**
 * The background half of `/score`: the Analyzer reads one recorded rollout, the analysis becomes a
 * memory document, and the instance marks it done. Idempotent: a redelivered job finds the analysis
 * done and does nothing; a failed one throws so the queue retries it (then dead-letters it).
 * @example await analyzeRollout(env, { type: 'analysis', runId: 'default', instanceId: 'global', step: 0, rolloutId: 'r1' })
 */
export async function analyzeRollout(env: Env, job: AnalysisJob): Promise<'analysed' | 'already_done' | 'gone'> {
  const config = await loadRunConfig(env.DB, job.runId)
  if (!config) return 'gone'
  const address = { runId: job.runId, instanceId: job.instanceId }
  const instance = env.RUBRIC_INSTANCE.getByName(instanceName(job.runId, job.instanceId))
  const input = (await instance.analysisInput(address, job.step, job.rolloutId)) as AnalysisInput | undefined
  if (!input) return 'gone'
  if (input.analysis_status === 'done') return 'already_done'
  const models = requestModels(env, config)
  const analyzer = models.forRole('analyzer')
  try {
    const analysis = await runAnalyzer(
      analyzer.model,
      { rollout: input.rollout, metadata: input.metadata, rubrics: input.rubrics, score: input.entry.score, criteria: input.entry.criteria, gradeMax: config.grade_max, locale: config.locale, prompts: config.prompts },
      { maxAttempts: analyzer.settings.max_attempts },
    )
    const id = await MemoryStore.documentId('analysis', job.runId, job.instanceId, job.step, job.rolloutId)
    await memoryFor(env, job.runId).put([{
      id,
      run_id: job.runId,
      instance_id: job.instanceId,
      kind: 'analysis',
      step: job.step,
      text: analysisText(job.rolloutId, input.entry.score, analysis),
      data: { subject: job.rolloutId, rollout_id: job.rolloutId, score: input.entry.score, metadata: input.metadata, analysis },
      created_at: new Date().toISOString(),
    }])
    await instance.recordAnalysis(job.step, job.rolloutId, { status: 'done', documentId: id, hacking: analysis.reward_hacking.flag })
    return 'analysed'
  } finally {
    await writeRecords(env.DB, [{ runId: job.runId, requestId: `analysis:${job.step}:${job.rolloutId}`, calls: models.calls }])
  }
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
