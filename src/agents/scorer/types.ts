import type { PromptOverrides, Locale } from '../../prompts/index.ts'
import type { Rollout, TrainingMetadata } from '../../schemas/rollout.ts'
import type { Rubric } from '../../schemas/rubric.ts'
import type { CriterionGrade } from '../../schemas/score.ts'

/** What the scorer writes per criterion besides its grade: nothing, or one short sentence. */
export type ScorerReasons = 'none' | 'short'

export interface ScorerInput {
  /** The run's prompt overrides, keyed `<locale>/<name>` (see RunConfig.prompts). */
  prompts?: PromptOverrides
  rubrics: Rubric[]
  rollout: Rollout
  metadata: TrainingMetadata
  gradeMax: number
  locale: Locale
  /** What the judge writes per criterion besides its grade (RunConfig.reasons); default `none`. */
  reasons?: ScorerReasons
  /** RunConfig.judging: `verdicts` asks each criterion as Yes or No (a plain answer without reasons only). */
  judging?: 'grades' | 'verdicts'
}

export interface Judgement {
  score: number
  criteria: CriterionGrade[]
}
