import { z } from 'zod'
import { Trajectory, taskText, trajectoryText } from './trajectory.ts'

const RolloutFields = z.object({
  id: z.string().min(1).max(256),
  input: z.string().max(200_000).optional(),
  output: z.string().max(200_000).optional(),
  /** Reference answer or grading notes; shown to the judge as data, never as instructions. */
  supplemental_context: z.string().max(200_000).nullish(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
  /**
   * The whole conversation, OpenAI-style (tool calls, tool results, reasoning): the judge reads who said what. Without
   * `input`/`output`, they are derived from it: the task turns, and the rest as text (`trajectoryText`).
   */
  messages: Trajectory.optional(),
})

/**
 * One policy sample to be judged: the prompt it answered and the answer it gave (`input`, `output`), or the whole
 * trajectory (`messages`), or both.
 * @example Rollout.parse({ id: 'r1', input: 'What is 2+2?', output: '4', supplemental_context: '4' })
 */
export const Rollout = RolloutFields.superRefine((rollout, ctx) => {
  if (rollout.messages) return
  for (const field of ['input', 'output'] as const)
    if (rollout[field] === undefined)
      ctx.addIssue({ code: 'custom', path: [field], message: `${field} is required unless the rollout has messages` })
}).transform(({ input, output, messages, ...rest }) => ({
  ...rest,
  input: input ?? taskText(messages ?? []),
  output: output ?? trajectoryText(messages ?? []),
  ...(messages ? { messages } : {}),
}))
export type Rollout = z.infer<typeof Rollout>
/** A rollout as a client sends it: `input`/`output`, `messages`, or both. */
export type RolloutInput = z.input<typeof Rollout>

/**
 * Most bytes a rollout and its training metadata may take as the ledger stores them (JSON, UTF-8, escapes included):
 * a Durable Object's SQLite row holds 2 MB, and the rest of the row (its grades, hashes, model) needs room. The
 * schema's character limits allow more once control characters are escaped (one becomes six bytes), so this is
 * checked on its own: a rollout over it is a 413 that names it, and nothing of it is judged or recorded.
 */
export const STORED_ROLLOUT_MAX_BYTES = 1_500_000

/**
 * The bytes a rollout and its metadata take as the ledger stores them: what {@link STORED_ROLLOUT_MAX_BYTES} bounds.
 * @example storedRolloutBytes({ rollout: { id: 'r', input: '', output: '\u0001' }, metadata: {} }) // 41 (escape: 6)
 */
export function storedRolloutBytes(request: { rollout: Rollout; metadata: unknown }): number {
  const encoder = new TextEncoder()
  return (
    encoder.encode(JSON.stringify(request.rollout)).byteLength +
    encoder.encode(JSON.stringify(request.metadata)).byteLength
  )
}

/**
 * Where the trainer is: the judge weighs an answer differently at step 5 of 1000 than at step 900.
 * @example TrainingMetadata.parse({ high_level_goal: 'math', model_size: '7B', current_step: 0, total_steps: 10 })
 */
export const TrainingMetadata = z.object({
  high_level_goal: z.string().max(10_000),
  model_size: z.string().max(200),
  current_step: z.number().int().nonnegative(),
  total_steps: z.number().int().positive(),
  other_context: z.string().max(50_000).nullish(),
})
export type TrainingMetadata = z.infer<typeof TrainingMetadata>

/**
 * An instance id as clients may send it: the body of `/score`, and the `instance_id` query of the read routes.
 * @example InstanceId.parse('q-17')
 */
export const InstanceId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[\w.:-]+$/, 'letters, digits, and . _ : - only')

/**
 * The body of `POST /score`.
 * @example ScoreRequest.parse({ rollout, metadata, instance_id: 'q-17' })
 */
export const ScoreRequest = z.object({
  rollout: Rollout,
  metadata: TrainingMetadata,
  instance_id: InstanceId.optional(),
})
export type ScoreRequest = z.infer<typeof ScoreRequest>
