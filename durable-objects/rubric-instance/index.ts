import { DurableObject } from 'cloudflare:workers'
import type { Judgement } from '../../src/agents/scorer/index.ts'
import { initialRubrics } from '../../src/rubrics/index.ts'
import type { Rollout, TrainingMetadata } from '../../src/schemas/rollout.ts'
import type { Rubric, RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { CriterionGrade } from '../../src/schemas/score.ts'
import type { Env } from '../../workers/env.ts'
import { loadRunConfig } from '../../workers/runs/store.ts'
import { MetaStore } from '../meta-store.ts'
import { applySchema, type TableSchema } from '../schema.ts'
import { coordinatorName } from '../names.ts'

/** One rollout's first score in a step: what every later request for the same id gets back. */
export interface LedgerEntry {
  rollout_id: string
  step: number
  rubric_version: number
  score: number
  criteria: CriterionGrade[]
  cached: boolean
}

export interface InstanceAddress {
  runId: string
  instanceId: string
}

export type Preparation =
  | { kind: 'recorded'; entry: LedgerEntry }
  | { kind: 'cached'; snapshot: RubricSnapshot; judgement: Judgement }
  | { kind: 'fresh'; snapshot: RubricSnapshot }

export interface RubricVersionRecord {
  version: number
  rubrics: Rubric[]
  created_at: string
  step: number | null
  note: string
  strategy: string | null
  rationale: string | null
  diff: Record<string, unknown> | null
  refused: string[]
}

export type AnalysisStatus = 'pending' | 'done' | 'failed'

/** A rollout in an instance's ledger. */
export interface RolloutKey {
  step: number
  rollout_id: string
}

/** How one rollout's analysis ended. */
export type AnalysisOutcome = RolloutKey & ({ status: 'done'; documentId: string; hacking: boolean } | { status: 'failed' })

/** What the analyzer needs about one recorded rollout. */
export interface AnalysisInput {
  entry: LedgerEntry
  rollout: Rollout
  metadata: TrainingMetadata
  rubrics: Rubric[]
  analysis_status: AnalysisStatus
}

/** An analysed rollout as the step's summary consumes it. */
export interface AnalysedRollout {
  rollout_id: string
  step: number
  score: number
  document_id: string
  hacking: boolean
}

export type StepUpdateInput =
  | { state: 'done'; outcome: StepUpdateOutcome }
  | { state: 'waiting'; pending: number; retryInMs: number }
  | {
      state: 'ready'
      snapshot: RubricSnapshot
      analyses: AnalysedRollout[]
      late: number
      failed: number
      pending: number
      /** Analyses still pending past the deadline: their jobs are sent again (they may have been lost) and count into a later step. */
      stillPending: { step: number; rollout_id: string }[]
    }

/** How one instance's step update ended: the counts `/rubric_status` reports. */
export interface StepUpdateOutcome {
  rubric_version: number
  changed: boolean
  analysed: number
  late: number
  failed: number
  missing: number
  hacking_flags: number
  strategy: string | null
  /** Parts of the updater's proposal that were refused (e.g. touching an anchor), even when no new version came of it. */
  refused: string[]
  error?: string
}

export interface StepUpdateCommit {
  /** The new full rubric set (anchors included), or undefined to keep the current version. */
  rubrics?: Rubric[]
  strategy: string | null
  rationale: string | null
  diff: Record<string, unknown> | null
  refused: string[]
  note: string
  consumedRolloutIds: { step: number; rollout_id: string }[]
  counts: Pick<StepUpdateOutcome, 'late' | 'failed' | 'missing' | 'hacking_flags'>
  error?: string
}

/** Metadata for ledger rows written before the ledger kept it: a neutral value every reader accepts. */
const UNKNOWN_METADATA = JSON.stringify({ high_level_goal: '', model_size: '', current_step: 0, total_steps: 1 })

const INSTANCE_TABLES: Record<string, TableSchema> = {
  rubric_versions: {
    columns: {
      version: 'INTEGER PRIMARY KEY', rubrics: 'TEXT NOT NULL', created_at: 'TEXT NOT NULL', step: 'INTEGER', note: 'TEXT NOT NULL',
      strategy: 'TEXT', rationale: 'TEXT', diff: 'TEXT', refused: "TEXT NOT NULL DEFAULT '[]'",
    },
  },
  ledger: {
    columns: {
      step: 'INTEGER NOT NULL', rollout_id: 'TEXT NOT NULL', rubric_version: 'INTEGER NOT NULL', score: 'REAL NOT NULL', criteria: 'TEXT NOT NULL',
      cached: 'INTEGER NOT NULL', rollout: 'TEXT NOT NULL', metadata: `TEXT NOT NULL DEFAULT '${UNKNOWN_METADATA}'`, created_at: 'TEXT NOT NULL',
      analysis_status: "TEXT NOT NULL DEFAULT 'pending'", analysis_document: 'TEXT', hacking: 'INTEGER NOT NULL DEFAULT 0', consumed_step: 'INTEGER',
    },
    constraints: ['PRIMARY KEY (step, rollout_id)'],
  },
  step_updates: { columns: { step: 'INTEGER PRIMARY KEY', outcome: 'TEXT NOT NULL' } },
  judgements: {
    columns: { rubric_version: 'INTEGER NOT NULL', judgement_key: 'TEXT NOT NULL', score: 'REAL NOT NULL', criteria: 'TEXT NOT NULL' },
    constraints: ['PRIMARY KEY (rubric_version, judgement_key)'],
  },
}

/**
 * One run × instance: its rubric set with full version history, the rollout ledger of each step,
 * and the score cache. No LLM call happens in here: the Worker judges between `prepare` and `record`.
 */
export class RubricInstance extends DurableObject<Env> {
  private readonly sql: SqlStorage
  private readonly meta: MetaStore
  /** The newest version, parsed once; versions are immutable, so only a new version replaces it. */
  private cachedSnapshot: RubricSnapshot | undefined

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    this.sql = ctx.storage.sql
    this.meta = new MetaStore(this.sql)
    applySchema(this.sql, INSTANCE_TABLES)
  }

  /**
   * Everything the Worker needs before judging: the earlier score when this rollout id was already
   * scored in the current step, a cached judgement of identical content, or the rubric snapshot.
   */
  async prepare(address: InstanceAddress, rolloutId: string, judgementKey: string): Promise<Preparation> {
    const snapshot = await this.ensureRubrics(address)
    const entry = this.ledgerEntry(this.currentStep(), rolloutId)
    if (entry) return { kind: 'recorded', entry }
    const hit = this.sql
      .exec<{ score: number; criteria: string }>('SELECT score, criteria FROM judgements WHERE rubric_version = ? AND judgement_key = ?', snapshot.version, judgementKey)
      .toArray()[0]
    if (hit) return { kind: 'cached', snapshot, judgement: { score: hit.score, criteria: JSON.parse(hit.criteria) } }
    return { kind: 'fresh', snapshot }
  }

  /**
   * Records a judged rollout in its step, once: the first writer for a (step, rollout id) wins and
   * later callers get that first entry back with `duplicate: true`. The coordinator assigns the step.
   */
  async record(
    address: InstanceAddress,
    rollout: Rollout,
    metadata: TrainingMetadata,
    judged: { judgementKey: string; rubricVersion: number; judgement: Judgement; cached: boolean },
  ): Promise<{ entry: LedgerEntry; duplicate: boolean }> {
    const earlier = this.ledgerEntry(this.currentStep(), rollout.id)
    if (earlier) return { entry: earlier, duplicate: true }
    this.sql.exec(
      'INSERT OR IGNORE INTO judgements (rubric_version, judgement_key, score, criteria) VALUES (?, ?, ?, ?)',
      judged.rubricVersion, judged.judgementKey, judged.judgement.score, JSON.stringify(judged.judgement.criteria),
    )
    const coordinator = this.env.RUN_COORDINATOR.getByName(coordinatorName(address.runId))
    const { step, nextStep } = await coordinator.admit(address.runId, address.instanceId, rollout.id, judged.rubricVersion)
    this.openStepSync(nextStep ?? step)
    const written = this.sql.exec(
      `INSERT OR IGNORE INTO ledger (step, rollout_id, rubric_version, score, criteria, cached, rollout, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      step, rollout.id, judged.rubricVersion, judged.judgement.score, JSON.stringify(judged.judgement.criteria), judged.cached ? 1 : 0,
      JSON.stringify(rollout), JSON.stringify(metadata), new Date().toISOString(),
    ).rowsWritten
    if (written === 0) return { entry: this.ledgerEntry(step, rollout.id)!, duplicate: true }
    const { judgement } = judged
    return { entry: { rollout_id: rollout.id, step, rubric_version: judged.rubricVersion, score: judgement.score, criteria: judgement.criteria, cached: judged.cached }, duplicate: false }
  }

  /** The coordinator closed a step: rollouts from now on belong to `step`. */
  async openStep(step: number): Promise<void> {
    this.openStepSync(step)
  }

  /** The rubrics in force now. */
  async snapshot(address: InstanceAddress): Promise<RubricSnapshot> {
    return this.ensureRubrics(address)
  }

  /** Every rubric version, oldest first. */
  async history(address: InstanceAddress): Promise<RubricVersionRecord[]> {
    await this.ensureRubrics(address)
    return this.sql
      .exec<{ version: number; rubrics: string; created_at: string; step: number | null; note: string; strategy: string | null; rationale: string | null; diff: string | null; refused: string }>(
        'SELECT * FROM rubric_versions ORDER BY version',
      )
      .toArray()
      .map((row) => ({ ...row, rubrics: JSON.parse(row.rubrics), diff: row.diff === null ? null : JSON.parse(row.diff), refused: JSON.parse(row.refused) }))
  }

  /** The recorded rollouts and the rubrics each was scored with, for their analysis jobs; unknown ones are left out. */
  async analysisInputs(address: InstanceAddress, keys: readonly RolloutKey[]): Promise<AnalysisInput[]> {
    await this.ensureRubrics(address)
    const rubricsByVersion = new Map<number, Rubric[]>()
    return keys.flatMap(({ step, rollout_id }) => {
      const row = this.sql
        .exec<LedgerRow & { rollout: string; metadata: string; analysis_status: AnalysisStatus }>(
          'SELECT step, rollout_id, rubric_version, score, criteria, cached, rollout, metadata, analysis_status FROM ledger WHERE step = ? AND rollout_id = ?', step, rollout_id,
        )
        .toArray()[0]
      if (!row) return []
      const entry = toLedgerEntry(row)
      let rubrics = rubricsByVersion.get(row.rubric_version)
      if (!rubrics) {
        rubrics = JSON.parse(this.sql.exec<{ rubrics: string }>('SELECT rubrics FROM rubric_versions WHERE version = ?', row.rubric_version).one().rubrics) as Rubric[]
        rubricsByVersion.set(row.rubric_version, rubrics)
      }
      return [{ entry, rollout: JSON.parse(row.rollout), metadata: JSON.parse(row.metadata), rubrics, analysis_status: row.analysis_status }]
    })
  }

  /** Marks rollouts' analyses done or failed, each once: a redelivered job changes nothing. Returns how many changed. */
  async recordAnalyses(outcomes: readonly AnalysisOutcome[]): Promise<{ changed: number }> {
    let changed = 0
    this.ctx.storage.transactionSync(() => {
      for (const outcome of outcomes) {
        changed += outcome.status === 'done'
          ? this.sql.exec(
              `UPDATE ledger SET analysis_status = 'done', analysis_document = ?, hacking = ? WHERE step = ? AND rollout_id = ? AND analysis_status != 'done'`,
              outcome.documentId, outcome.hacking ? 1 : 0, outcome.step, outcome.rollout_id,
            ).rowsWritten
          : this.sql.exec(`UPDATE ledger SET analysis_status = 'failed' WHERE step = ? AND rollout_id = ? AND analysis_status = 'pending'`, outcome.step, outcome.rollout_id).rowsWritten
      }
    })
    return { changed }
  }

  /**
   * What a closed step's update works from: the analysed rollouts of this step and earlier late ones
   * not yet summarised. Waits (by answer, not by blocking) while analyses are pending before `deadline`.
   */
  async stepUpdateInput(address: InstanceAddress, step: number, deadline: number): Promise<StepUpdateInput> {
    const snapshot = await this.ensureRubrics(address)
    const done = this.sql.exec<{ outcome: string }>('SELECT outcome FROM step_updates WHERE step = ?', step).toArray()[0]
    if (done) return { state: 'done', outcome: JSON.parse(done.outcome) }
    const counts = this.sql
      .exec<{ status: AnalysisStatus; n: number }>(
        'SELECT analysis_status AS status, count(*) AS n FROM ledger WHERE step <= ? AND consumed_step IS NULL GROUP BY analysis_status', step,
      )
      .toArray()
    const count = (status: AnalysisStatus) => counts.find((row) => row.status === status)?.n ?? 0
    const now = Date.now()
    // Only this step's analyses are waited for: earlier steps' late ones are taken if done, never waited on again.
    const pendingHere = this.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM ledger WHERE step = ? AND analysis_status = 'pending'`, step).one().n
    if (pendingHere > 0 && now < deadline) return { state: 'waiting', pending: pendingHere, retryInMs: Math.min(2_000, deadline - now) }
    const analyses = this.sql
      .exec<{ rollout_id: string; step: number; score: number; analysis_document: string; hacking: number }>(
        `SELECT rollout_id, step, score, analysis_document, hacking FROM ledger
         WHERE step <= ? AND consumed_step IS NULL AND analysis_status = 'done' ORDER BY step, created_at`, step,
      )
      .toArray()
      .map((row) => ({ rollout_id: row.rollout_id, step: row.step, score: row.score, document_id: row.analysis_document, hacking: row.hacking === 1 }))
    const failed = this.sql
      .exec<{ n: number }>(`SELECT count(*) AS n FROM ledger WHERE step <= ? AND consumed_step IS NULL AND analysis_status = 'failed'`, step)
      .one().n
    const stillPending = this.sql
      .exec<{ step: number; rollout_id: string }>(`SELECT step, rollout_id FROM ledger WHERE step <= ? AND consumed_step IS NULL AND analysis_status = 'pending'`, step)
      .toArray()
    return { state: 'ready', snapshot, analyses, late: analyses.filter((a) => a.step < step).length, failed, pending: count('pending'), stillPending }
  }

  /**
   * Commits a closed step's update, once (alarms and queues deliver at least once): a new rubric
   * version when the rubrics changed, the analyses it consumed, and the outcome counts.
   */
  async commitStepUpdate(address: InstanceAddress, step: number, commit: StepUpdateCommit): Promise<StepUpdateOutcome> {
    const snapshot = await this.ensureRubrics(address)
    const earlier = this.sql.exec<{ outcome: string }>('SELECT outcome FROM step_updates WHERE step = ?', step).toArray()[0]
    if (earlier) return JSON.parse(earlier.outcome)
    const changed = commit.rubrics !== undefined && JSON.stringify(commit.rubrics) !== JSON.stringify(snapshot.rubrics)
    const version = changed ? snapshot.version + 1 : snapshot.version
    const now = new Date().toISOString()
    try {
      this.ctx.storage.transactionSync(() => {
        if (changed) {
          this.sql.exec(
            'INSERT INTO rubric_versions (version, rubrics, created_at, step, note, strategy, rationale, diff, refused) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
            version, JSON.stringify(commit.rubrics), now, step, commit.note, commit.strategy, commit.rationale,
            commit.diff === null ? null : JSON.stringify(commit.diff), JSON.stringify(commit.refused),
          )
        }
        for (const consumed of commit.consumedRolloutIds) {
          this.sql.exec('UPDATE ledger SET consumed_step = ? WHERE step = ? AND rollout_id = ? AND consumed_step IS NULL', step, consumed.step, consumed.rollout_id)
        }
        // Failed analyses are settled by this step too, so they are counted once.
        this.sql.exec(`UPDATE ledger SET consumed_step = ? WHERE step <= ? AND consumed_step IS NULL AND analysis_status = 'failed'`, step, step)
        const outcome: StepUpdateOutcome = {
          rubric_version: version,
          changed,
          analysed: commit.consumedRolloutIds.length,
          ...commit.counts,
          strategy: commit.strategy,
          refused: commit.refused,
          ...(commit.error ? { error: commit.error } : {}),
        }
        this.sql.exec('INSERT INTO step_updates (step, outcome) VALUES (?, ?)', step, JSON.stringify(outcome))
        this.openStepSync(step + 1)
      })
    } catch (error) {
      // The rollback may have undone a step the meta store remembers.
      this.meta.forget()
      throw error
    }
    if (changed) this.cachedSnapshot = undefined
    return JSON.parse(this.sql.exec<{ outcome: string }>('SELECT outcome FROM step_updates WHERE step = ?', step).one().outcome)
  }

  private async ensureRubrics(address: InstanceAddress): Promise<RubricSnapshot> {
    const current = this.currentSnapshot(address.instanceId)
    if (current) return current
    const config = await loadRunConfig(this.env.DB, address.runId)
    if (!config) throw new Error(`run "${address.runId}" does not exist`)
    const again = this.currentSnapshot(address.instanceId)
    if (again) return again
    const now = new Date().toISOString()
    const rubrics = initialRubrics(config, address.instanceId, now)
    this.sql.exec('INSERT OR IGNORE INTO rubric_versions (version, rubrics, created_at, step, note) VALUES (1, ?, ?, NULL, ?)', JSON.stringify(rubrics), now, 'initial rubrics from the run config')
    return (this.cachedSnapshot = { instance_id: address.instanceId, version: 1, rubrics })
  }

  private currentSnapshot(instanceId: string): RubricSnapshot | undefined {
    if (this.cachedSnapshot) return this.cachedSnapshot
    const row = this.sql.exec<{ version: number; rubrics: string }>('SELECT version, rubrics FROM rubric_versions ORDER BY version DESC LIMIT 1').toArray()[0]
    if (!row) return undefined
    return (this.cachedSnapshot = { instance_id: instanceId, version: row.version, rubrics: JSON.parse(row.rubrics) })
  }

  private ledgerEntry(step: number, rolloutId: string): LedgerEntry | undefined {
    const row = this.sql
      .exec<LedgerRow>('SELECT step, rollout_id, rubric_version, score, criteria, cached FROM ledger WHERE step = ? AND rollout_id = ?', step, rolloutId)
      .toArray()[0]
    return row && toLedgerEntry(row)
  }

  private openStepSync(step: number): void {
    if (step > this.currentStep()) this.meta.set('current_step', step)
  }

  private currentStep(): number {
    return this.meta.number('current_step', 0)
  }

}

/** A ledger row's entry columns as SQLite returns them. */
type LedgerRow = { step: number; rollout_id: string; rubric_version: number; score: number; criteria: string; cached: number }

function toLedgerEntry(row: LedgerRow): LedgerEntry {
  return { step: row.step, rollout_id: row.rollout_id, rubric_version: row.rubric_version, score: row.score, criteria: JSON.parse(row.criteria), cached: row.cached === 1 }
}
