/**
 * A reference model of the step protocol: what every trainer must receive and what the ledger (and so the archive)
 * must hold, whatever the interleaving. Pure: it reads the answers the Worker gave and the rows it kept, and names
 * every broken rule. The rules:
 * - a rollout's answers agree with one of its rows (step, version, score); two rows of one id are more than
 *   `lateRetrySteps` steps apart (an older retry is a new rollout), and at most one answer per row says it was new;
 * - every row was answered, and every answer has its row (archive = answers);
 * - one rubric version per step and instance (in sync mode, two at most: the step's own, and its update's for the
 *   rollouts settled on it; one whose wait ran out keeps the first);
 * - counted runs: every step before the collecting one holds exactly `perStep` rows, the collecting one fewer, and the
 *   rows of rollouts the run received, k of them distinct and new, fill exactly the seats 0…k−1 (`expectSteps`);
 * - an answer is 200, a 4xx with a JSON error code, or this project's JSON 503 `overloaded` with Retry-After.
 * @example const model = new StepModel({ perStep: 4, lateRetrySteps: 2 }); model.answered(a); model.violations(rows)
 */

/** One rollout's answer as a trainer got it (`step` absent where the route does not say it, as OpenRLHF's). */
export interface Answer {
  rolloutId: string
  route: string
  status: number
  step?: number
  version?: number
  score?: number
  duplicate?: boolean
  code?: string
  retryAfter?: string | null
}

/** One row of the ledger. */
export interface Row {
  instanceId: string
  rolloutId: string
  step: number
  version: number
  score: number
}

export interface StepRules {
  /** `rollouts_per_step`, or null when steps close otherwise. */
  perStep: number | null
  lateRetrySteps: number
  /** Sync mode: a rollout's row is settled on the rubrics its step's update left. */
  sync?: boolean
}

export class StepModel {
  private readonly answers: Answer[] = []

  constructor(private readonly rules: StepRules) {}

  answered(answer: Answer): void {
    this.answers.push(answer)
  }

  /** The rollouts that have no 200 answer yet: what a trainer sends again. */
  unanswered(): string[] {
    const ok = new Set(this.answers.filter((answer) => answer.status === 200).map((answer) => answer.rolloutId))
    return [...new Set(this.answers.map((answer) => answer.rolloutId))].filter((id) => !ok.has(id))
  }

  get count(): number {
    return this.answers.length
  }

  /** Every rule the answers and `rows` break, each said for a person; empty when the run was exact. */
  violations(rows: readonly Row[], collecting?: number): string[] {
    return [
      ...this.statusViolations(),
      ...this.answerViolations(rows),
      ...rowViolations(rows, this.rules.lateRetrySteps, this.rules.sync ? 2 : 1),
      ...(this.rules.perStep === null ? [] : countViolations(rows, this.rules.perStep, collecting)),
    ]
  }

  private statusViolations(): string[] {
    return this.answers.flatMap((answer) => {
      const { status, code, retryAfter } = answer
      if (status === 200 || (status >= 400 && status < 500 && code)) return []
      if (status === 503 && code === 'overloaded' && retryAfter) return []
      return [`${answer.route} ${answer.rolloutId}: status ${status} (${code ?? 'no error code'})`]
    })
  }

  private answerViolations(rows: readonly Row[]): string[] {
    const byId = groupBy(rows, (row) => row.rolloutId)
    const problems: string[] = []
    const fresh = new Map<string, number>()
    for (const answer of this.answers.filter((one) => one.status === 200)) {
      const match = (byId.get(answer.rolloutId) ?? []).find(
        (row) =>
          (answer.step === undefined || row.step === answer.step) &&
          row.version === answer.version &&
          Math.abs(row.score - answer.score!) < 1e-9,
      )
      if (!match) {
        problems.push(
          `${answer.route} ${answer.rolloutId}: answered ${describe(answer)} but the ledger holds ` +
            `${JSON.stringify(byId.get(answer.rolloutId) ?? [])}`,
        )
      } else if (answer.duplicate === false) {
        const key = `${match.step}\u0000${match.rolloutId}`
        fresh.set(key, (fresh.get(key) ?? 0) + 1)
      }
    }
    for (const [key, times] of fresh)
      if (times > 1) problems.push(`${key.replace('\u0000', ' ')}: ${times} answers said it was new`)
    const answered = new Set(this.answers.filter((one) => one.status === 200).map((one) => one.rolloutId))
    for (const row of rows)
      if (!answered.has(row.rolloutId)) problems.push(`row ${row.step} ${row.rolloutId} was never answered`)
    return problems
  }
}

/**
 * The seats the rows of a counted run fill: `k` distinct rollouts recorded so far take the steps ⌊0/N⌋…⌊(k−1)/N⌋, in
 * some order. Answers say the step of each; together they are this multiset.
 * @example expectSteps(5, 2) // [0, 0, 1, 1, 2]
 */
function expectSteps(rows: number, perStep: number): number[] {
  return Array.from({ length: rows }, (_, seat) => Math.floor(seat / perStep))
}

function rowViolations(rows: readonly Row[], lateRetrySteps: number, versionsPerStep: number): string[] {
  const problems: string[] = []
  for (const [id, kept] of groupBy(rows, (row) => `${row.instanceId}\u0000${row.rolloutId}`)) {
    const steps = kept.map((row) => row.step).sort((a, b) => a - b)
    for (let i = 1; i < steps.length; i++)
      if (steps[i]! - steps[i - 1]! <= lateRetrySteps)
        problems.push(`${id.replace('\u0000', ' ')}: rows in steps ${steps.join(', ')} (a retry within the window)`)
  }
  for (const [step, kept] of groupBy(rows, (row) => `${row.instanceId}\u0000${row.step}`)) {
    const versions = [...new Set(kept.map((row) => row.version))]
    if (versions.length > versionsPerStep)
      problems.push(`step ${step.replace('\u0000', ' ')} holds versions ${versions.join(', ')}`)
  }
  return problems
}

function countViolations(rows: readonly Row[], perStep: number, collecting?: number): string[] {
  const perStepRows = groupBy(rows, (row) => String(row.step))
  const last = Math.max(-1, ...rows.map((row) => row.step))
  const problems: string[] = []
  const sorted = rows.map((row) => row.step).sort((a, b) => a - b)
  const expected = expectSteps(rows.length, perStep)
  if (JSON.stringify(sorted) !== JSON.stringify(expected))
    problems.push(
      `counted steps hold ${countsOf(perStepRows, last)} rows; ${rows.length} rollouts fill ${perStep} a step`,
    )
  if (collecting !== undefined && collecting !== Math.floor(rows.length / perStep))
    problems.push(`the run collects step ${collecting} after ${rows.length} rollouts of ${perStep} a step`)
  return problems
}

function countsOf(byStep: Map<string, Row[]>, last: number): string {
  return Array.from({ length: last + 1 }, (_, step) => byStep.get(String(step))?.length ?? 0).join(', ')
}

function describe(answer: Answer): string {
  return `step ${answer.step ?? '?'} v${answer.version} ${answer.score}${answer.duplicate ? ' (duplicate)' : ''}`
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>()
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item])
  return groups
}
