/** `reward-harness distill`: archived judged rollouts → denoised classifier-RM training data (see run.ts). */
export { readArchive, rubricKey, type ArchiveContents, type ArchiveSource } from './archive.ts'
export { MOCK_JUDGE, openJudge, parseJudgeSpec, type Judge, type JudgeSampling, type JudgeSpec } from './judges.ts'
export { runDistill, type DistillOptions } from './run.ts'
export { DistillSummary } from '../../src/schemas/index.ts'
export { formatDistillSummary, NOISE_BOUND } from './summary.ts'
