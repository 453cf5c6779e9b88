import { DurableObject } from 'cloudflare:workers'
import { initialRubrics } from '../../src/rubrics/index.ts'
import type { Rubric, RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { CriterionStepHealth } from '../../src/scoring/health.ts'
import type { StepUpdateOutcome } from '../../src/schemas/status.ts'
import { loadRunConfig } from '../run-config.ts'
import type { InstanceAddress } from '../contracts.ts'
import { instanceAddressOf } from '../names.ts'
import { applySchema, type TableSchema } from '../schema.ts'

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

export interface StepUpdateCommit {
  /** The version the update worked from: the commit is refused (`stale`) when another has landed since. */
  baseVersion: number
  /** The new full rubric set (anchors included), or undefined to keep the current version. */
  rubrics?: Rubric[]
  strategy: string | null
  rationale: string | null
  diff: Record<string, unknown> | null
  refused: string[]
  note: string
  counts: Omit<StepUpdateOutcome, 'rubric_version' | 'changed' | 'strategy' | 'refused' | 'error' | 'skipped'>
  error?: string
  /** The run budget that kept the update from running (`StepUpdateOutcome.skipped`). */
  skipped?: string
  /** Each criterion's health over the step's rollouts, kept with the step (one row per criterion, not per rollout). */
  health?: CriterionStepHealth[]
}

/** One step of one criterion's health, as stored. */
export interface StepHealthRecord extends CriterionStepHealth {
  step: number
}

/** Steps of criterion health an instance keeps: enough for the dashboard and for retiring; older rows go. */
const HEALTH_STEPS_KEPT = 200

type CommitResult =
  | { state: 'committed'; outcome: StepUpdateOutcome; snapshot: RubricSnapshot }
  | { state: 'stale'; snapshot: RubricSnapshot }

const INSTANCE_TABLES: Record<string, TableSchema> = {
  rubric_versions: {
    columns: {
      version: 'INTEGER PRIMARY KEY',
      rubrics: 'TEXT NOT NULL',
      created_at: 'TEXT NOT NULL',
      step: 'INTEGER',
      note: 'TEXT NOT NULL',
      strategy: 'TEXT',
      rationale: 'TEXT',
      diff: 'TEXT',
      refused: "TEXT NOT NULL DEFAULT '[]'",
    },
  },
  step_updates: { columns: { step: 'INTEGER PRIMARY KEY', outcome: 'TEXT NOT NULL' } },
  criterion_health: {
    columns: {
      step: 'INTEGER NOT NULL',
      rubric_id: 'TEXT NOT NULL',
      mean: 'REAL NOT NULL',
      within_group_std: 'REAL',
      share_max: 'REAL NOT NULL',
      share_min: 'REAL NOT NULL',
      corr_with_score: 'REAL',
      n: 'INTEGER NOT NULL',
    },
    constraints: ['PRIMARY KEY (step, rubric_id)'],
    withoutRowid: true,
  },
}

/**
 * One run × instance: its rubric set with full version history, and how each step's update ended. Versions are
 * immutable: a commit adds one, compare-and-set on the version the update read, once per step. Off the `/score`
 * path: the ledger shards keep a copy of the rubrics in force, and the Worker's isolates one of theirs.
 */
export class RubricInstance extends DurableObject<Cloudflare.Env> {
  private readonly sql: SqlStorage
  /** The newest version, parsed once; versions are immutable, so only a new version replaces it. */
  private cachedSnapshot: RubricSnapshot | undefined

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    this.sql = ctx.storage.sql
    applySchema(this.sql, INSTANCE_TABLES)
  }

  /** The rubrics in force now. */
  async snapshot(): Promise<RubricSnapshot> {
    return this.ensureRubrics()
  }

  /** Every rubric version, oldest first. */
  async history(): Promise<RubricVersionRecord[]> {
    await this.ensureRubrics()
    return this.sql
      .exec<{
        version: number
        rubrics: string
        created_at: string
        step: number | null
        note: string
        strategy: string | null
        rationale: string | null
        diff: string | null
        refused: string
      }>('SELECT * FROM rubric_versions ORDER BY version')
      .toArray()
      .map((row) => ({
        ...row,
        rubrics: JSON.parse(row.rubrics),
        diff: row.diff === null ? null : JSON.parse(row.diff),
        refused: JSON.parse(row.refused),
      }))
  }

  /** The rubrics of the given versions (those that exist), by version. */
  async versions(versions: readonly number[]): Promise<Record<number, Rubric[]>> {
    await this.ensureRubrics()
    const found: Record<number, Rubric[]> = {}
    for (const version of new Set(versions)) {
      const row = this.sql
        .exec<{ rubrics: string }>('SELECT rubrics FROM rubric_versions WHERE version = ?', version)
        .toArray()[0]
      if (row) found[version] = JSON.parse(row.rubrics)
    }
    return found
  }

  /**
   * Criterion health of the newest `steps` closed steps that have it (oldest first), optionally up to `beforeStep`.
   */
  async health(steps: number, beforeStep?: number): Promise<StepHealthRecord[]> {
    const newest = this.sql
      .exec<{ step: number }>(
        'SELECT DISTINCT step FROM criterion_health WHERE step < ? ORDER BY step DESC LIMIT ?',
        beforeStep ?? Number.MAX_SAFE_INTEGER,
        steps,
      )
      .toArray()
    if (newest.length === 0) return []
    return this.sql
      .exec<{ [K in keyof StepHealthRecord]: StepHealthRecord[K] }>(
        'SELECT * FROM criterion_health WHERE step >= ? AND step <= ? ORDER BY step, rubric_id',
        newest.at(-1)!.step,
        newest[0]!.step,
      )
      .toArray()
      .map((row) => ({ ...row }))
  }

  /** How the update of `step` ended, if it has. */
  async stepOutcome(step: number): Promise<StepUpdateOutcome | undefined> {
    const row = this.sql.exec<{ outcome: string }>('SELECT outcome FROM step_updates WHERE step = ?', step).toArray()[0]
    return row ? (JSON.parse(row.outcome) as StepUpdateOutcome) : undefined
  }

  /**
   * Commits a closed step's update, once per step (queues and alarms deliver at least once): a new rubric version
   * when the rubrics changed and no other version landed since `baseVersion` (else `stale`: the caller plans again
   * on the newer rubrics), and the outcome counts. A repeat answers the first commit.
   */
  async commitStepUpdate(step: number, commit: StepUpdateCommit): Promise<CommitResult> {
    const snapshot = await this.ensureRubrics()
    const earlier = await this.stepOutcome(step)
    if (earlier) return { state: 'committed', outcome: earlier, snapshot }
    const changed = commit.rubrics !== undefined && JSON.stringify(commit.rubrics) !== JSON.stringify(snapshot.rubrics)
    if (changed && snapshot.version !== commit.baseVersion) return { state: 'stale', snapshot }
    const version = changed ? snapshot.version + 1 : snapshot.version
    const outcome: StepUpdateOutcome = {
      rubric_version: version,
      changed,
      ...commit.counts,
      strategy: commit.strategy,
      refused: commit.refused,
      ...(commit.error ? { error: commit.error } : {}),
      ...(commit.skipped ? { skipped: commit.skipped } : {}),
    }
    this.ctx.storage.transactionSync(() => {
      if (changed) {
        this.sql.exec(
          'INSERT INTO rubric_versions (version, rubrics, created_at, step, note, strategy, rationale, diff, refused)' +
            ' VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
          version,
          JSON.stringify(commit.rubrics),
          new Date().toISOString(),
          step,
          commit.note,
          commit.strategy,
          commit.rationale,
          commit.diff === null ? null : JSON.stringify(commit.diff),
          JSON.stringify(commit.refused),
        )
      }
      this.sql.exec('INSERT INTO step_updates (step, outcome) VALUES (?, ?)', step, JSON.stringify(outcome))
      this.recordHealth(step, commit.health ?? [])
    })
    if (changed) this.cachedSnapshot = { instance_id: this.address.instanceId, version, rubrics: commit.rubrics! }
    return { state: 'committed', outcome, snapshot: this.cachedSnapshot ?? snapshot }
  }

  private recordHealth(step: number, health: readonly CriterionStepHealth[]): void {
    for (const entry of health)
      this.sql.exec(
        'INSERT OR REPLACE INTO criterion_health (step, rubric_id, mean, within_group_std, share_max, share_min, ' +
          'corr_with_score, n) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        step,
        entry.rubric_id,
        entry.mean,
        entry.within_group_std,
        entry.share_max,
        entry.share_min,
        entry.corr_with_score,
        entry.n,
      )
    if (health.length > 0) this.sql.exec('DELETE FROM criterion_health WHERE step <= ?', step - HEALTH_STEPS_KEPT)
  }

  /** Which run and instance this is: the name it was reached by (every call comes through `getByName`). */
  private get address(): InstanceAddress {
    return instanceAddressOf(this.ctx.id.name)
  }

  private async ensureRubrics(): Promise<RubricSnapshot> {
    const address = this.address
    const current = this.currentSnapshot(address.instanceId)
    if (current) return current
    const config = await loadRunConfig(this.env.DB, address.runId)
    if (!config) throw new Error(`run "${address.runId}" does not exist`)
    const again = this.currentSnapshot(address.instanceId)
    if (again) return again
    const now = new Date().toISOString()
    const rubrics = initialRubrics(config, address.instanceId, now)
    this.sql.exec(
      'INSERT OR IGNORE INTO rubric_versions (version, rubrics, created_at, step, note) VALUES (1, ?, ?, NULL, ?)',
      JSON.stringify(rubrics),
      now,
      'initial rubrics from the run config',
    )
    return (this.cachedSnapshot = { instance_id: address.instanceId, version: 1, rubrics })
  }

  private currentSnapshot(instanceId: string): RubricSnapshot | undefined {
    if (this.cachedSnapshot) return this.cachedSnapshot
    const row = this.sql
      .exec<{ version: number; rubrics: string }>(
        'SELECT version, rubrics FROM rubric_versions ORDER BY version DESC LIMIT 1',
      )
      .toArray()[0]
    if (!row) return undefined
    return (this.cachedSnapshot = { instance_id: instanceId, version: row.version, rubrics: JSON.parse(row.rubrics) })
  }
}
