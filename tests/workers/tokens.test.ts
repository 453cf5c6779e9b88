/**
 * Run tokens can be rotated and revoked (admin): a revoked token is refused on the next request in the isolate that
 * revoked it, and in any other isolate within RUN_TOKEN_RECHECK_MS; every change leaves an audit row.
 */
import { env } from 'cloudflare:workers'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { RUN_TOKEN_RECHECK_MS } from '../../workers/middleware/auth.ts'
import { ADMIN_TOKEN, METADATA, call, createRun, rollout } from './helpers.ts'

const RUBRICS = { anchor_rubrics: [{ text: 'The final answer is correct.' }] }
const score = (token: string, id: string) =>
  call('POST', '/score', { token, body: { rollout: rollout(id), metadata: METADATA } })
const audit = async (runId: string) =>
  (
    await env.DB.prepare('SELECT action, actor FROM token_audit WHERE run_id = ? ORDER BY id')
      .bind(runId)
      .all<{ action: string; actor: string }>()
  ).results

afterEach(() => vi.useRealTimers())

describe('run tokens', () => {
  it('rotates: a second token works beside the first; revoking the first refuses it on the next request', async () => {
    const run = await createRun(RUBRICS)
    expect((await score(run.token, 'a-1')).status).toBe(200)
    const issued = await call('POST', `/runs/${run.runId}/tokens`, { token: ADMIN_TOKEN })
    expect(issued.status).toBe(201)
    expect(issued.json).toMatchObject({
      run_id: run.runId,
      token: expect.stringMatching(/^rh_/),
      prefix: issued.json.token.slice(0, 11),
      revoked_at: null,
    })
    expect((await score(issued.json.token, 'b-1')).status).toBe(200)

    const listed = await call('GET', `/runs/${run.runId}/tokens`, { token: ADMIN_TOKEN })
    expect(listed.json.tokens.map((token: { prefix: string }) => token.prefix)).toEqual([
      run.token.slice(0, 11),
      issued.json.token.slice(0, 11),
    ])
    expect(listed.text).not.toContain(run.token)
    expect(listed.text).not.toContain(issued.json.token)

    const revoked = await call('DELETE', `/runs/${run.runId}/tokens/${run.token.slice(0, 11)}`, { token: ADMIN_TOKEN })
    expect(revoked.status).toBe(200)
    expect(revoked.json.revoked).toMatchObject({ prefix: run.token.slice(0, 11), revoked_at: expect.any(String) })
    const refused = await score(run.token, 'a-2')
    expect(refused.status).toBe(401)
    expect(refused.json.error.message).toContain('revoked')
    expect((await score(issued.json.token, 'b-2')).status).toBe(200)
    // Revoking again changes nothing; an unknown one is a 404.
    expect(
      (await call('DELETE', `/runs/${run.runId}/tokens/${listed.json.tokens[0].id}`, { token: ADMIN_TOKEN })).json
        .revoked.revoked_at,
    ).toBe(revoked.json.revoked.revoked_at)
    expect((await call('DELETE', `/runs/${run.runId}/tokens/rh_00000000`, { token: ADMIN_TOKEN })).status).toBe(404)
    expect(await audit(run.runId)).toEqual([
      { action: 'created', actor: 'admin' },
      { action: 'created', actor: 'admin' },
      { action: 'revoked', actor: 'admin' },
    ])
  })

  it('a token revoked by another isolate is served until its cached check is RUN_TOKEN_RECHECK_MS old', async () => {
    const run = await createRun(RUBRICS)
    vi.useFakeTimers({ toFake: ['Date'] })
    const checkedAt = Date.now()
    vi.setSystemTime(checkedAt)
    expect((await score(run.token, 'c-1')).status).toBe(200)
    // Another isolate revoked it: only D1 knows.
    await env.DB.prepare('UPDATE run_tokens SET revoked_at = ? WHERE run_id = ?')
      .bind(new Date().toISOString(), run.runId)
      .run()
    // This isolate trusts its check for the whole window: the revocation is not seen, by design.
    vi.setSystemTime(checkedAt + RUN_TOKEN_RECHECK_MS - 1)
    expect((await score(run.token, 'c-2')).status).toBe(200)
    vi.setSystemTime(checkedAt + RUN_TOKEN_RECHECK_MS)
    const refused = await score(run.token, 'c-3')
    expect(refused.status).toBe(401)
    expect(refused.json.error.message).toContain('revoked')
  })

  it('only the admin manages tokens; bad references and the default run are 4xx', async () => {
    const run = await createRun(RUBRICS)
    expect((await call('POST', `/runs/${run.runId}/tokens`, { token: run.token })).status).toBe(403)
    expect((await call('GET', `/runs/${run.runId}/tokens`)).status).toBe(401)
    expect(
      (await call('DELETE', `/runs/${run.runId}/tokens/${run.token.slice(0, 11)}`, { token: run.token })).status,
    ).toBe(403)
    expect((await call('DELETE', `/runs/${run.runId}/tokens/xyz`, { token: ADMIN_TOKEN })).status).toBe(400)
    expect((await call('POST', '/runs/default/tokens', { token: ADMIN_TOKEN })).status).toBe(400)
    expect((await call('POST', '/runs/no-such-run/tokens', { token: ADMIN_TOKEN })).status).toBe(404)
    expect((await score(run.token, 'd-1')).status).toBe(200)
  })
})
