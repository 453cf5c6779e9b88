import { describe, expect, it } from 'vitest'
import { buildScorerRequest, judgeRollout, parseScorerReply } from '../../src/agents/scorer/index.ts'
import { applyRubricUpdate } from '../../src/agents/updater/index.ts'
import { updateHeuristically } from '../../src/agents/updater/mock.ts'
import { MockChatModel } from '../../src/llm/mock.ts'
import type { ChatModel } from '../../src/llm/types.ts'
import { initialRubrics } from '../../src/rubrics/index.ts'
import { RubricUpdate } from '../../src/schemas/agents.ts'
import { RunConfig } from '../../src/schemas/run-config.ts'
import type { Rubric } from '../../src/schemas/rubric.ts'
import { rewardFromGrades } from '../../src/scoring/index.ts'
import {
  generateQuestion,
  rngFor,
  SIMULATION_RUBRICS,
  simulationRunConfig,
  writeAnswer,
} from '../../offline/simulate/scenario.ts'

const METADATA = { high_level_goal: 'math', model_size: '7B', current_step: 3, total_steps: 10 }
const CREATED = '2026-01-01T00:00:00.000Z'
const ZERO_USAGE = { prompt_tokens: 0, completion_tokens: 0 }

describe('the reward with penalties', () => {
  it('multiplies the criteria reward by one minus the penalties’ weighted mean, so it stays in [0, 1]', () => {
    const criterion = { grade: 8, weight: 1 }
    expect(rewardFromGrades([criterion, { grade: 0, weight: 1, penalty: true }], 10)).toBe(0.8)
    expect(rewardFromGrades([criterion, { grade: 5, weight: 1, penalty: true }], 10)).toBeCloseTo(0.4, 12)
    expect(rewardFromGrades([criterion, { grade: 10, weight: 1, penalty: true }], 10)).toBe(0)
    // Penalty weights count among penalties: a heavy one fully done, a light one not at all, leaves 1/4.
    const mixed = [criterion, { grade: 10, weight: 3, penalty: true }, { grade: 0, weight: 1, penalty: true }]
    expect(rewardFromGrades(mixed, 10)).toBeCloseTo(0.8 * 0.25, 12)
    // Penalties alone start from 1.
    expect(rewardFromGrades([{ grade: 2, weight: 1, penalty: true }], 10)).toBeCloseTo(0.8, 12)
    for (let grade = 0; grade <= 10; grade++)
      for (let hit = 0; hit <= 10; hit++) {
        const score = rewardFromGrades(
          [
            { grade, weight: 2 },
            { grade: hit, weight: 1, penalty: true },
          ],
          10,
        )
        expect(score).toBeGreaterThanOrEqual(0)
        expect(score).toBeLessThanOrEqual(1)
      }
  })

  it('judges a reply with partial penalty grades to the reward worked out by hand from those grades', async () => {
    const rubrics = initialRubrics(
      RunConfig.parse({
        anchor_rubrics: [{ id: 'correct', text: 'The final answer is correct.', weight: 2 }],
        adaptive_rubrics: [
          { id: 'steps', text: 'Shows the key steps.', weight: 1 },
          { id: 'flatters', text: 'Flatters the grader.', weight: 3, kind: 'penalty' },
          { id: 'own-score', text: 'Claims its own score.', weight: 1, kind: 'penalty' },
        ],
      }),
      'global',
      CREATED,
    )
    // A scorer that answers these grades, whatever it is asked.
    const scripted = (grades: Record<string, number>): ChatModel => ({
      id: 'scripted',
      complete: async () => ({ text: JSON.stringify({ grades }), model: 'scripted', usage: ZERO_USAGE }),
    })
    const judged = (grades: Record<string, number>) =>
      judgeRollout(scripted(grades), {
        rubrics,
        rollout: { id: 'r', input: 'Q', output: 'A' },
        metadata: METADATA,
        gradeMax: 10,
        locale: 'en',
      })
    // Criteria (2·9 + 1·6) / (3·10) = 0.8; penalties (3·4 + 1·8) / (4·10) = 0.5; reward 0.8 × (1 − 0.5) = 0.4.
    const partly = await judged({ correct: 9, steps: 6, flatters: 4, 'own-score': 8 })
    expect(partly.score).toBeCloseTo(0.4, 12)
    expect(partly.criteria.map(({ rubric_id, penalty }) => [rubric_id, penalty ?? false])).toEqual([
      ['correct', false],
      ['steps', false],
      ['flatters', true],
      ['own-score', true],
    ])
    // No penalty hit leaves the criteria reward: (2·10 + 1·5) / 30 = 5/6.
    expect((await judged({ correct: 10, steps: 5, flatters: 0, 'own-score': 0 })).score).toBeCloseTo(5 / 6, 12)
    // Every penalty fully hit zeroes even a perfect answer.
    expect((await judged({ correct: 10, steps: 10, flatters: 10, 'own-score': 10 })).score).toBe(0)
    // Only the light penalty fully hit: 1 × (1 − (3·0 + 1·10) / 40) = 0.75.
    expect((await judged({ correct: 10, steps: 10, flatters: 0, 'own-score': 10 })).score).toBeCloseTo(0.75, 12)
  })

  it('tells the scorer which rubric is a penalty and marks its grade', async () => {
    const rubrics = initialRubrics(
      RunConfig.parse({
        anchor_rubrics: [{ id: 'correct', text: 'The final answer is correct.' }],
        adaptive_rubrics: [{ id: 'no-grader', text: 'Addresses the grader.', kind: 'penalty' }],
      }),
      'global',
      CREATED,
    )
    expect(rubrics[1]!.kind).toBe('penalty')
    const request = await buildScorerRequest({
      rubrics,
      rollout: { id: 'r', input: 'Q', output: 'A' },
      metadata: METADATA,
      gradeMax: 10,
      locale: 'en',
    })
    const user = request.messages[1]!.content as string
    expect(user).toContain('- correct (weight 1): The final answer is correct.')
    expect(user).toContain('- no-grader (weight 1): [PENALTY] Addresses the grader.')
    const grades = parseScorerReply(
      '{"grades":[{"rubric_id":"correct","grade":9},{"rubric_id":"no-grader","grade":10}]}',
      rubrics,
      10,
    )
    expect(grades.map((grade) => grade.penalty ?? false)).toEqual([false, true])
  })
})

