/**
 * Credentials in documents someone else wrote (an autosr artifact, an artifact file, an upload), recognised by name and
 * by shape, so that none is copied, printed, stored or served:
 * - a field whose name says key, token, secret, password, authorization, cookie or credential (`api_key`,
 *   `OPENAI_KEY`, `auth_token`, `headers.Authorization`; not `max_tokens` or `score_key`, which hold none);
 * - a string that looks like one: a bearer or basic authorization value, a provider key (`sk-…`, `ghp_…`, `AKIA…`,
 *   `AIza…`, `xox…-`, `hf_…`, a JWT);
 * - a URL's user-info, its query values under such a name or of such a shape, and such a shape in its path (this
 *   project's own `rh_` tokens in `/t/<token>/…`);
 * - such a shape inside a longer text (a key pasted into a rubric), which is replaced by `[redacted]`.
 * Paths are reported, values never.
 */

/** Words of a field name that say its value opens something. */
const CREDENTIAL_WORDS = new Set([
  'key',
  'apikey',
  'token',
  'secret',
  'secrets',
  'password',
  'passwd',
  'passphrase',
  'authorization',
  'auth',
  'cookie',
  'cookies',
  'credential',
  'credentials',
  'pwd',
  'private',
])
/** Names that say "key" or "token" and hold no credential, in the formats this project reads. */
const HARMLESS_NAMES = new Set(['score_key'])

/** Whole values shaped like a credential (after trimming). */
const CREDENTIAL_SHAPES: readonly RegExp[] = [
  /^(?:bearer|basic|token)\s+\S{8,}$/i,
  /^sk-[\w-]{16,}$/,
  /^(?:gh[pousr]_|github_pat_)\w{20,}$/,
  /^A[KS]IA[0-9A-Z]{16}$/,
  /^AIza[\w-]{30,}$/,
  /^xox[abposr]-[\w-]{10,}$/,
  /^hf_[A-Za-z0-9]{30,}$/,
  /^eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}$/,
  /^rh_[\w-]{16,}$/,
  /^sk_(?:live|test)_\w{16,}$/,
  /^glpat-[\w-]{20,}$/,
  /^gsk_\w{20,}$/,
]

/**
 * Credential shapes found inside a longer text (a key pasted into a rubric, a token in a URL path): distinctive
 * prefixes only, bounded by non-word characters, so prose never matches.
 */
const EMBEDDED_SHAPES = new RegExp(
  `(?<![\\w-])(?:${[
    'sk-[\\w-]{16,}',
    'sk_(?:live|test)_\\w{16,}',
    'glpat-[\\w-]{20,}',
    'gsk_\\w{20,}',
    '(?:gh[pousr]_|github_pat_)\\w{20,}',
    'xox[abposr]-[\\w-]{10,}',
    'hf_[A-Za-z0-9]{30,}',
    'AKIA[0-9A-Z]{16}',
    'AIza[\\w-]{30,}',
    'rh_[0-9a-f]{48}',
  ].join('|')})(?![\\w-])`,
  'g',
)

/** What replaces a credential in a redacted text. */
export const REDACTED = '[redacted]'

/**
 * `text` with every credential shape inside it replaced by {@link REDACTED}, and how many went.
 * @example redactEmbedded('use sk-abcdefghijklmnop1234 here') // { text: 'use [redacted] here', count: 1 }
 */
export function redactEmbedded(text: string): { text: string; count: number } {
  let count = 0
  const redacted = text.replace(EMBEDDED_SHAPES, () => {
    count++
    return REDACTED
  })
  return { text: count === 0 ? text : redacted, count }
}

/**
 * True when a field of this name holds a credential: one of its words (split at `_`, `-`, `.`, spaces and camelCase)
 * is key, token, secret, password, authorization, cookie or credential.
 * @example isCredentialName('OPENAI_KEY') // true; isCredentialName('max_tokens') // false
 */
export function isCredentialName(name: string): boolean {
  if (HARMLESS_NAMES.has(name)) return false
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[\s_.-]+/)
  return words.some((word) => CREDENTIAL_WORDS.has(word))
}

/**
 * True when a whole string looks like a credential: an authorization value or a provider key.
 * @example looksLikeCredential('Bearer sk-abcdefghijklmnop') // true; looksLikeCredential('qwen/qwen3-8b') // false
 */
export function looksLikeCredential(value: string): boolean {
  const trimmed = value.trim()
  return CREDENTIAL_SHAPES.some((shape) => shape.test(trimmed))
}

/**
 * A URL without its user-info and without query values that are credentials by name or shape, and which parts went;
 * undefined for a string that is no http(s) URL.
 * @example withoutUrlCredentials('https://u:p@h/v1?key=x&a=1') // { url: 'https://h/v1?a=1', dropped: ['user-info',
 *   'query key'] }
 */
