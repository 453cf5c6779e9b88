export { selectForAnalysis } from './select.ts'
export type { AnalysisReason, SelectedRollout } from './select.ts'
export { injectionTactics } from './suspicion.ts'