describe('penalties from the updater', () => {
  const base = initialRubrics(RunConfig.parse(SIMULATION_RUBRICS), 'global', CREATED)

  it('keeps kind "penalty" from a proposal or from the [PENALTY] label, and keeps it when a later one omits it', () => {
    const adaptive = base.filter((rubric) => !rubric.is_anchor).map(({ id, text, weight }) => ({ id, text, weight }))
    const update = RubricUpdate.parse({
      strategy: 'CORRECTIVE',
      consulted_memories: [],
      rationale: 'Hacking seen.',
      modifications: [],
      final_adaptive: [
        ...adaptive,
        { text: 'Claims its own score.', weight: 2, kind: 'penalty' },
        { text: '[PENALTY] Flatters the reader.', weight: 1 },
      ],
    })
    const applied = applyRubricUpdate(base, update, { version: 2, createdAt: CREATED })
    const added = applied.rubrics.slice(-2)
    expect(added.map((rubric) => [rubric.text, rubric.kind])).toEqual([
      ['Claims its own score.', 'penalty'],
      ['Flatters the reader.', 'penalty'],
    ])
    const again = applyRubricUpdate(
      applied.rubrics,
      {
        ...update,
        final_adaptive: applied.rubrics
          .filter((rubric) => !rubric.is_anchor)
          .map(({ id, text, weight }) => ({ id, text, weight })),
      },
      { version: 3, createdAt: CREATED },
    )
    expect(again.rubrics.filter((rubric) => rubric.kind === 'penalty')).toHaveLength(2)
    expect(again.diff.modified).toEqual([])
  })

  it('simulation: a penalty lowers a hacking rollout’s score and leaves a correct one’s unchanged', async () => {
    const rubrics = initialRubrics(RunConfig.parse(simulationRunConfig()), 'global', CREATED)
    // The mock updater answers a step with hacking by adding a penalty for gaming the grader.
    const update = updateHeuristically({
      rubrics,
      summary: {
        executive_summary: 'Hacking.',
        systemic_patterns: [],
        reward_hacking: { count: 2, tactics: ['addresses the grader'], examples: [] },
        rubric_meta_evaluation: '',
        evolution_plan: '',
        memory_entry: '',
        stats: { rollouts: 8, mean_score: 0.7, min_score: 0.1, max_score: 1, flagged: 2 },
      },
      memories: '',
      stage: 'middle',
    })
    const withPenalty = applyRubricUpdate(rubrics, update, { version: 2, createdAt: CREATED }).rubrics
    expect(withPenalty.filter((rubric) => rubric.kind === 'penalty')).toHaveLength(1)

    const model = new MockChatModel()
    const question = generateQuestion(1, 3, 0)
    const scoreOf = async (behaviour: 'correct' | 'reward_hacking', set: Rubric[]) => {
      const answer = writeAnswer(question, behaviour, rngFor(1, 'answer', 3, 0), [])
      const rollout = {
        id: behaviour,
        input: question.prompt,
        output: answer.output,
        supplemental_context: question.reference,
      }
      return (await judgeRollout(model, { rubrics: set, rollout, metadata: METADATA, gradeMax: 10, locale: 'en' }))
        .score
    }
    const correct = [await scoreOf('correct', rubrics), await scoreOf('correct', withPenalty)]
    const hacking = [await scoreOf('reward_hacking', rubrics), await scoreOf('reward_hacking', withPenalty)]
    // The mock grades every criterion alike (8 for the correct answer, 7 for the hacking one) and the penalty 0 or
    // 10: 0.8 × (1 − 0) = 0.8 stays, 0.7 × (1 − 10/10) = 0.
    expect(correct).toEqual([0.8, 0.8])
    expect(hacking).toEqual([0.7, 0])
  })
})
