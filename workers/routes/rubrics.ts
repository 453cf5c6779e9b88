import { Hono } from 'hono'
import { AppError } from '../../src/errors/index.ts'
import { coordinatorName, instanceName } from '../../durable-objects/names.ts'
import { InstanceId } from '../../src/schemas/rollout.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { RubricVersionRecord } from '../../durable-objects/rubric-instance/index.ts'
import type { AppEnv } from '../env.ts'

/**
 * `GET /rubrics[?instance_id=][&history=1]` — an instance's anchor and adaptive rubrics with versions.
 * In per_instance mode without an instance id it lists the instances the run has seen.
 */
export const rubricRoutes = new Hono<AppEnv>()
  .get('/rubrics/history', async (c) => {
    const run = c.get('run')
    const instanceId = resolveInstance(run, c.req.query('instance_id'))
    const address = { runId: run.id, instanceId }
    const versions: RubricVersionRecord[] = await c.env.RUBRIC_INSTANCE.getByName(
      instanceName(run.id, instanceId),
    ).history(address)
    return c.json({
      run_id: run.id,
      instance_id: instanceId,
      versions: versions.map(({ version, rubrics, strategy, rationale, step, diff, refused, created_at, note }) => ({
        version,
        rubrics,
        strategy,
        rationale,
        step,
        diff,
        refused,
        note,
        created_at,
      })),
    })
  })
  .get('/rubrics', async (c) => {
    const run = c.get('run')
    const requested = c.req.query('instance_id')
    if (run.config.rubrics_mode === 'per_instance' && requested === undefined) {
      const instances = await c.env.RUN_COORDINATOR.getByName(coordinatorName(run.id)).instances()
      return c.json({ run_id: run.id, rubrics_mode: run.config.rubrics_mode, instances })
    }
    const instanceId = resolveInstance(run, requested)
    const address = { runId: run.id, instanceId }
    const instance = c.env.RUBRIC_INSTANCE.getByName(instanceName(run.id, instanceId))
    const snapshot: RubricSnapshot = await instance.snapshot(address)
    return c.json({
      run_id: run.id,
      instance_id: instanceId,
      rubric_version: snapshot.version,
      anchor_rubrics: snapshot.rubrics.filter((rubric) => rubric.is_anchor),
      adaptive_rubrics: snapshot.rubrics.filter((rubric) => !rubric.is_anchor),
      ...(c.req.query('history') ? { history: await instance.history(address) } : {}),
    })
  })

/** The instance a rubric read addresses: `global` in global mode; the given id in per_instance mode. */
function resolveInstance(run: AppEnv['Variables']['run'], requested: string | undefined): string {
  checkInstanceId(requested)
  if (run.config.rubrics_mode === 'global') {
    if (requested !== undefined && requested !== 'global')
      throw new AppError('not_found', `run "${run.id}" is in global mode: its only instance is "global"`)
    return 'global'
  }
  if (requested === undefined) throw new AppError('invalid_request', 'instance_id is required in per_instance mode')
  return requested
}

/**
 * Refuses an `instance_id` query that the `/score` body would refuse too (one rule: `InstanceId`).
 * @example checkInstanceId(c.req.query('instance_id'))
 */
export function checkInstanceId(instanceId: string | undefined): void {
  if (instanceId !== undefined && !InstanceId.safeParse(instanceId).success) {
    throw new AppError('invalid_request', 'instance_id may hold letters, digits, and . _ : - only (at most 128)')
  }
}
