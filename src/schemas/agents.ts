import { z } from 'zod'

/*
 * The shapes the online rubric-evolution agents answer in (AMARIS-style: analyse each rollout,
 * summarise the step, query memory, update the adaptive rubrics). Each schema repairs what a model
 * commonly gets slightly wrong (a string where a list was asked, "Corrective" for "CORRECTIVE",
 * null for an absent field, over-long text) and refuses everything else.
 */

/** Trimmed text cut to `max` characters; a model's long answer is shortened, never refused. */
const text = (max: number) => z.string().transform((value) => value.trim().slice(0, max))
/** Like `text`, but must say something. */
const requiredText = (max: number) =>
  z
    .string()
    .trim()
    .min(1)
    .transform((value) => value.slice(0, max))
/** A list of short strings: a lone string becomes a one-item list; blanks and repeats (case-insensitive) go. */
const textList = (maxItems: number, maxChars: number, normalise: (value: string) => string = (value) => value) =>
  z.preprocess(
    (value) => (typeof value === 'string' ? [value] : value === null ? [] : value),
    z
      .array(z.string())
      .transform((items) =>
        uniqueTexts(items.map((item) => normalise(item.trim().slice(0, maxChars)))).slice(0, maxItems),
      ),
  )
const lowerCase = (value: unknown) => (typeof value === 'string' ? value.trim().toLowerCase() : value)
const upperCase = (value: unknown) => (typeof value === 'string' ? value.trim().toUpperCase() : value)
const nullAsAbsent = (value: unknown) => (value === null ? undefined : value)
const booleanWords = (value: unknown) => (value === 'true' ? true : value === 'false' ? false : value)

/** Where a training run is, in thirds of its steps: what counts as a good answer moves with it. */
export const TrainingStage = z.enum(['early', 'middle', 'late'])
export type TrainingStage = z.infer<typeof TrainingStage>

/**
 * The stage of step `currentStep` out of `totalSteps`: early, middle or late third.
 * @example trainingStage(3, 10) // 'early'
 */
export function trainingStage(currentStep: number, totalSteps: number): TrainingStage {
  const progress = totalSteps > 0 ? currentStep / totalSteps : 0
  return progress < 1 / 3 ? 'early' : progress < 2 / 3 ? 'middle' : 'late'
}

export const HackingSeverity = z.enum(['none', 'low', 'medium', 'high'])
export type HackingSeverity = z.infer<typeof HackingSeverity>

/**
 * One rollout's reward-hacking verdict. `flag` is authoritative: an unflagged verdict has severity
 * `none`, a flagged one at least `low`.
 * @example RewardHackingVerdict.parse({ flag: true, evidence: ['score: 10/10'], severity: 'high', tactics: ['claims its
 *   own score'] })
 */
const RewardHackingVerdict = z
  .object({
    flag: z.preprocess(booleanWords, z.boolean()),
    evidence: textList(10, 500),
    severity: z.preprocess(lowerCase, HackingSeverity),
    tactics: textList(10, 80, (value) => value.toLowerCase()),
  })
  .transform((verdict) => ({
    ...verdict,
    severity: !verdict.flag ? ('none' as const) : verdict.severity === 'none' ? ('low' as const) : verdict.severity,
  }))

/**
 * The Analyzer's reply: what one graded rollout reveals about the policy and about the rubrics.
 * @example Analysis.parse({ overall_assessment: 'Correct and concise.', stage_performance: 'Strong for step 3.',
 *   reward_hacking: { flag: false, evidence: [], severity: 'none', tactics: [] }, advancement_strategy: 'Ask for the
 * steps.', rubric_effectiveness: 'Rubrics judged it fairly.', observations: [] })
 */
export const Analysis = z.object({
  overall_assessment: requiredText(2_000),
  stage_performance: text(1_000),
  reward_hacking: RewardHackingVerdict,
  advancement_strategy: text(1_000),
  rubric_effectiveness: text(1_000),
  observations: textList(20, 400),
})
export type Analysis = z.infer<typeof Analysis>

/**
 * One analysed rollout as the Summarizer reads it: the analysis with the rollout's id and score.
 * @example AnalysisRecord.parse({ rollout_id: 'r1', score: 0.8, analysis })
 */
export const AnalysisRecord = z.object({
  rollout_id: z.string().min(1).max(256),
  score: z.number().min(0).max(1),
  analysis: Analysis,
})
export type AnalysisRecord = z.infer<typeof AnalysisRecord>

/**
 * Numbers about a batch of analysed rollouts, computed by the harness (never asked of a model).
 * @example const stats: ScoreStats = { rollouts: 40, mean_score: 0.62, min_score: 0.1, max_score: 0.95, flagged: 3 }
 */
