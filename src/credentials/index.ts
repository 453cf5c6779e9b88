/**
 * Credentials in documents someone else wrote (an autosr artifact, an artifact file, an upload), recognised by name and
 * by shape, so that none is copied, printed, stored or served:
 * - a field whose name says key, token, secret, password, authorization, cookie or credential, in words or run
 *   together (`api_key`, `OPENAI_KEY`, `auth_token`, `headers.Authorization`, `xapikey`, `clientsecret`, `X-Session`;
 *   not `max_tokens` or `score_key`, which hold none);
 * - a string that looks like one: a bearer or basic authorization value, a provider key (`sk-…`, `ghp_…`, `AKIA…`,
 *   `AIza…`, `xox…-`, `hf_…`, a JWT), this project's own tokens (`rh_…`, `rh_admin_…`, a dashboard session
 *   cookie);
 * - a URL's user-info, its query values under such a name (or `sig`, `signature`, `code`) or of such a shape, and such
 *   a shape in its path (`/t/<token>/…`), percent-encoded or not;
 * - such a shape inside a longer text (a key pasted into a rubric), which is replaced by `[redacted]`, or as an
 *   object's key (a header name, a metadata key);
 * - a value the server itself holds as a secret (its admin and RM tokens, its API keys), when the caller passes them.
 * Paths are reported, values never (a key that is a credential is reported as `[redacted]`).
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
  'authentication',
  'passcode',
])
/** What a `key` opens, run together with it: `apikey`, `privatekey`, `openaikey`. */
const KEY_OPENERS = [
  'api',
  'auth',
  'access',
  'private',
  'secret',
  'client',
  'signing',
  'session',
  'master',
  'encryption',
  'service',
  'app',
  'user',
  'refresh',
  'x',
  'id',
  'openai',
  'anthropic',
  'hf',
  'github',
  'gitlab',
  'aws',
  'azure',
  'gcp',
  'google',
  'stripe',
  'slack',
  'groq',
  'mistral',
  'cohere',
]
/**
 * A word that ends in a credential noun run together with what comes before it (`xapikey`, `authtoken`,
 * `clientsecret`, `openaipassword`): a field name written as one word. `key` counts only after what it opens
 * (`apikey`, `privatekey`), since plain words end in it (`monkey`).
 */
