/**
 * Where the server may send its keys: the judge and embedder endpoints a run config, a deployment or a var names. In
 * production (`DEPLOYMENT` other than `local`), a host must be on the operator's allow-list (the var
 * `LLM_HOST_ALLOWLIST`), and without one only a public address is taken: a loopback, link-local, private, multicast
 * or unspecified address (the cloud metadata service at 169.254.169.254 among them, and every IPv6 form that carries
 * such an IPv4 address) is refused unless listed, since the Worker sends such a host its API key. The URL parser reads
 * every spelling of an address the same way (`0x7f000001`, `2130706433` and `127.1` are 127.0.0.1), so none slips
 * past. A name is never resolved here, and a resolver may point it anywhere (`/etc/hosts` maps `runsc` and `vm` to
 * loopback on some hosts), so in production a host by name is taken only from the allow-list. Local development and
 * tests (`DEPLOYMENT=local`) reach loopback stubs freely.
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
  [0xc0000000, 24], // IETF protocol assignments
  [0xc0000200, 24], // documentation
  [0xc0a80000, 16], // private
  [0xc6120000, 15], // benchmarking, 198.18.0.0/15
  [0xc6336400, 24], // documentation
  [0xcb007100, 24], // documentation
  [0xe0000000, 4], // multicast, 224.0.0.0/4
  [0xf0000000, 4], // reserved and broadcast, 240.0.0.0/4
]

/** Names that are this machine or its own network, whatever a resolver says (trailing dots removed first). */
const INTERNAL_NAME = /(?:^|\.)(?:localhost|localdomain|local|internal|home\.arpa|lan|intranet|svc|cluster\.local)$/

function ipv4Number(host: string): number | undefined {
  const parts = host.split('.')
  if (parts.length !== 4 || parts.some((part) => !/^\d{1,3}$/.test(part))) return undefined
  return parts.reduce((sum, part) => sum * 256 + Number(part), 0)
}

function isInternalV4(v4: number): boolean {
  return INTERNAL_V4.some(([base, bits]) => Math.floor(v4 / 2 ** (32 - bits)) === Math.floor(base / 2 ** (32 - bits)))
}

/** The eight 16-bit groups of an IPv6 address (as `new URL` writes it, without brackets), or undefined. */
function ipv6Groups(v6: string): number[] | undefined {
  let text = v6
  const dotted = text.match(/^(.*:)(\d+\.\d+\.\d+\.\d+)$/)
  if (dotted) {
    const v4 = ipv4Number(dotted[2]!)
    if (v4 === undefined) return undefined
    text = `${dotted[1]}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`
  }
  const halves = text.split('::')
  if (halves.length > 2) return undefined
  const parse = (half: string) => (half === '' ? [] : half.split(':').map((group) => Number.parseInt(group, 16)))
  const head = parse(halves[0]!)
  const tail = halves.length === 2 ? parse(halves[1]!) : []
  const missing = 8 - head.length - tail.length
  if (missing < 0 || (halves.length === 1 && missing !== 0)) return undefined
  const groups = [...head, ...Array<number>(missing).fill(0), ...tail]
  return groups.every((group) => Number.isInteger(group) && group >= 0 && group <= 0xffff) ? groups : undefined
}

/**
 * True for an IPv6 address that is not the public Internet: unspecified, loopback, unique-local, link- and
 * site-local, multicast, discard, documentation, Teredo, and every form that carries an IPv4 address inside it
 * (IPv4-compatible `::a.b.c.d`, mapped `::ffff:a.b.c.d`, translated `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`,
 * 6to4 `2002:aabb:ccdd::`) when that address is internal.
 */
function isInternalV6(groups: readonly number[]): boolean {
  const [g0, g1, g2, g3, g4, g5, g6, g7] = groups as [number, number, number, number, number, number, number, number]
  const tail = g6 * 0x10000 + g7
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0) {
    if (g4 === 0 && g5 === 0) return g6 === 0 || isInternalV4(tail) // ::, ::1, ::a.b.c.d
    if ((g4 === 0 && g5 === 0xffff) || (g4 === 0xffff && g5 === 0)) return isInternalV4(tail) // mapped, translated
  }
  if (g0 === 0x64 && g1 === 0xff9b) return g2 !== 0 || g3 !== 0 || g4 !== 0 || g5 !== 0 || isInternalV4(tail)
  if (g0 === 0x2002) return isInternalV4(g1 * 0x10000 + g2)
  if (g0 === 0x2001 && (g1 === 0 || g1 === 0xdb8)) return true // Teredo, documentation
  if (g0 === 0x100 && g1 === 0 && g2 === 0 && g3 === 0) return true // discard
  return (g0 & 0xfe00) === 0xfc00 || (g0 & 0xffc0) === 0xfe80 || (g0 & 0xffc0) === 0xfec0 || (g0 & 0xff00) === 0xff00
}

/**
 * True for a loopback, link-local, private, multicast or otherwise non-public address, or a local name (`localhost`,
 * `*.local`, `*.internal`, `localhost.localdomain`, with or without trailing dots), as `new URL` gives hostnames (IPv6
 * in brackets).
 * @example isInternalHost('169.254.169.254') // true; isInternalHost('[::1]') // true
 *   isInternalHost('api.openai.com') // false
 */
function isInternalHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.+$/, '')
  if (host.startsWith('[')) {
    const groups = ipv6Groups(host.slice(1, -1).replace(/%.*$/, ''))
    return groups === undefined || isInternalV6(groups)
  }
  const v4 = ipv4Number(host)
  if (v4 !== undefined) return isInternalV4(v4)
  return isLocalName(host)
}

/**
 * True for a name of this machine or its own network (`localhost`, `*.local`, `*.internal`, `*.localdomain`,
 * `*.home.arpa`, `*.lan`, a single label), trailing dots ignored: what no public URL a caller sends may name.
 * @example isLocalName('localhost.') // true; isLocalName('kubernetes.default.svc.') // true
 *   isLocalName('images.example.org') // false
 */
export function isLocalName(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.+$/, '')
  return !host.includes('.') || INTERNAL_NAME.test(host)
}

/** True when `hostname` (as `new URL` gives it) is an address rather than a name. */
function isAddress(hostname: string): boolean {
  return hostname.startsWith('[') || ipv4Number(hostname.replace(/\.+$/, '')) !== undefined
}

/** True when the allow-list names this URL's host (`host`, `host:port` or `*.domain`). */
function listed(url: URL, allowList: string): boolean {
  const host = url.hostname.toLowerCase().replace(/\.+$/, '')
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
      `${field}: ${url.hostname} is a loopback, link-local, private or local address or name, where this server ` +
      'does not send its API keys in production; an operator who means it lists the host in the var LLM_HOST_ALLOWLIST'
    )
  if (allowList !== '')
    return (
      `${field}: ${url.hostname} is not on this server's allow-list of judge and embedder hosts (the var ` +
      'LLM_HOST_ALLOWLIST); ask the operator to list it'
    )
  if (!isAddress(url.hostname))
    return (
      `${field}: ${url.hostname} is a host name, and this server has no allow-list of judge and embedder hosts: in ` +
      "production it sends its API keys to a name only when the var LLM_HOST_ALLOWLIST lists it, since a name's " +
      'address is whatever a resolver says (/etc/hosts maps some to loopback); the operator lists the hosts it means'
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
