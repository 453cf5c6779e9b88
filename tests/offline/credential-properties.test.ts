/**
 * Credentials and hosts as properties (issue 46 items 4-6): every spelling of a credential name (case, separators,
 * run together, percent-encoded), every credential value (this project's admin, run and session tokens, provider
 * keys, JWTs, opaque bearers) in every place a config holds text (whole, in prose, in a URL path raw or encoded, in a
 * query, as an object's key), and every value the server holds as a secret, is refused in a config and dropped from
 * an import, its value never repeated; harmless names pass. Every spelling of an internal address or local name is
 * refused as a judge host in production, and a name is refused there until the allow-list names it.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { isCredentialName, redactUrl, redactUrlsIn, withoutCredentials } from '../../src/credentials/index.ts'
import { refuseLiteralCredentials } from '../../src/credentials/literal.ts'
import { AppError } from '../../src/errors/index.ts'
import { refuseLlmHost } from '../../src/llm/hosts.ts'
import {
  credentialName,
  credentialPlacement,
  credentialValue,
  HARMLESS_NAMES,
  internalHostSpelling,
} from '../support/spellings.ts'

/** The refusal of `value` as a run config, or undefined when it is taken. */
function refusal(value: unknown, held: Record<string, string> = {}): AppError | undefined {
  try {
    refuseLiteralCredentials(value, 'config', held)
    return undefined
  } catch (error) {
    if (error instanceof AppError) return error
    throw error
  }
}

describe('credential names', () => {
  it('are recognised in every spelling, and refused as a field or header with a literal value', () => {
    fc.assert(
      fc.property(credentialName(), (name) => {
        expect(isCredentialName(name), name).toBe(true)
        expect(refusal({ agents: { scorer: { headers: { [name]: 'plain-value' } } } }), name).toBeDefined()
        expect(withoutCredentials({ metadata: { [name]: 'plain-value' } }).dropped, name).toEqual([`metadata.${name}`])
      }),
      { numRuns: 500 },
    )
  })

  it('that hold nothing pass', () => {
    for (const name of HARMLESS_NAMES) expect(isCredentialName(name), name).toBe(false)
    expect(refusal({ access: 'open', max_tokens: 10, metadata: { source_session_id: 's-1', keywords: 'a b' } })).toBe(
      undefined,
    )
  })
})

describe('credential values', () => {
  it('are refused wherever a config holds text, and dropped on import, never repeated', () => {
    fc.assert(
      fc.property(
        credentialValue().chain((value) => fc.tuple(fc.constant(value), credentialPlacement(value))),
        ([value, placed]) => {
          const refused = refusal({ anchor_rubrics: [{ text: placed }] })
          expect(refused, placed).toBeDefined()
          expect(JSON.stringify(refused!.details), placed).toContain('config.anchor_rubrics[0].text')
          expect(JSON.stringify({ message: refused!.message, details: refused!.details })).not.toContain(value)
          const cleaned = withoutCredentials({ rubric: placed })
          expect(cleaned.dropped.length, placed).toBeGreaterThan(0)
          expect(JSON.stringify(cleaned.value), placed).not.toContain(value.replace(/^(?:bearer|basic) /i, ''))
          expect(redactUrlsIn(placed), placed).not.toContain(value.replace(/^(?:bearer|basic) /i, ''))
        },
      ),
      { numRuns: 500 },
    )
  })

  it('as an object key are refused and dropped, the key reported as [redacted]', () => {
    fc.assert(
      fc.property(credentialValue(), (value) => {
        const config = { agents: { scorer: { headers: { [value]: 'x' } } }, instance_rubrics: { [value]: [] } }
        const refused = refusal(config)
        expect(refused).toBeDefined()
        expect(JSON.stringify(refused!.details)).not.toContain(value)
        expect(JSON.stringify(refused!.details)).toContain('config.agents.scorer.headers.[redacted]')
        const cleaned = withoutCredentials({ metadata: { [value]: 'x' } })
        expect(cleaned.value).toEqual({ metadata: {} })
        expect(cleaned.dropped).toEqual(['metadata.[redacted] (a key)'])
      }),
      { numRuns: 200 },
    )
  })

  it('that the server holds as a secret are refused in any placement, whatever their shape', () => {
    const secretText = fc.string({
      unit: fc.constantFrom(...'abcdefghijklmnop0123456789-_'),
      minLength: 12,
      maxLength: 40,
    })
    fc.assert(
      fc.property(
        secretText.chain((secret) => fc.tuple(fc.constant(secret), credentialPlacement(secret))),
        ([secret, placed]) => {
          const held = { RM_TOKEN: secret }
          const refused = refusal({ anchor_rubrics: [{ text: placed }] }, held)
          expect(refused, placed).toBeDefined()
          expect(refused!.message).toContain('the value of RM_TOKEN, a secret of this server')
          expect(JSON.stringify({ message: refused!.message, details: refused!.details })).not.toContain(secret)
          expect(withoutCredentials({ text: placed }, '', held).dropped).toEqual([
            'text (the value of RM_TOKEN, a secret of this server)',
          ])
        },
      ),
      { numRuns: 300 },
    )
  })

  it('in signed-URL and OAuth query names (sig, code) are refused and redacted', () => {
    for (const url of [
      'https://h.example/v1?sig=abc123',
      'https://h.example/v1?code=4/0Ab_c',
      'https://h/v1?Signature=x',
    ]) {
      expect(refusal({ agents: { scorer: { base_url: url } } }), url).toBeDefined()
      expect(redactUrl(url), url).toContain('=[redacted]')
    }
  })
})

describe('judge and embedder hosts in production', () => {
  const production = { DEPLOYMENT: 'production' }
  const refuses = (policy: Record<string, string>, url: string) => {
    try {
      refuseLlmHost(policy, url, 'llm.base_url')
      return false
    } catch (error) {
      return error instanceof AppError && error.code === 'llm_host_not_allowed'
    }
  }

  it('refuse every spelling of an internal address or local name, unless that very host is listed', () => {
    fc.assert(
      fc.property(internalHostSpelling(), fc.constantFrom('', ':8000'), (host, port) => {
        const url = `http://${host}${port}/v1`
        expect(refuses(production, url), url).toBe(true)
        expect(refuses({ ...production, LLM_HOST_ALLOWLIST: 'judge.example, 1.1.1.1' }, url), url).toBe(true)
        expect(refuses({ DEPLOYMENT: 'local' }, url), url).toBe(false)
      }),
      { numRuns: 600 },
    )
  })

  it('refuse a name without an allow-list, take it when listed (trailing dot or not), take a public address', () => {
    fc.assert(
      fc.property(fc.domain(), fc.constantFrom('', '.'), (name, dot) => {
        const url = `https://${name}${dot}/v1`
        expect(refuses(production, url), url).toBe(true)
        expect(refuses({ ...production, LLM_HOST_ALLOWLIST: name }, url), url).toBe(false)
      }),
      { numRuns: 300 },
    )
    for (const url of ['https://1.1.1.1/v1', 'https://[2606:4700:4700::1111]/v1', 'http://8.8.8.8:8000/v1'])
      expect(refuses(production, url), url).toBe(false)
  })
})
