import type { MetaStore } from '../meta-store.ts'
import { LEDGER_SQL, type ShardStepRow } from './tables.ts'

/** Meta keys of the storage format before `shard_steps`: read once by `upgradeStepState`, then deleted. */
const LEGACY_KEYS = ['pinned', 'trainer_step', 'updates', 'updated_through'] as const

/**
 * The shard's per-step state, one `shard_steps` row a step: the step it collects in (`current`), the rubric version a
 * step is scored on and its highest trainer step (fixed by the coordinator's answer to the shard's announce), and the
 * version a step's update left. Reads are remembered: the object is the only writer of its storage.
 * @example const steps = new ShardSteps(sql, meta); steps.pin(3, 2, 17); steps.pinned(3) // 2
 */
export class ShardSteps {
  private readonly rows = new Map<number, ShardStepRow | undefined>()
  private newestUpdated: number | undefined

  constructor(
    private readonly sql: SqlStorage,
    private readonly meta: MetaStore,
  ) {}

  /** The step the shard takes rollouts in, undefined before its first announce. */
  current(): number | undefined {
    const value = this.meta.get('step')
    return value === undefined ? undefined : Number(value)
  }

  /** Moves the shard on to `step`; never back. */
  advanceTo(step: number): void {
    const current = this.current()
    if (current === undefined || step > current) this.meta.set('step', step)
  }

  of(step: number): ShardStepRow | undefined {
    if (!this.rows.has(step)) this.rows.set(step, this.sql.exec<ShardStepRow>(LEDGER_SQL.shardStep, step).toArray()[0])
    return this.rows.get(step)
  }

  /** The rubric version `step`'s rollouts are scored on, once the coordinator has told this shard. */
  pinned(step: number): number | undefined {
    return this.of(step)?.version ?? undefined
  }

  /** The highest `metadata.current_step` announced in `step` (-1 before any). */
  trainerStep(step: number): number {
    return this.of(step)?.trainer_step ?? -1
  }

  /** Keeps the coordinator's answer for `step`: its version and a trainer step announced there. */
  pin(step: number, version: number, trainerStep: number): void {
    const row = this.of(step)
    if (row?.version === version && row.trainer_step >= trainerStep) return
    this.sql.exec(LEDGER_SQL.pinStep, step, version, trainerStep)
    this.rows.set(step, {
      ...emptyRow(step),
      ...row,
      version: row?.version ?? version,
      trainer_step: Math.max(trainerStep, row?.trainer_step ?? -1),
    })
  }

  /** The seats of counted `step` this shard holds (0 before it leased any). */
  leased(step: number): number {
    return this.of(step)?.leased ?? 0
  }

  /** The shard's lease of counted `step` is now `seats` (absolute). */
  setLeased(step: number, seats: number): void {
    const row = this.of(step)
    if ((row?.leased ?? 0) === seats) return
    this.sql.exec(LEDGER_SQL.setLeased, step, seats)
    this.rows.set(step, { ...emptyRow(step), ...row, leased: seats })
  }

  /** The update of `step` committed, leaving `version`; the first note stands. */
  noteUpdate(step: number, version: number, at = Date.now()): void {
    const row = this.of(step)
    if (row?.updated_version != null) return
    this.sql.exec(LEDGER_SQL.noteUpdate, step, version, at)
    this.rows.set(step, { ...emptyRow(step), ...row, updated_version: version, updated_at: at })
    this.newestUpdated = Math.max(this.updatedThrough(), step)
  }

  /** The version `step`'s update left and when this shard learned of it, once it committed. */
  update(step: number): { version: number; at: number } | undefined {
    const row = this.of(step)
    return row?.updated_version == null ? undefined : { version: row.updated_version, at: row.updated_at ?? 0 }
  }

  /** The newest step whose update has committed here (-1 before any). */
  updatedThrough(): number {
    this.newestUpdated ??= this.sql.exec<{ step: number }>(LEDGER_SQL.updatedThrough).toArray()[0]?.step ?? -1
    return this.newestUpdated
  }

  /** Drops the rows of steps up to `step` (their ledger rows are gone), keeping the newest updated one. */
  forgetThrough(step: number): void {
    this.sql.exec(LEDGER_SQL.forgetStepsThrough, step, this.updatedThrough())
    this.rows.clear()
  }
}

function emptyRow(step: number): ShardStepRow {
  return { step, version: null, trainer_step: -1, updated_version: null, updated_at: null, leased: 0 }
}

/**
 * Brings a shard written by the format before `shard_steps` (meta keys `pinned` = `step:version:trainerStep`,
 * `trainer_step` = `step:trainerStep`, `updates` = `{step: [version, at]}`, `updated_through`) to it, once: run by
 * `applySchema` when the tables' definition changes.
 * @example applySchema(sql, LEDGER_TABLES, () => upgradeStepState(sql, meta))
 */
export function upgradeStepState(sql: SqlStorage, meta: MetaStore): void {
  const steps = new ShardSteps(sql, meta)
  const pinned = meta.get('pinned')
  if (pinned !== undefined) {
    const [step = -1, version = 0, trainerStep] = pinned.split(':').map(Number)
    const [legacyStep, legacyTrainerStep = -1] = (meta.get('trainer_step') ?? '-1:-1').split(':').map(Number)
    if (step >= 0) steps.pin(step, version, trainerStep ?? (legacyStep === step ? legacyTrainerStep : -1))
  }
  const updates = JSON.parse(meta.get('updates') ?? '{}') as Record<string, [number, number]>
  for (const [step, [version, at]] of Object.entries(updates)) steps.noteUpdate(Number(step), version, at)
  const updatedThrough = meta.number('updated_through', -1)
  if (updatedThrough > steps.updatedThrough()) steps.noteUpdate(updatedThrough, 0, 0)
  for (const key of LEGACY_KEYS) meta.delete(key)
}