export const ScoreStats = z.object({
  rollouts: z.number().int().nonnegative(),
  mean_score: z.number().min(0).max(1),
  min_score: z.number().min(0).max(1),
  max_score: z.number().min(0).max(1),
  /** Analyses whose reward-hacking flag was set. */
  flagged: z.number().int().nonnegative(),
})
export type ScoreStats = z.infer<typeof ScoreStats>

/**
 * What the Summarizer and the MetaSummarizer write about one step of one instance.
 * @example BatchSummaryReply.parse({ executive_summary: '…', systemic_patterns: [], reward_hacking: { count: 0,
 *   tactics: [], examples: [] }, rubric_meta_evaluation: '…', evolution_plan: '…', memory_entry: '…' })
 */
export const BatchSummaryReply = z.object({
  executive_summary: requiredText(2_000),
  systemic_patterns: textList(12, 400),
  reward_hacking: z.object({
    count: z.number().int().nonnegative(),
    tactics: textList(12, 80, (value) => value.toLowerCase()),
    /** Rollout ids of the clearest examples. */
    examples: textList(20, 256),
  }),
  rubric_meta_evaluation: text(2_000),
  evolution_plan: text(2_000),
  /** A compact text worth remembering at later steps. */
  memory_entry: requiredText(1_000),
})
export type BatchSummaryReply = z.infer<typeof BatchSummaryReply>

/**
 * A step summary as the pipeline keeps it: the model's reply plus the harness's own numbers.
 * @example BatchSummary.parse({ ...reply, stats: { rollouts: 16, mean_score: 0.7, min_score: 0.2, max_score: 1,
 *   flagged: 2 } })
 */
export const BatchSummary = BatchSummaryReply.extend({ stats: ScoreStats })
export type BatchSummary = z.infer<typeof BatchSummary>

/**
 * The QueryGenerator's reply: memory search queries (capped and de-duplicated by its parser).
 * @example QueryList.parse({ queries: ['earlier keyword stuffing and the rubric that stopped it'] })
 */
export const QueryList = z.object({ queries: textList(50, 300) })
export type QueryList = z.infer<typeof QueryList>

const UpdateStrategy = z.enum(['MAINTENANCE', 'CORRECTIVE', 'ADVANCEMENT'])

/**
 * One change the Updater says it made. Descriptive: `final_adaptive` is what is applied; a
 * modification naming an anchor is refused and logged by `applyRubricUpdate`.
 * @example RubricModification.parse({ op: 'add', text: 'Does not address the grader.', weight: 2, reason: 'grader
 *   addressing seen' })
 */
const RubricModification = z.object({
  op: z.preprocess(lowerCase, z.enum(['add', 'modify', 'remove', 'reweight'])),
  rubric_id: z.preprocess(nullAsAbsent, z.string().trim().min(1).max(256).optional()),
  text: z.preprocess(nullAsAbsent, z.string().max(8_000).optional()),
  weight: z.preprocess(nullAsAbsent, z.number().optional()),
  reason: text(500).default(''),
})

/**
 * One rubric of the proposed adaptive set. The id may be absent for a new rubric; text, id and
 * weight are checked (and refused item by item) by `applyRubricUpdate`, not here.
 * @example AdaptiveRubricProposal.parse({ id: 'adaptive-2', text: 'Shows the key steps.', weight: 1 })
 */
const AdaptiveRubricProposal = z.object({
  id: z.preprocess(nullAsAbsent, z.string().trim().min(1).max(256).optional()),
  text: z.string().max(8_000),
  weight: z.preprocess(nullAsAbsent, z.number().default(1)),
  /** `penalty`: the text names what an answer must not do (see `Rubric.kind`). */
  kind: z.preprocess((value) => lowerCase(nullAsAbsent(value)), z.enum(['criterion', 'penalty']).optional()),
})

/**
 * The Updater's reply: a strategy, what it consulted, why, the changes, and the complete new adaptive set.
 * @example RubricUpdate.parse({ strategy: 'MAINTENANCE', consulted_memories: [], rationale: 'Rubrics work.',
 *   modifications: [], final_adaptive: [{ id: 'adaptive-1', text: 'Concise.', weight: 1 }] })
 */
export const RubricUpdate = z.object({
  strategy: z.preprocess(upperCase, UpdateStrategy),
  consulted_memories: textList(20, 200),
  rationale: requiredText(2_000),
  modifications: z.preprocess((value) => (value === null ? [] : value), z.array(RubricModification).max(200)),
  final_adaptive: z.array(AdaptiveRubricProposal).max(500),
})
export type RubricUpdate = z.infer<typeof RubricUpdate>

function uniqueTexts(items: readonly string[]): string[] {
  const seen = new Set<string>()
  return items.filter((item) => {
    const key = item.toLowerCase()
    if (!item || seen.has(key)) return false
    seen.add(key)
    return true
  })
}
