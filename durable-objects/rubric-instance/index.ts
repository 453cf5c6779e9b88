import { DurableObject } from 'cloudflare:workers'
import type { Judgement } from '../../src/agents/scorer/index.ts'
import { initialRubrics } from '../../src/rubrics/index.ts'
import type { Rollout } from '../../src/schemas/rollout.ts'
import type { Rubric, RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { CriterionGrade } from '../../src/schemas/score.ts'
import type { Env } from '../../workers/env.ts'
import { loadRunConfig } from '../../workers/runs/store.ts'
import { MetaStore } from '../meta-store.ts'
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
    this.sql.exec(`
      CREATE TABLE IF NOT EXISTS rubric_versions (version INTEGER PRIMARY KEY, rubrics TEXT NOT NULL, created_at TEXT NOT NULL, step INTEGER, note TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS ledger (step INTEGER NOT NULL, rollout_id TEXT NOT NULL, rubric_version INTEGER NOT NULL, score REAL NOT NULL,
        criteria TEXT NOT NULL, cached INTEGER NOT NULL, rollout TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (step, rollout_id));
      CREATE TABLE IF NOT EXISTS judgements (rubric_version INTEGER NOT NULL, judgement_key TEXT NOT NULL, score REAL NOT NULL, criteria TEXT NOT NULL,
        PRIMARY KEY (rubric_version, judgement_key));
    `)
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
      `INSERT OR IGNORE INTO ledger (step, rollout_id, rubric_version, score, criteria, cached, rollout, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      step, rollout.id, judged.rubricVersion, judged.judgement.score, JSON.stringify(judged.judgement.criteria), judged.cached ? 1 : 0,
      JSON.stringify(rollout), new Date().toISOString(),
    ).rowsWritten
    return { entry: this.ledgerEntry(step, rollout.id)!, duplicate: written === 0 }
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
      .exec<{ version: number; rubrics: string; created_at: string; step: number | null; note: string }>('SELECT * FROM rubric_versions ORDER BY version')
      .toArray()
      .map((row) => ({ ...row, rubrics: JSON.parse(row.rubrics) }))
  }

  /**
   * Runs this instance's update for a closed step; idempotent, because alarms deliver at least once.
   * The evolution pipeline plugs in here; until then the update keeps the rubrics as they are.
   */
  async applyStepUpdate(address: InstanceAddress, step: number): Promise<{ rubricVersion: number }> {
    const snapshot = await this.ensureRubrics(address)
    const done = this.meta.number('last_updated_step', -1)
    if (step > done) {
      this.meta.set('last_updated_step', step)
      this.openStepSync(step + 1)
    }
    return { rubricVersion: snapshot.version }
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
      .exec<{ step: number; rollout_id: string; rubric_version: number; score: number; criteria: string; cached: number }>(
        'SELECT step, rollout_id, rubric_version, score, criteria, cached FROM ledger WHERE step = ? AND rollout_id = ?', step, rolloutId,
      )
      .toArray()[0]
    return row && { ...row, criteria: JSON.parse(row.criteria), cached: row.cached === 1 }
  }

  private openStepSync(step: number): void {
    if (step > this.currentStep()) this.meta.set('current_step', step)
  }

  private currentStep(): number {
    return this.meta.number('current_step', 0)
  }

}
