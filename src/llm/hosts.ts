/**
 * Where the server may send its keys: the judge and embedder endpoints a run config, a deployment or a var names. In
 * production (`DEPLOYMENT` other than `local`), a host must be on the operator's allow-list (the var
 * `LLM_HOST_ALLOWLIST`, when set), and a loopback, link-local, private or unspecified address (the cloud metadata
 * service at 169.254.169.254 among them) is refused unless listed, since the Worker sends such a host its API key.
 * The URL parser reads every spelling of an address the same way (`0x7f000001`, `2130706433` and `127.1` are
 * 127.0.0.1), so none slips past. A name is not resolved: a public name that points inward is the allow-list's to stop.
 * Local development and tests (`DEPLOYMENT=local`) reach loopback stubs freely.
 */
import { AppError } from '../errors/index.ts'

/** What the host rule reads from the Worker's vars. */
export interface HostPolicy {
  DEPLOYMENT?: string | undefined
  /** Comma-separated `host`, `host:port` or `*.domain` entries. */
  LLM_HOST_ALLOWLIST?: string | undefined
}

/** IPv4 ranges that are not the public Internet: [network, prefix length]. */
const INTERNAL_V4: readonly [number, number][] = [
  [0x00000000, 8], // "this" network, 0.0.0.0
  [0x0a000000, 8], // private
  [0x64400000, 10], // carrier-grade NAT
  [0x7f000000, 8], // loopback
  [0xa9fe0000, 16], // link-local, cloud metadata
  [0xac100000, 12], // private
  [0xc0a80000, 16], // private
]

function ipv4Number(host: string): number | undefined {
  const parts = host.split('.')
  if (parts.length !== 4 || parts.some((part) => !/^\d{1,3}$/.test(part))) return undefined
  return parts.reduce((sum, part) => sum * 256 + Number(part), 0)
}

/**
 * True for a loopback, link-local, private or unspecified address, or a `localhost` name (hostnames as `new URL`
 * gives them: IPv6 in brackets).
 * @example isInternalHost('169.254.169.254') // true; isInternalHost('[::1]') // true
 *   isInternalHost('api.openai.com') // false
 */
function isInternalHost(hostname: string): boolean {
  const host = hostname.toLowerCase()
  if (host === 'localhost' || host.endsWith('.localhost')) return true
  const v4 = ipv4Number(host)
  if (v4 !== undefined)
    return INTERNAL_V4.some(([base, bits]) => Math.floor(v4 / 2 ** (32 - bits)) === Math.floor(base / 2 ** (32 - bits)))
  if (!host.startsWith('[')) return false
  const v6 = host.slice(1, -1)
  const mapped = v6.match(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/)?.[1] ?? v6.match(/^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/)
  if (typeof mapped === 'string') return isInternalHost(mapped)
  if (Array.isArray(mapped)) {
    const high = Number.parseInt(mapped[1]!, 16)
    const low = Number.parseInt(mapped[2]!, 16)
    return isInternalHost(`${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`)
  }
  return v6 === '::' || v6 === '::1' || /^f[cd]/.test(v6) || /^fe[89ab]/.test(v6)
}

/** True when the allow-list names this URL's host (`host`, `host:port` or `*.domain`). */
function listed(url: URL, allowList: string): boolean {
  const host = url.hostname.toLowerCase()
  const withPort = `${host}:${url.port || (url.protocol === 'https:' ? '443' : '80')}`
  return allowList
    .split(',')
    .map((entry) => entry.trim().toLowerCase())
    .filter((entry) => entry !== '')
    .some((entry) => (entry.startsWith('*.') ? host.endsWith(entry.slice(1)) : entry === host || entry === withPort))
}

/**
 * Why the server may not send its keys to `text` (naming `field`), or undefined when it may. Outside production
 * every host may be reached.
 * @example llmHostProblem('http://169.254.169.254/v1', 'llm.base_url', { DEPLOYMENT: 'production' }) // '…internal…'
 */
function llmHostProblem(text: string, field: string, policy: HostPolicy): string | undefined {
  if (policy.DEPLOYMENT === 'local') return undefined
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return undefined
  }
  const allowList = policy.LLM_HOST_ALLOWLIST?.trim() ?? ''
  if (allowList !== '' && listed(url, allowList)) return undefined
  if (isInternalHost(url.hostname))
    return (
      `${field}: ${url.hostname} is a loopback, link-local or private address, where this server does not send its ` +
      'API keys in production; an operator who means it lists the host in the var LLM_HOST_ALLOWLIST'
    )
  if (allowList !== '')
    return (
      `${field}: ${url.hostname} is not on this server's allow-list of judge and embedder hosts (the var ` +
      'LLM_HOST_ALLOWLIST); ask the operator to list it'
    )
  return undefined
}

/**
 * Throws 400 `llm_host_not_allowed` when {@link llmHostProblem} finds one.
 * @example refuseLlmHost(env, config.agents.default.base_url, 'config.agents.default.base_url')
 */
export function refuseLlmHost(policy: HostPolicy, url: string | undefined, field: string): void {
  if (url === undefined) return
  const problem = llmHostProblem(url, field, policy)
  if (problem) throw new AppError('llm_host_not_allowed', problem)
}
