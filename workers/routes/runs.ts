import { Hono } from 'hono'
import { redactConfig, refuseLiteralCredentials } from '../../src/credentials/literal.ts'
import { AppError } from '../../src/errors/index.ts'
import { refuseLlmHost } from '../../src/llm/hosts.ts'
import { AGENT_ROLES, CreateRunRequest, RunConfig } from '../../src/schemas/run-config.ts'
import type { AppEnv } from '../env.ts'
import { notFound } from './not-found.ts'
import { forgetRunToken, requireAdmin } from '../middleware/auth.ts'
import { limitBody } from '../middleware/body-limit.ts'
import { jsonBody } from '../middleware/json-body.ts'
import { rateLimit } from '../middleware/rate-limit.ts'
import { checkRunSecrets } from '../scoring/models.ts'
import { heldSecrets } from '../scoring/secrets.ts'
import { createRun, issueToken, listTokens, randomHex, revokeToken } from '../runs/store.ts'
import { DEFAULT_RUN_ID, LOCAL_JUDGING, loadRunConfig, localJudgeAgents } from '../../durable-objects/run-config.ts'

/**
 * `POST /runs` (admin) — create a run; the answer carries its bearer token, shown this once.
 */
export const runAdminRoutes = new Hono<AppEnv>().post(
  '/runs',
  rateLimit(),
  requireAdmin(),
  limitBody('other'),
  jsonBody(CreateRunRequest),
  async (c) => {
    const { run_id: requested, config: asked } = c.get('body')
    const runId = requested ?? `run-${randomHex(6)}`
    // Under `npm start -- --judge local`, a run that names no agents gets the local judge's, and one that names no
    // judging gets verdicts, as the default run does.
    const localAgents = localJudgeAgents(c.env)
    const raw = ((await c.req.json()) as { config?: { agents?: unknown; judging?: unknown } }).config ?? {}
    const withAgents = localAgents && raw.agents === undefined ? { ...asked, agents: localAgents } : asked
    // Verdicts only where the run's budget has a call for each of its criteria; else it keeps grades.
    const verdicts =
      localAgents && raw.judging === undefined ? RunConfig.safeParse({ ...withAgents, judging: LOCAL_JUDGING }) : null
    const config = verdicts?.success ? verdicts.data : withAgents
    refuseLiteralCredentials(config, 'config', heldSecrets(c.env))
    for (const role of ['default', ...AGENT_ROLES] as const)
      refuseLlmHost(c.env, config.agents[role]?.base_url, `config.agents.${role}.base_url`)
    checkRunSecrets(c.env, config)
    if (runId === DEFAULT_RUN_ID)
      throw new AppError('run_exists', 'the default run is configured in config/default-run.json')
    const created = await createRun(c.env.DB, runId, config)
    if ('exists' in created) throw new AppError('run_exists', `a run named "${runId}" already exists`)
    return c.json({ run_id: runId, token: created.token, config, base_path: `/runs/${runId}` }, 201)
  },
)

/**
 * Run tokens (admin): `POST /runs/:runId/tokens` issues another (a rotation), `GET /runs/:runId/tokens` lists them
 * (ids and prefixes, never tokens), `DELETE /runs/:runId/tokens/:ref` revokes one named by its prefix (`rh_` and 8 hex
 * digits) or id; each change leaves an audit row. A revoked token is refused at once in this isolate and within
 * RUN_TOKEN_RECHECK_MS in every other.
 */
export const runTokenRoutes = new Hono<AppEnv>()
  // `/*` matches the bare `/runs/:runId/tokens` too.
  .use('/runs/:runId/tokens/*', rateLimit(), requireAdmin())
  .post('/runs/:runId/tokens', limitBody('other'), async (c) => {
    const runId = await existingRun(c.env, c.req.param('runId'))
    const issued = await issueToken(c.env.DB, runId, 'admin')
    return c.json({ run_id: runId, ...issued }, 201)
  })
  .get('/runs/:runId/tokens', async (c) => {
    const runId = await existingRun(c.env, c.req.param('runId'))
    return c.json({ run_id: runId, tokens: await listTokens(c.env.DB, runId) })
  })
  .delete('/runs/:runId/tokens/:ref', limitBody('other'), async (c) => {
    const runId = await existingRun(c.env, c.req.param('runId'))
    const reference = c.req.param('ref')
    if (!/^(rh_[0-9a-f]{8}|[0-9a-f]{8,64})$/i.test(reference))
      throw new AppError(
        'invalid_request',
        'name the token by its prefix (rh_ and 8 hex digits) or its id (8 or more hex digits of its hash), ' +
          'as GET /runs/:runId/tokens lists them',
      )
    const outcome = await revokeToken(c.env.DB, runId, reference, 'admin')
    if ('missing' in outcome) throw new AppError('not_found', `run "${runId}" has no token "${reference}"`)
    if ('ambiguous' in outcome)
      throw new AppError(
        'invalid_request',
        `"${reference}" names ${outcome.ambiguous} tokens of run "${runId}": give more of its id`,
      )
    const { token_hash: tokenHash, ...revoked } = outcome.revoked
    forgetRunToken(tokenHash)
    return c.json({ run_id: runId, revoked })
  })
  .all('/runs/:runId/tokens/*', notFound)

async function existingRun(env: AppEnv['Bindings'], runId: string): Promise<string> {
  if (runId === DEFAULT_RUN_ID)
    throw new AppError('invalid_request', 'the default run has no tokens of its own (the admin token opens it)')
  if (!(await loadRunConfig(env.DB, runId))) throw new AppError('run_not_found', `there is no run named "${runId}"`)
  return runId
}

/** `GET /run` — the addressed run's config (no secrets live in it; one stored before that rule is shown redacted). */
export const runInfoRoutes = new Hono<AppEnv>().get('/run', (c) => {
  const run = c.get('run')
  return c.json({ run_id: run.id, config: redactConfig(run.config, heldSecrets(c.env)).value })
})
