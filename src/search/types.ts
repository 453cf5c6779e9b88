/**
 * The contract between the offline search's parts: the dataset model, the rubric a search evolves,
 * and the four LLM roles (initializer, proposer, verifier, judge). Algorithms depend on these types
 * only; each role has a mock (deterministic heuristics) and an LLM implementation.
 */
import { z } from 'zod'
import type { SearchRubric } from '../schemas/search-rubric.ts'

// ---------------------------------------------------------------------------------------------
// Dataset

/** Ground truth of a candidate: `rank` (1 = best) or `quality` (higher is better). Never shown to an LLM. */
export const CandidateLabel = z.object({
  rank: z.number().int().positive().optional(),
  quality: z.number().optional(),
})
export type CandidateLabel = z.infer<typeof CandidateLabel>

/** One answer to a prompt. `source` and `label` are ground truth: never part of an LLM-visible payload. */
export const Candidate = z.object({
  candidate_id: z.string().min(1),
  text: z.string(),
  source: z.string().default('unknown'),
  label: CandidateLabel.default({}),
  /** Free metadata from the dataset, minus the label fields. Not shown to LLMs either. */
  metadata: z.record(z.string(), z.unknown()).default({}),
})
export type Candidate = z.infer<typeof Candidate>

export const PromptItem = z.object({
  prompt_id: z.string().min(1),
  prompt: z.string().min(1),
  candidates: z.array(Candidate).min(2),
  /** e.g. the subset name of a benchmark, for per-subset tables. */
  group: z.string().optional(),
  /**
   * A reference answer (a math problem's final answer, a gold solution): shown to every judge as data, as `/score`'s
   * `supplemental_context` is; never a label and never served by an exported artifact.
   */
  reference: z.string().min(1).optional(),
  metadata: z.record(z.string(), z.unknown()).default({}),
})
export type PromptItem = z.infer<typeof PromptItem>

export const PreferenceDataset = z.object({ prompts: z.array(PromptItem) })
export type PreferenceDataset = z.infer<typeof PreferenceDataset>

/**
 * What an LLM may see of a candidate: its id and text, nothing else (fixes autosr §8.2 label leakage).
 * @example visibleCandidate(candidate) // { candidate_id: 'c1', text: '…' }
 */
export function visibleCandidate(candidate: Candidate): { candidate_id: string; text: string } {
  return { candidate_id: candidate.candidate_id, text: candidate.text }
}

export const MUTATION_MODES = [
  'raise_bar',
  'decompose',
  'factual_focus',
  'anti_fluff',
  'counterexample_trigger',
  'weight_perturb',
] as const
export type MutationMode = (typeof MUTATION_MODES)[number]

// ---------------------------------------------------------------------------------------------
// Roles

/** Per-criterion grades of one candidate under one rubric: an integer 0..grade_max, or null for N/A. */
export type CriterionGrades = Record<string, number | null>

/** Left/right preference: 1 = left better, -1 = right better, 0 = tie or no judgement. */
export type Preference = 1 | -1 | 0

export interface RubricInitializer {
  initialize(item: PromptItem, options: { seed: number }): Promise<SearchRubric>
}

export interface RubricProposer {
  /** A mutation of `rubric` in `mode`, contrasting the best and runner-up candidates under it (texts only). */
  propose(input: {
    item: PromptItem
    rubric: SearchRubric
    mode: MutationMode
    top: Candidate
    runnerUp: Candidate
    seed: number
  }): Promise<SearchRubric>
}

export interface Verifier {
  /** Grades one candidate on every criterion of the rubric; `vote` distinguishes repeated votes. */
  grade(input: {
    item: PromptItem
    candidate: Candidate
    rubric: SearchRubric
    vote: number
    seed: number
  }): Promise<CriterionGrades>
}

export interface PreferenceJudge {
  /** Which of two candidates is better. Implementations judge both orders and reconcile (fixes position bias). */
  compare(input: { item: PromptItem; left: Candidate; right: Candidate }): Promise<Preference>
}

export interface SearchRoles {
  initializer: RubricInitializer
  proposer: RubricProposer
  verifier: Verifier
  judge: PreferenceJudge
}
