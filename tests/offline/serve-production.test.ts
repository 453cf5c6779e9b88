/**
 * `npm run serve -- --production` (issue 39 item 4): the self-hosted server can run under the production rules, where
 * judge and embedder hosts come from the operator's allow-list, instead of always `DEPLOYMENT=local`.
 */
import { describe, expect, it } from 'vitest'
import { serveBindings } from '../../offline/dev/serve.ts'

describe('npm run serve', () => {
  it('serves DEPLOYMENT=local by default and production with the operator allow-list under --production', () => {
    const env = { LLM_HOST_ALLOWLIST: 'judge.lan:8000', RM_TOKEN: 'rm-token' }
    expect(serveBindings({ adminToken: 'a' }, env)).toEqual({ DEPLOYMENT: 'local', ADMIN_TOKEN: 'a' })
    expect(serveBindings({ adminToken: 'a', production: true }, env)).toEqual({
      DEPLOYMENT: 'production',
      ADMIN_TOKEN: 'a',
      LLM_HOST_ALLOWLIST: 'judge.lan:8000',
      RM_TOKEN: 'rm-token',
    })
    expect(serveBindings({ adminToken: 'a', production: true }, {})).toEqual({
      DEPLOYMENT: 'production',
      ADMIN_TOKEN: 'a',
    })
  })
})
