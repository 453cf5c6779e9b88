import type { Rubric } from '../../src/schemas/rubric.ts'

/**
 * A rubric as the edge stores it, version 1 of 2026-01-01, weight 1, adaptive unless `extra` says otherwise.
 * @example rubric('a1', 'The final answer is correct.', { weight: 2, is_anchor: true })
 */
export function rubric(id: string, text = `Criterion ${id}.`, extra: Partial<Rubric> = {}): Rubric {
  return {
    id,
    text,
    weight: 1,
    is_anchor: false,
    version: 1,
    created_at: '2026-01-01T00:00:00.000Z',
    metadata: {},
    ...extra,
  }
}

/**
 * An updater's reply that adds one criterion ("Names the unit.") to an adaptive `d-steps` whose text is `steps`: what
 * the Worker tests' held updaters answer once released.
 * @example fakeEndpoint('held', async () => { await held; return unitUpdate('Shows the key steps.') })
 */
export function unitUpdate(steps: string): string {
  return JSON.stringify({
    strategy: 'ADVANCEMENT',
    consulted_memories: [],
    rationale: 'Ask for units.',
    modifications: [{ op: 'add', text: 'Names the unit.', weight: 1, reason: 'next step' }],
    final_adaptive: [
      { id: 'd-steps', text: steps, weight: 1 },
      { text: 'Names the unit.', weight: 1 },
    ],
  })
}

/** An analyzer's reply that flags nothing: a plain answer, no reward hacking. */
export const PLAIN_ANALYSIS = JSON.stringify({
  overall_assessment: 'A plain answer.',
  stage_performance: 'as expected',
  advancement_strategy: 'keep going',
  rubric_effectiveness: 'fine',
  observations: ['plain'],
  reward_hacking: { flag: false, evidence: [], severity: 'none', tactics: [] },
})
