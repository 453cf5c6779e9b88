export { InstanceId, Rollout, TrainingMetadata, ScoreRequest } from './rollout.ts'
export type { RolloutInput } from './rollout.ts'
export { Trajectory, TrajectoryMessage, MAX_TRAJECTORY_CHARS, MAX_TRAJECTORY_MESSAGES } from './trajectory.ts'
export { Rubric, RubricSeed, RubricSnapshot } from './rubric.ts'
export { CriterionGrade, ScoreResult, gradeScale } from './score.ts'
export { AGENT_ROLES, AgentSettings, RunConfig, CreateRunRequest, agentSettingsFor } from './run-config.ts'
export type { AgentRole, PartialAgentSettings, RunConfigInput } from './run-config.ts'
export { AnalysisReasonCounts, RubricStatus, StepStatus, StepUpdateOutcome } from './status.ts'
export { BenchAccuracy, BenchFailure, BenchMetrics, BenchReport, TIE_POLICIES } from './bench-report.ts'
export type { TiePolicy } from './bench-report.ts'
export {
  EVOLVE_DECISIONS,
  EvolutionLogEntry,
  EvolveRoleUsage,
  EvolveSettings,
  JUDGE_ORDERS,
  ToolCheckRecord,
} from './evolution-log.ts'
export type { EvolveDecision, JudgeOrders } from './evolution-log.ts'
export { BestRubricRecord, SearchOutputFile } from './search-output.ts'
export { DistillSummary } from './distill-summary.ts'
