/** `reward-harness distill`: archived judged rollouts → denoised classifier-RM training data (see run.ts). */
export { parseJudgeSpec } from './judges.ts'

export { runDistill } from './run.ts'

export { formatDistillSummary } from './summary.ts'
