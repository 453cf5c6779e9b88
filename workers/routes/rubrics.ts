import { Hono } from 'hono'
import { z } from 'zod'
import { groupBy } from '../../src/collections/index.ts'
import { AppError } from '../../src/errors/index.ts'
import { InstanceId } from '../../src/schemas/rollout.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { RubricVersionRecord, StepHealthRecord } from '../../durable-objects/rubric-instance/index.ts'
import type { Rubric } from '../../src/schemas/rubric.ts'
import type { AppEnv } from '../env.ts'
import { integerParam, validQuery } from '../middleware/query.ts'
import { objects } from '../objects/call.ts'

/** Steps `GET /rubrics/stats` returns without `steps=`, and the most it returns. */
const STATS_STEPS = { default: 20, max: 200 }

/**
 * An `instance_id` query parameter: refused where the `/score` body would refuse it too (one rule: `InstanceId`).
 * @example z.object({ instance_id: InstanceIdParam.optional() })
 */
export const InstanceIdParam = z.string().refine((value) => InstanceId.safeParse(value).success, {
  error: 'may hold letters, digits, and . _ : - only (at most 128)',
})

const InstanceQuery = z.object({ instance_id: InstanceIdParam.optional() })
const StatsQuery = InstanceQuery.extend({
  steps: integerParam({ min: 1, max: STATS_STEPS.max }).default(STATS_STEPS.default),
})
const RubricsQuery = InstanceQuery.extend({ history: z.string().optional() })

/**
 * `GET /rubrics[?instance_id=][&history=1]` — an instance's anchor and adaptive rubrics with versions.
 * In per_instance mode without an instance id it lists the instances the run has seen.
 * `GET /rubrics/stats[?instance_id=][&steps=N]` — each criterion's health over the newest N closed steps.
 */
export const rubricRoutes = new Hono<AppEnv>()
  .get('/rubrics/stats', validQuery(StatsQuery), async (c) => {
    const run = c.get('run')
    const { instance_id: requested, steps } = c.req.valid('query')
    const instanceId = resolveInstance(run, requested)
    const address = { runId: run.id, instanceId }
    const [snapshot, rows]: [RubricSnapshot, StepHealthRecord[]] = await Promise.all([
      objects.instance(c.env, address, (instance) => instance.snapshot()),
      objects.instance(c.env, address, (instance) => instance.health(steps)),
    ])
    const active = new Set(snapshot.rubrics.map((rubric) => rubric.id))
    const known = new Map(snapshot.rubrics.map((rubric) => [rubric.id, rubric]))
    // A criterion retired since keeps its text: the newest version that had it says what it was.
    if (rows.some((row) => !active.has(row.rubric_id)))
      for (const record of (await objects.instance(c.env, address, (instance) =>
        instance.history(),
      )) as RubricVersionRecord[])
        for (const rubric of record.rubrics as Rubric[]) if (!active.has(rubric.id)) known.set(rubric.id, rubric)
    return c.json({
      run_id: run.id,
      instance_id: instanceId,
      rubric_version: snapshot.version,
      grade_max: run.config.grade_max,
      criteria: criteriaStats(rows, known, active),
    })
  })
  .get('/rubrics/history', validQuery(InstanceQuery), async (c) => {
    const run = c.get('run')
    const instanceId = resolveInstance(run, c.req.valid('query').instance_id)
    const address = { runId: run.id, instanceId }
    const versions: RubricVersionRecord[] = await objects.instance(c.env, address, (instance) => instance.history())
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
  .get('/rubrics', validQuery(RubricsQuery), async (c) => {
    const run = c.get('run')
    const { instance_id: requested, history } = c.req.valid('query')
    if (run.config.rubrics_mode === 'per_instance' && requested === undefined) {
      const instances = await objects.coordinator(c.env, run.id, (coordinator) => coordinator.instances())
      return c.json({ run_id: run.id, rubrics_mode: run.config.rubrics_mode, instances })
    }
    const instanceId = resolveInstance(run, requested)
    const address = { runId: run.id, instanceId }
    const snapshot: RubricSnapshot = await objects.instance(c.env, address, (instance) => instance.snapshot())
    return c.json({
      run_id: run.id,
      instance_id: instanceId,
      rubric_version: snapshot.version,
      anchor_rubrics: snapshot.rubrics.filter((rubric) => rubric.is_anchor),
      adaptive_rubrics: snapshot.rubrics.filter((rubric) => !rubric.is_anchor),
      ...(history ? { history: await objects.instance(c.env, address, (instance) => instance.history()) } : {}),
    })
  })

/** The instance a rubric read addresses: `global` in global mode; the given id in per_instance mode. */
function resolveInstance(run: AppEnv['Variables']['run'], requested: string | undefined): string {
  if (run.config.rubrics_mode === 'global') {
    if (requested !== undefined && requested !== 'global')
      throw new AppError('not_found', `run "${run.id}" is in global mode: its only instance is "global"`)
    return 'global'
  }
  if (requested === undefined) throw new AppError('invalid_request', 'instance_id is required in per_instance mode')
  return requested
}

/** One entry per criterion that has health rows, rubrics in force first; each with its steps oldest first. */
function criteriaStats(rows: readonly StepHealthRecord[], known: Map<string, Rubric>, active: Set<string>) {
  return [...groupBy(rows, (row) => row.rubric_id)]
    .map(([rubricId, steps]) => ({
      rubric_id: rubricId,
      text: known.get(rubricId)?.text ?? null,
      is_anchor: known.get(rubricId)?.is_anchor ?? false,
      active: active.has(rubricId),
      steps: steps.map(({ rubric_id: _, ...step }) => step),
    }))
    .sort((a, b) => Number(b.active) - Number(a.active) || Number(b.is_anchor) - Number(a.is_anchor))
}
