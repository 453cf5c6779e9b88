import { fnv1a } from '../../src/hash/index.ts'
import { addScore, emptyTally, type ScoreTally } from '../../src/scoring/tally.ts'
import type { Judged, LedgerEntry, RecordedRollout, RolloutAnalysis, StepRollout, Submission } from '../contracts.ts'
import { type EntryRow, LEDGER_SQL, type StepRolloutRow } from './tables.ts'

/**
 * Steps back from the shard's current one that a rollout id is looked up in before it is recorded: a retry that
 * arrives after its step closed (a trainer's timeout, another trainer's rollouts closing the step under it) is the
 * same rollout. Two covers a retry that crosses two closes; a step's rows are kept `ledger_retention_steps` (default
 * 2) updates after it, so older ones may be gone anyway.
 * @internal
 */
export const LATE_RETRY_STEPS = 2

/**
 * The shard's rollouts, one `ledger` row per (step, rollout id): inserts, answers, tallies and the reads of a closed
 * step's update. Every statement goes by a prefix of the primary key.
 * @example const rows = new LedgerRows(sql); rows.entryNear(5, 'r-1') // its answer if recorded in steps 3–5
 */
export class LedgerRows {
  private lastSeq = 0

  constructor(private readonly sql: SqlStorage) {}

  /** The rollout's entry in `step`. */
  entry(step: number, rolloutId: string): LedgerEntry | undefined {
    const row = this.sql.exec<EntryRow>(LEDGER_SQL.entry, step, rolloutId).toArray()[0]
    return row && toEntry(row)
  }

  /** The rollout's entry in `step` or one of the `LATE_RETRY_STEPS` before it, newest first. */
  entryNear(step: number, rolloutId: string): LedgerEntry | undefined {
    for (let back = 0; back <= LATE_RETRY_STEPS && step - back >= 0; back++) {
      const found = this.entry(step - back, rolloutId)
      if (found) return found
    }
    return undefined
  }

  /** Records a judged rollout in `step` and answers its entry. */
  insert(step: number, submission: Submission & { judged: Judged }): LedgerEntry {
    const { rollout, metadata, judged } = submission
    this.lastSeq = Math.max(this.lastSeq + 1, Date.now() * 1_024)
    this.sql.exec(
      LEDGER_SQL.insert,
      step,
      rollout.id,
      this.lastSeq,
      judged.rubricVersion,
      judged.score,
      judged.cached ? 1 : 0,
      fnv1a(rollout.input).toString(36),
      rollout.output.length,
      fnv1a(rollout.output).toString(36),
      submission.tactics?.length ? JSON.stringify(submission.tactics) : null,
      Date.now(),
      judged.judgeModel,
      JSON.stringify(judged.criteria),
      JSON.stringify(metadata),
      JSON.stringify(rollout),
      Math.max(0, Math.round(submission.judgedInMs ?? 0)),
    )
    return {
      rollout_id: rollout.id,
      step,
      rubric_version: judged.rubricVersion,
      score: judged.score,
      criteria: judged.criteria,
      cached: judged.cached,
    }
  }

  /** Whether sync mode has fixed the rollout's row for good (`settle` or `finalize`). */
  isFinal(step: number, rolloutId: string): boolean {
    return this.sql.exec<EntryRow>(LEDGER_SQL.entry, step, rolloutId).toArray()[0]?.final === 1
  }

  /** Sync mode: the row keeps the score it was first answered with, for good. */
  finalize(step: number, rolloutId: string): void {
    this.sql.exec(LEDGER_SQL.finalize, step, rolloutId)
  }

  /**
   * Replaces a rollout's score with its judgement on the rubrics its step's update left (sync mode), for good; a row
   * already final is left as it is.
   */
  settle(step: number, rolloutId: string, judged: Judged): void {
    this.sql.exec(
      LEDGER_SQL.settle,
      judged.rubricVersion,
      judged.score,
      JSON.stringify(judged.criteria),
      judged.cached ? 1 : 0,
      judged.judgeModel,
      step,
      rolloutId,
    )
  }

  /** How many of `step`'s rows are on another version than `version` and not final yet. */
  unsettled(step: number, version: number): number {
    return this.sql.exec<{ n: number }>(LEDGER_SQL.unsettled, step, version).one().n
  }

  /** How many rollouts `step` holds here. */
  count(step: number): number {
    return this.sql.exec<{ n: number }>(LEDGER_SQL.stepCount, step).one().n
  }

  /** The tally of `step`'s rows, the longest judgement among them included. */
  tally(step: number): ScoreTally {
    const tally = emptyTally()
    type ScoreRow = { score: number; rubric_version: number; judged_in_ms: number }
    for (const row of this.sql.exec<ScoreRow>(LEDGER_SQL.stepScores, step)) {
      addScore(tally, row.score, row.rubric_version, row.judged_in_ms)
    }
    return tally
  }

  /** A closed step's rollouts, small: what its update selects analyses from. */
  stepRollouts(step: number, shard: number): StepRollout[] {
    return this.sql
      .exec<StepRolloutRow>(LEDGER_SQL.stepRollouts, step)
      .toArray()
      .map((row) => ({
        shard,
        rollout_id: row.rollout_id,
        step,
        rubric_version: row.rubric_version,
        score: row.score,
        group: row.grp,
        output_chars: row.output_chars,
        output_hash: row.output_hash,
        grades: Object.fromEntries(
          (JSON.parse(row.criteria) as { rubric_id: string; grade: number }[]).map((grade) => [
            grade.rubric_id,
            grade.grade,
          ]),
        ),
        tactics: row.tactics ? (JSON.parse(row.tactics) as string[]) : [],
        analysis: row.analysis ? (JSON.parse(row.analysis) as RolloutAnalysis) : null,
      }))
  }

  /** Recorded rollouts in full; ids no longer (or never) in the ledger are left out. */
  rollouts(step: number, rolloutIds: readonly string[]): RecordedRollout[] {
    return rolloutIds.flatMap((rolloutId) => {
      const row = this.sql
        .exec<EntryRow & { rollout: string; metadata: string }>(LEDGER_SQL.rollout, step, rolloutId)
        .toArray()[0]
      return row ? [{ entry: toEntry(row), rollout: JSON.parse(row.rollout), metadata: JSON.parse(row.metadata) }] : []
    })
  }

  /** Keeps how a rollout's analysis ended on its row; a repeat of a finished one changes nothing. */
  recordAnalysis(step: number, rolloutId: string, analysis: RolloutAnalysis): number {
    return this.sql.exec(LEDGER_SQL.recordAnalysis, JSON.stringify(analysis), step, rolloutId).rowsWritten
  }

  deleteThrough(step: number): void {
    this.sql.exec(LEDGER_SQL.deleteThrough, step)
  }
}

function toEntry(row: EntryRow): LedgerEntry {
  return {
    rollout_id: row.rollout_id,
    step: row.step,
    rubric_version: row.rubric_version,
    score: row.score,
    criteria: JSON.parse(row.criteria),
    cached: row.cached === 1,
  }
}
