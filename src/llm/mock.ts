import type { AgentTask, ChatModel, ChatRequest, ChatResponse } from './types.ts'

const STOP_WORDS = new Set(
  'a an the and or but of to in on at for with by is are was were be been it this that these those as from what which who how why when where do does did can should would will not no yes'.split(' '),
)

/**
 * The offline default backend: deterministic heuristics, not a judge. It answers each agent's task
 * in the same JSON a real model is asked for, so every parsing path runs exactly as in production.
 * Scoring heuristic: overlap with the reference answer (when given), with the rubric's own words,
 * and with the prompt, plus an adequacy term for length.
 * @example const model = new MockChatModel(); await model.complete(request)
 */
export class MockChatModel implements ChatModel {
  readonly id: string
  constructor(readonly model = 'mock-heuristic-1') {
    this.id = `mock:${model}`
  }

  async complete(request: ChatRequest): Promise<ChatResponse> {
    const text = JSON.stringify(answerTask(request.task))
    const promptChars = request.messages.reduce((sum, message) => sum + message.content.length, 0)
    return { text, model: this.model, usage: { prompt_tokens: Math.ceil(promptChars / 4), completion_tokens: Math.ceil(text.length / 4) } }
  }
}

function answerTask(task: AgentTask): unknown {
  switch (task.kind) {
    case 'score':
      return { grades: task.rubrics.map((rubric) => ({ rubric_id: rubric.id, ...gradeHeuristically(rubric.text, task.rollout, task.grade_max) })) }
  }
}

function gradeHeuristically(rubricText: string, rollout: { id: string; input: string; output: string; supplemental_context?: string | null }, gradeMax: number) {
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

function contentWords(text: string): Set<string> {
  return new Set((text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter((word) => !STOP_WORDS.has(word)))
}

/** Share of `wanted` words present in `found`. */
function overlap(wanted: Set<string>, found: Set<string>): number {
  if (wanted.size === 0) return 0
  let hits = 0
  for (const word of wanted) if (found.has(word)) hits++
  return hits / wanted.size
}
