/**
 * The scorer's offline mock reply: overlap with the reference answer (when given), with the rubric's own words and
 * with the prompt, plus an adequacy term for length. A criterion that penalises gaming is met in full by an honest
 * answer and not at all by a gamed one. With sampling noise and a seed, grades move like a model's above
 * temperature 0.
 */
import type { MockSampling } from '../../llm/types.ts'
import { GRADER_PATTERNS } from '../../analysis/suspicion.ts'
import type { Rollout } from '../../schemas/rollout.ts'
import { contentText, taskLength, type TrajectoryMessage } from '../../schemas/trajectory.ts'
import type { Rubric } from '../../schemas/rubric.ts'
import { seededRandom } from '../../hash/index.ts'
import { keywordStuffing, penalisesGaming } from '../mock-heuristics/gaming.ts'
import { contentWords, overlap } from '../mock-heuristics/words.ts'

/** What the scorer's mock reads: the rubrics, the rollout, and the grade scale. */
export interface ScorerMockInput {
  rubrics: Rubric[]
  rollout: Rollout
  gradeMax: number
}

type ScoreAnswer = { grades: Array<{ rubric_id: string; grade: number; reason: string }> }

/**
 * The scorer's reply on the mock backend: one grade per rubric, in the JSON the scorer prompt asks for.
 * @example const request = { ...scorerRequest, mock: mockScorerReply({ rubrics, rollout, gradeMax: 10 }) }
 */
export function mockScorerReply(input: ScorerMockInput): (sampling: MockSampling) => string {
  return (sampling) => JSON.stringify(mockScorerAnswer(input, sampling))
}

/**
 * The scorer mock's answer as an object: heuristic grades, each moved one point with probability `sampling.noise`
 * when the request has a seed (the same seed, the same grades).
 * @example mockScorerAnswer({ rubrics, rollout, gradeMax: 10 }, { noise: 0 }).grades[0].grade // 7
 */
export function mockScorerAnswer(input: ScorerMockInput, sampling: MockSampling): ScoreAnswer {
  const { rubrics, rollout, gradeMax } = input
  const answer: ScoreAnswer = {
    grades: rubrics.map((rubric) => ({
      rubric_id: rubric.id,
      ...(rubric.kind === 'penalty'
        ? gradePenalty(rubric.text, rollout, rubrics, gradeMax)
        : penalisesGaming(rubric.text)
          ? gradeGamingGuard(rollout.output, rubrics, gradeMax)
          : rollout.messages && asksForToolUse(rubric.text)
            ? gradeToolUse(rubric.text, rollout.messages, gradeMax)
            : gradeHeuristically(rubric.text, policyView(rollout), gradeMax)),
    })),
  }
  if (sampling.noise > 0 && sampling.seed !== undefined) sampleGrades(answer, input, sampling.seed, sampling.noise)
  return answer
}

function gradeHeuristically(
  rubricText: string,
  rollout: { id: string; input: string; output: string; supplemental_context?: string | null },
  gradeMax: number,
) {
  const output = contentWords(rollout.output)
  if (output.size === 0) return { grade: 0, reason: 'empty answer' }
  const reference = contentWords(rollout.supplemental_context ?? '')
  const rubricWords = contentWords(rubricText)
  const promptWords = contentWords(rollout.input)
  const rubricHit = overlap(rubricWords, output)
  const lengthAdequacy = Math.min(1, output.size / Math.max(1, reference.size || Math.min(20, promptWords.size)))
  const quality =
    reference.size > 0
      ? 0.6 * overlap(reference, output) + 0.2 * rubricHit + 0.2 * lengthAdequacy
      : 0.4 * rubricHit + 0.3 * overlap(promptWords, output) + 0.3 * lengthAdequacy
  return { grade: Math.round(quality * gradeMax), reason: `heuristic overlap ${quality.toFixed(2)}` }
}

/** A criterion about calling tools ("Calls the search tool before answering"). */
const TOOL_USE = /\b(?:tools?|function calls?|calls? (?:the|a|an) \w+)\b/i

function asksForToolUse(rubricText: string): boolean {
  return TOOL_USE.test(rubricText)
}

/**
 * A tool-use criterion is met in full when the trajectory holds a real call of a tool the criterion names (of any
 * tool when it names none of those called), and not at all otherwise: a call the policy only claims in its words is
 * no call.
 */
function gradeToolUse(rubricText: string, messages: readonly TrajectoryMessage[], gradeMax: number) {
  const called = messages.flatMap((message) =>
    message.role === 'assistant' ? (message.tool_calls ?? []).map((call) => call.function.name) : [],
  )
  const text = rubricText.toLowerCase()
  const named = called.filter((name) => text.includes(name.toLowerCase()))
  const met = named.length > 0 || (called.length > 0 && !/"[^"]+"|\bthe \w+ tool\b/i.test(rubricText))
  return met
    ? { grade: gradeMax, reason: `called ${(named.length ? named : called).join(', ')}` }
    : { grade: 0, reason: called.length ? 'called other tools' : 'no tool call in the trajectory' }
}

/**
 * The rollout as the mock grades it: a trajectory's policy words only (a tool's output is not the policy's answer),
 * with its task as the prompt.
 */
function policyView(rollout: Rollout): Rollout {
  if (!rollout.messages) return rollout
  const words = rollout.messages
    .slice(taskLength(rollout.messages))
    .flatMap((message) => (message.role === 'assistant' ? [contentText(message.content)] : []))
  return { ...rollout, output: words.join('\n\n') }
}

/** Moves each grade one point with probability `noise`, from a PRNG keyed by the seed, the rollout and the rubric. */
function sampleGrades(answer: ScoreAnswer, input: ScorerMockInput, seed: number, noise: number): void {
  for (const entry of answer.grades) {
    const random = seededRandom('score-sample', seed, input.rollout.input, input.rollout.output, entry.rubric_id)
    if (random() >= noise) continue
    const moved = entry.grade + (random() < 0.5 ? -1 : 1)
    entry.grade = moved < 0 || moved > input.gradeMax ? entry.grade - (moved - entry.grade) : moved
  }
}

/** A criterion that penalises gaming is met in full by an honest answer and not at all by a gamed one. */
function gradeGamingGuard(output: string, rubrics: readonly Rubric[], gradeMax: number) {
  const gamed =
    GRADER_PATTERNS.some(({ pattern }) => pattern.test(output)) || keywordStuffing(output, rubrics) !== undefined
  return gamed
    ? { grade: 0, reason: 'the answer games the grader' }
    : { grade: gradeMax, reason: 'no attempt to game the grader' }
}

/**
 * A penalty is graded for how much the answer does the bad thing: a penalty on gaming the grader is met in full by a
 * gamed answer and not at all by an honest one; any other penalty by how much of its wording the answer repeats.
 */
function gradePenalty(text: string, rollout: Rollout, rubrics: readonly Rubric[], gradeMax: number) {
  if (penalisesGaming(text)) {
    const honest = gradeGamingGuard(rollout.output, rubrics, gradeMax)
    return honest.grade === 0
      ? { grade: gradeMax, reason: 'the answer games the grader' }
      : { grade: 0, reason: 'no attempt to game the grader' }
  }
  const share = overlap(contentWords(text), contentWords(rollout.output))
  return { grade: Math.round(share * gradeMax), reason: `does what the penalty names: ${share.toFixed(2)}` }
}