const CREDENTIAL_SUFFIX = new RegExp(
  `(?:token|secret|password|passwd|pwd|passphrase|credentials?|cookie|auth|(?:${KEY_OPENERS.join('|')})key)$`,
)
/** The last word of a longer name that says what the value opens: `X-Session`, `X-Access`, `x-amz-signature`. */
const CREDENTIAL_LAST_WORDS = new Set(['session', 'access', 'signature', 'sig'])
/** The same, run together into one word with what comes before it: `xsession`, `upstreamaccess`. */
const CREDENTIAL_LAST_SUFFIX = /.(?:session|access|signature)$/
/** Query parameter names that carry a credential in a URL: signed URLs' `sig`, OAuth's `code`. */
const CREDENTIAL_QUERY_NAMES = new Set(['sig', 'signature', 'code', 'sas', 'signed'])
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
  /^[0-9a-f]{32}\.[\w-]{43}$/,
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
    'rh_[\\w-]{16,}',
    'eyJ[\\w-]{8,}\\.eyJ[\\w-]{8,}\\.[\\w-]{8,}',
    '(?:[Bb]earer|BEARER|[Bb]asic|BASIC)\\s+[A-Za-z0-9._~+/-]{20,}=*',
    '[0-9a-f]{32}\\.[\\w-]{43}',
  ].join('|')})(?![\\w-])`,
  'g',
)

/**
 * `text` with its percent-encoded bytes decoded (`rh%5f…` is `rh_…`, as a Worker reads it from a path), until
 * nothing more decodes (three rounds at most); undefined when it has none.
 * @example percentDecoded('/t/rh%5fab') // '/t/rh_ab'
 */
function percentDecoded(text: string): string | undefined {
  if (!text.includes('%')) return undefined
  let decoded = text
  for (let round = 0; round < 3 && /%[0-9a-f]{2}/i.test(decoded); round++) {
    try {
      decoded = decodeURIComponent(decoded)
    } catch {
      decoded = decoded.replace(/%[0-9a-f]{2}/gi, (byte) => String.fromCharCode(Number.parseInt(byte.slice(1), 16)))
    }
  }
  return decoded === text ? undefined : decoded
}

/** What replaces a credential in a redacted text. */
export const REDACTED = '[redacted]'

/**
 * `text` with every credential shape inside it replaced by {@link REDACTED}, and how many went.
 * @example redactEmbedded('use sk-abcdefghijklmnop1234 here') // { text: 'use [redacted] here', count: 1 }
 */
export function redactEmbedded(text: string): { text: string; count: number } {
  let count = 0
  const replace = (within: string) =>
    within.replace(EMBEDDED_SHAPES, () => {
      count++
      return REDACTED
    })
  const redacted = replace(text)
  if (count > 0) return { text: redacted, count }
  // Encoded, a shape is still one (the Worker decodes a path before it routes it): the text goes decoded, redacted.
  const decoded = percentDecoded(text)
  const decodedRedacted = decoded === undefined ? undefined : replace(decoded)
  return { text: count === 0 || decodedRedacted === undefined ? text : decodedRedacted, count }
}

/**
 * True when a field of this name holds a credential: one of its words (split at `_`, `-`, `.`, spaces and camelCase,
 * percent-encoding decoded) is key, token, secret, password, authorization, authentication, cookie or credential, or
 * runs one together with what it opens (`apikey`, `authtoken`, `clientsecret`), or a longer name ends in session,
 * access or signature (`X-Session`).
 * @example isCredentialName('OPENAI_KEY') // true; isCredentialName('xapikey') // true; isCredentialName('max_tokens')
 *   // false
 */
export function isCredentialName(name: string): boolean {
  if (HARMLESS_NAMES.has(name)) return false
  const words = (percentDecoded(name) ?? name)
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((word) => word !== '')
  const last = words.at(-1) ?? ''
  return (
    words.some((word) => CREDENTIAL_WORDS.has(word) || CREDENTIAL_SUFFIX.test(word)) ||
    (words.length > 1 ? CREDENTIAL_LAST_WORDS.has(last) : CREDENTIAL_LAST_SUFFIX.test(last))
  )
}

/**
 * True when a URL's query parameter of this name carries a credential: a credential name, `sig`, `code`, …
 * @example isCredentialQueryName('sig') // true; isCredentialQueryName('page') // false
 */
export function isCredentialQueryName(name: string): boolean {
  return isCredentialName(name) || CREDENTIAL_QUERY_NAMES.has(name.toLowerCase())
}

/**
 * True when a whole string looks like a credential: an authorization value or a provider key, percent-encoded or not.
 * @example looksLikeCredential('Bearer sk-abcdefghijklmnop') // true; looksLikeCredential('qwen/qwen3-8b') // false
 */
export function looksLikeCredential(value: string): boolean {
  const forms = [value.trim(), percentDecoded(value.trim())]
  return forms.some((form) => form !== undefined && CREDENTIAL_SHAPES.some((shape) => shape.test(form)))
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
    if (!isCredentialQueryName(name) && !looksLikeCredential(value) && redactEmbedded(value).count === 0) continue
    url.searchParams.delete(name)
    dropped.push(`query ${name}`)
  }
  const path = redactEmbedded(url.pathname)
  if (path.count > 0) {
    url.pathname = path.text
    dropped.push('path')
  }
  const fragment = redactEmbedded(url.hash)
  if (fragment.count > 0) {
    url.hash = ''
    dropped.push('fragment')
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
    const hidden = isCredentialQueryName(name) || looksLikeCredential(value) || redactEmbedded(value).count > 0
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

/** The secrets a server holds, by name (`ADMIN_TOKEN` → its value): a config that carries one is refused. */
export type HeldSecrets = Readonly<Record<string, string>>

/** Held secrets shorter than this are not looked for: a short value would turn up in ordinary text. */
const MIN_HELD_SECRET = 8

/**
 * The name of a secret the server holds that `text` contains (percent-encoded or not), or undefined.
 * @example heldSecretIn('http://h/t/rh_admin_0123…/v1', { ADMIN_TOKEN: 'rh_admin_0123…' }) // 'ADMIN_TOKEN'
 */
export function heldSecretIn(text: string, held: HeldSecrets): string | undefined {
  const forms = [text, percentDecoded(text)]
  for (const [name, secret] of Object.entries(held)) {
    if (secret.length < MIN_HELD_SECRET) continue
    if (forms.some((form) => form?.includes(secret))) return name
  }
  return undefined
}

/**
 * True when an object's key is itself a credential (a header name or metadata key that is a key, a token, a held
 * secret): reported as `[redacted]`, never by name.
 * @example isCredentialKey('sk-abcdefghijklmnop1234') // true; isCredentialKey('x-api-key') // false (a name)
 */
export function isCredentialKey(key: string, held: HeldSecrets = {}): boolean {
  return looksLikeCredential(key) || redactEmbedded(key).count > 0 || heldSecretIn(key, held) !== undefined
}

/**
 * `value` without its credentials (see the module comment), at any depth, and the path of each one dropped: a field
 * by name, a string by shape or because it holds one of `held` (an array loses the element), a URL's user-info and
 * query values (the URL is kept), a key that is a credential (reported as `[redacted]`).
 * @example withoutCredentials({ llm: { api_key: 'x', base_url: 'https://h/v1' } }) // { value: { llm: { base_url:
 *   'https://h/v1' } }, dropped: ['llm.api_key'] }
 */
export function withoutCredentials(
  value: unknown,
  path = '',
  held: HeldSecrets = {},
): { value: unknown; dropped: string[] } {
  const dropped: string[] = []
  const clean = (item: unknown, at: string): { keep: boolean; value: unknown } => {
    if (typeof item === 'string') {
      const secret = heldSecretIn(item, held)
      if (secret !== undefined) {
        dropped.push(`${at} (the value of ${secret}, a secret of this server)`)
        return { keep: false, value: undefined }
      }
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
      if (isCredentialKey(key, held)) {
        dropped.push(at === '' ? `${REDACTED} (a key)` : `${at}.${REDACTED} (a key)`)
        continue
      }
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
