import { Hono } from 'hono'
import { z } from 'zod'
import { AppError } from '../../src/errors/index.ts'
import type { ArchivedRollout, ArchiveLine } from '../../src/schemas/archive.ts'
import type { Rubric } from '../../src/schemas/rubric.ts'
import { archiveKeyParts, archivePrefix } from '../../durable-objects/names.ts'
import type { AppEnv, Env } from '../env.ts'
import { integerParam, validQuery } from '../middleware/query.ts'
import { objects } from '../objects/call.ts'

/**
 * Archive objects one response reads. Each costs at most two subrequests (the R2 read and, for an instance's
 * rubric versions not yet sent, one RubricInstance call), so a response stays far below the 1,000 an invocation
 * may make, whatever the run's size; a longer read ends with a `more` line.
 */
const ARCHIVE_OBJECTS_PER_RESPONSE = 300

/** The query of `GET /archive`: a step range, a page size and where the last page ended. */
const ArchiveQuery = z
  .object({
    from_step: integerParam({ min: 0 }).default(0),
    to_step: integerParam({ min: 0 }).optional(),
    limit: integerParam({ min: 1, max: ARCHIVE_OBJECTS_PER_RESPONSE }).default(ARCHIVE_OBJECTS_PER_RESPONSE),
    after: z.string().optional(),
  })
  .superRefine((query, ctx) => {
    if (query.to_step !== undefined && query.to_step < query.from_step)
      ctx.addIssue({ code: 'custom', path: ['to_step'], message: `must be an integer ≥ ${query.from_step}` })
  })

type Run = AppEnv['Variables']['run']

/**
 * `GET /archive?from_step=&to_step=&limit=&after=` (also `/runs/<id>/archive`; the run's token or the admin token): the
 * run's archived scored rollouts as NDJSON, in step order. The first line says how the run judges (`kind: run`);
 * each instance's rubrics come once per version (`kind: rubrics`) before the first rollout scored on them; then
 * the rollouts (`ArchivedRollout`).  A response reads at most `limit` objects ({@link ARCHIVE_OBJECTS_PER_RESPONSE} and
 * the default) and then ends with `{"kind":"more","after":"<key>"}`: ask again with that `after`. A run without
 * `archive: true` is a 409.
 * @example runApi.route('/', archiveRoutes) // GET /runs/grpo-1/archive?from_step=0&to_step=9
 */
export const archiveRoutes = new Hono<AppEnv>().get('/archive', validQuery(ArchiveQuery), async (c) => {
  const run = c.get('run')
  const { from_step: fromStep, to_step: toStep, limit, after } = c.req.valid('query')
  const prefix = archivePrefix(run.id)
  if (after !== undefined && !after.startsWith(prefix))
    throw new AppError('invalid_request', `after must be a key this archive gave (it starts with "${prefix}")`)
  const bucket = c.env.ARCHIVE
  if (!run.config.archive) {
    throw new AppError(
      'archive_disabled',
      `run "${run.id}" does not archive its rollouts: create it with "archive": true to keep them`,
    )
  }
  if (!bucket)
    throw new AppError(
      'archive_disabled',
      'this Worker has no ARCHIVE bucket: bind an R2 bucket as ARCHIVE in wrangler.toml',
    )
  // '~' sorts after every character an instance id may hold: past all of step from_step - 1.
  const startAfter = after ?? (fromStep > 0 ? `${prefix}${String(fromStep - 1).padStart(6, '0')}/~` : undefined)
  const listed = await bucket.list({ prefix, limit, ...(startAfter ? { startAfter } : {}) })
  const keys: string[] = []
  let finished = !listed.truncated
  let lastRead: string | undefined
  for (const object of listed.objects) {
    const step = archiveKeyParts(object.key)?.step
    if (toStep !== undefined && step !== undefined && step > toStep) {
      finished = true
      break
    }
    lastRead = object.key
    if (step !== undefined) keys.push(object.key)
  }
  const head: ArchiveLine = {
    kind: 'run',
    run_id: run.id,
    from_step: fromStep,
    to_step: toStep ?? null,
    grade_max: run.config.grade_max,
    locale: run.config.locale,
    prompts: run.config.prompts,
  }
  const encoder = new TextEncoder()
  const lines = archiveLines(c.env, run, bucket, keys, finished ? undefined : lastRead)
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(encoder.encode(`${JSON.stringify(head)}\n`))
    },
    async pull(controller) {
      const next = await lines.next()
      if (next.done) controller.close()
      else controller.enqueue(encoder.encode(next.value))
    },
  })
  return c.body(body, 200, { 'content-type': 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-store' })
})

/**
 * The rubric and rollout lines of each object in turn (one chunk per object), then `more` when there is more to read.
 */
async function* archiveLines(
  env: Env,
  run: Run,
  bucket: R2Bucket,
  keys: readonly string[],
  more: string | undefined,
): AsyncGenerator<string> {
  const sent = new Set<string>()
  for (const key of keys) {
    const object = await bucket.get(key)
    // Deleted between the list and the read (a run reset): nothing to send for it.
    if (!object) continue
    // Passed on as stored: only the rubric versions are read.
    const lines = (await object.text()).split('\n').filter((line) => line.trim() !== '')
    const instanceId = archiveKeyParts(key)!.instanceId
    const versions = new Set(
      lines.map((line) => (JSON.parse(line) as Pick<ArchivedRollout, 'rubric_version'>).rubric_version),
    )
    const missing = [...versions].filter((version) => !sent.has(`${instanceId}\u0000${version}`))
    const rubricLines: ArchiveLine[] = []
    if (missing.length > 0) {
      const address = { runId: run.id, instanceId }
      const found: Record<number, Rubric[]> = await objects.instance(env, address, (instance) =>
        instance.versions(missing),
      )
      for (const version of missing) {
        sent.add(`${instanceId}\u0000${version}`)
        const rubrics = found[version]
        if (rubrics) rubricLines.push({ kind: 'rubrics', instance_id: instanceId, rubric_version: version, rubrics })
      }
    }
    yield `${[...rubricLines.map((line) => JSON.stringify(line)), ...lines].join('\n')}\n`
  }
  if (more) yield `${JSON.stringify({ kind: 'more', after: more } satisfies ArchiveLine)}\n`
}
