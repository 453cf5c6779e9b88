export { ANALYSIS_REASONS, selectForAnalysis, suspicions } from './select.ts'
export type { AnalysisBudget, AnalysisCandidate, AnalysisReason, SelectedRollout } from './select.ts'
export { GRADER_PATTERNS, TACTIC, injectionTactics } from './suspicion.ts'