function withoutUrlCredentials(text: string): { url: string; dropped: string[] } | undefined {
  if (!/^https?:\/\//i.test(text.trim())) return undefined
  let url: URL
  try {
    url = new URL(text.trim())
  } catch {
    return undefined
  }
  const dropped: string[] = []
  if (url.username !== '' || url.password !== '') {
    url.username = ''
    url.password = ''
    dropped.push('user-info')
  }
  for (const [name, value] of [...url.searchParams]) {
    if (!isCredentialName(name) && !looksLikeCredential(value)) continue
    url.searchParams.delete(name)
    dropped.push(`query ${name}`)
  }
  const path = redactEmbedded(url.pathname)
  if (path.count > 0) {
    url.pathname = path.text
    dropped.push('path')
  }
  return { url: dropped.length === 0 ? text : url.toString(), dropped }
}

/**
 * A URL as it may be shown or logged: user-info, credential query values and credential shapes anywhere in it
 * replaced by {@link REDACTED}; a text that is no URL only loses its embedded credential shapes.
 * @example redactUrl('http://u:p@h/t/rh_…/v1?key=x&a=1') // 'http://[redacted]@h/t/[redacted]/v1?key=[redacted]&a=1'
 */
export function redactUrl(text: string): string {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return redactEmbedded(text).text
  }
  const userInfo = url.username !== '' || url.password !== ''
  let query = ''
  let hiddenQuery = false
  for (const [name, value] of url.searchParams) {
    const hidden = isCredentialName(name) || looksLikeCredential(value) || redactEmbedded(value).count > 0
    hiddenQuery ||= hidden
    query += `${query === '' ? '?' : '&'}${encodeURIComponent(name)}=${hidden ? REDACTED : encodeURIComponent(value)}`
  }
  if (!userInfo && !hiddenQuery) return redactEmbedded(text).text
  const shown = `${url.protocol}//${userInfo ? `${REDACTED}@` : ''}${url.host}${url.pathname}${query}${url.hash}`
  return redactEmbedded(shown).text
}

/**
 * An endpoint as it may be recorded: scheme, host, port and path; no user-info, query or fragment.
 * @example endpointOnly('https://user:sk-x@api.example.com:8443/v1?key=sk-x#f') // 'https://api.example.com:8443/v1'
 */
export function endpointOnly(text: string): string {
  const url = new URL(text.trim())
  return `${url.protocol}//${url.host}${url.pathname}`
}

/**
 * `value` without its credentials (see the module comment), at any depth, and the path of each one dropped: a field
 * by name, a string by shape (an array loses the element), a URL's user-info and query values (the URL is kept).
 * @example withoutCredentials({ llm: { api_key: 'x', base_url: 'https://h/v1' } }) // { value: { llm: { base_url:
 *   'https://h/v1' } }, dropped: ['llm.api_key'] }
 */
export function withoutCredentials(value: unknown, path = ''): { value: unknown; dropped: string[] } {
  const dropped: string[] = []
  const clean = (item: unknown, at: string): { keep: boolean; value: unknown } => {
    if (typeof item === 'string') {
      if (looksLikeCredential(item)) {
        dropped.push(at)
        return { keep: false, value: undefined }
      }
      const url = withoutUrlCredentials(item)
      dropped.push(...(url?.dropped ?? []).map((part) => `${at} (${part})`))
      if (url) return { keep: true, value: url.url }
      const embedded = redactEmbedded(item)
      if (embedded.count > 0) dropped.push(`${at} (inside the text)`)
      return { keep: true, value: embedded.text }
    }
    if (Array.isArray(item)) {
      const kept: unknown[] = []
      item.forEach((element, index) => {
        const inner = clean(element, `${at}[${index}]`)
        if (inner.keep) kept.push(inner.value)
      })
      return { keep: true, value: kept }
    }
    if (typeof item !== 'object' || item === null) return { keep: true, value: item }
    const kept: Record<string, unknown> = {}
    for (const [key, field] of Object.entries(item)) {
      const fieldPath = at === '' ? key : `${at}.${key}`
      if (isCredentialName(key)) {
        dropped.push(fieldPath)
        continue
      }
      const inner = clean(field, fieldPath)
      if (inner.keep) kept[key] = inner.value
    }
    return { keep: true, value: kept }
  }
  return { value: clean(value, path).value, dropped }
}

/**
 * `text` with every http(s) URL in it redacted ({@link redactUrl}) and every other credential shape replaced: for a
 * message that may quote a URL someone typed (an error, a report line).
 * @example redactUrlsIn('cannot reach http://u:p@h/v1: refused') // 'cannot reach http://[redacted]@h/v1: refused'
 */
export function redactUrlsIn(text: string): string {
  return redactEmbedded(text.replace(/https?:\/\/[^\s"'<>`]+/gi, (url) => redactUrl(url))).text
}
