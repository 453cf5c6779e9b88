/**
 * The ways a credential or an internal host can be written, as fast-check arbitraries: what the credential and host
 * properties draw from (issue 46 item 6). A finding is one spelling of a broken rule; these are all the spellings the
 * rule must hold for.
 */
import fc from 'fast-check'

/** What a credential name says it opens, and what it is. */
const NAME_OPENERS = ['', 'api', 'auth', 'access', 'client', 'private', 'secret', 'session', 'refresh', 'id', 'x']
const NAME_NOUNS = ['key', 'token', 'secret', 'password', 'passwd', 'credential', 'credentials', 'cookie']
/** Whole words that name a credential on their own. */
const NAME_WORDS = ['Authorization', 'Authentication', 'apikey', 'passphrase', 'pwd', 'auth']

/** Joins words in one of the styles people write names in. */
function styled(words: string[], style: number): string {
  const cap = (word: string) => word.charAt(0).toUpperCase() + word.slice(1)
  switch (style) {
    case 0:
      return words.join('_')
    case 1:
      return words.join('-')
    case 2:
      return words.join('')
    case 3:
      return words.map((word, index) => (index === 0 ? word : cap(word))).join('')
    case 4:
      return words.map(cap).join('-')
    case 5:
      return words.join('_').toUpperCase()
    default:
      return words.join('.')
  }
}

/**
 * A field or header name that holds a credential, in any style: `api_key`, `X-Api-Token`, `xapikey`, `clientSecret`,
 * `AUTH_TOKEN`, `Authentication`, `X-Session`, percent-encoded or not.
 * @example fc.sample(credentialName(), 3) // ['X-Auth-Token', 'clientsecret', 'x%2Dapi%2Dkey']
 */
export function credentialName(): fc.Arbitrary<string> {
  const compound = fc
    .tuple(fc.constantFrom(...NAME_OPENERS), fc.constantFrom(...NAME_NOUNS))
    .map(([opener, noun]) => (opener === '' ? [noun] : [opener, noun]))
  const trailing = fc
    .tuple(fc.constantFrom('x', 'my', 'upstream'), fc.constantFrom('session', 'access', 'signature'))
    .map((words) => [...words])
  const whole = fc.constantFrom(...NAME_WORDS).map((word) => [word])
  const withPrefix = fc.tuple(fc.constantFrom([], ['openai'], ['x'], ['my', 'service']), fc.oneof(compound, whole))
  const words = fc.oneof(
    withPrefix.map(([prefix, rest]) => [...prefix, ...rest]),
    trailing,
  )
  return fc.tuple(words, fc.integer({ min: 0, max: 6 }), fc.boolean()).map(([parts, style, encoded]) => {
    const name = styled(parts, style)
    return encoded ? name.replace(/[-_]/g, (sep) => (sep === '-' ? '%2D' : '%5F')) : name
  })
}

/** Names that hold no credential, though some contain a credential word's letters. */
export const HARMLESS_NAMES = [
  'max_tokens',
  'score_key',
  'keywords',
  'monkey',
  'author',
  'tokenizer',
  'source_session_id',
  'access',
  'passage',
  'secretary',
  'prompt_tokens',
  'turkey',
]

const hex = (length: number) =>
  fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: length, maxLength: length })
const word = (min: number, max: number) =>
  fc.string({
    unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'),
    minLength: min,
    maxLength: max,
  })
const base64url = (length: number) =>
  fc.string({
    unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'),
    minLength: length,
    maxLength: length,
  })

/**
 * A credential value: this project's admin, run and dashboard-session tokens, provider keys, a JWT, an opaque bearer.
 * @example fc.sample(credentialValue(), 2) // ['rh_admin_3fa1…', 'Bearer Zk9…']
 */
export function credentialValue(): fc.Arbitrary<string> {
  return fc.oneof(
    hex(48).map((digits) => `rh_admin_${digits}`),
    hex(48).map((digits) => `rh_${digits}`),
    fc.tuple(hex(32), base64url(43)).map(([id, signature]) => `${id}.${signature}`),
    word(20, 40).map((rest) => `sk-proj-${rest}`),
    word(30, 36).map((rest) => `ghp_${rest}`),
    fc.tuple(base64url(12), base64url(20), base64url(16)).map(([a, b, c]) => `eyJ${a}.eyJ${b}.${c}`),
    fc.tuple(fc.constantFrom('Bearer', 'bearer', 'Basic'), word(24, 40)).map(([scheme, token]) => `${scheme} ${token}`),
  )
}

/**
 * Where a credential value can sit in a config: the whole value, inside prose, in a URL's path (raw or
 * percent-encoded), under a harmless query name, after `#`; each as the string a config would hold.
 * @example fc.sample(credentialPlacement('rh_admin_…'), 1) // ['https://judge.example/t/rh%5Fadmin%5F…/v1']
 */
export function credentialPlacement(value: string): fc.Arbitrary<string> {
  const encoded = encodeURIComponent(value).replace(/[_-]/g, (sep) => (sep === '_' ? '%5F' : '%2D'))
  return fc.constantFrom(
    value,
    `Grade the answer. ${value} is what the judge needs.`,
    `https://judge.example/t/${value.replace(/ /g, '%20')}/v1`,
    `https://judge.example/t/${encoded}/v1`,
    `https://judge.example/v1?q=${encodeURIComponent(value)}`,
    `(${value})`,
  )
}

/** 32-bit IPv4 numbers inside the ranges the server never sends its keys to. */
const INTERNAL_V4_RANGES: [number, number][] = [
  [0x7f000000, 8],
  [0x0a000000, 8],
  [0xac100000, 12],
  [0xc0a80000, 16],
  [0xa9fe0000, 16],
  [0x64400000, 10],
  [0x00000000, 8],
  [0xc6120000, 15],
  [0xe0000000, 4],
  [0xf0000000, 4],
]

/** An IPv4 address in an internal range, as a number. */
function internalV4(): fc.Arbitrary<number> {
  return fc
    .tuple(fc.constantFrom(...INTERNAL_V4_RANGES), fc.nat())
    .map(([[base, bits], noise]) => (base + (noise % 2 ** (32 - bits))) >>> 0)
}

const dotted = (v4: number) => [v4 >>> 24, (v4 >>> 16) & 255, (v4 >>> 8) & 255, v4 & 255]
const hex16 = (n: number) => n.toString(16)

/**
 * An internal host written any way a URL takes it: dotted, one decimal or hex number, octal or short forms, and
 * inside IPv6 (compatible, mapped, translated, NAT64, 6to4), upper or lower case; local names with trailing dots.
 * @example fc.sample(internalHostSpelling(), 3) // ['0x7f000001', '[::ffff:a00:1]', 'localhost.']
 */
export function internalHostSpelling(): fc.Arbitrary<string> {
  const v4Spelling = fc.tuple(internalV4(), fc.integer({ min: 0, max: 9 }), fc.boolean()).map(([v4, form, upper]) => {
    const [a, b, c, d] = dotted(v4) as [number, number, number, number]
    const high = v4 >>> 16
    const low = v4 & 0xffff
    const spellings = [
      `${a}.${b}.${c}.${d}`,
      String(v4),
      `0x${v4.toString(16)}`,
      `0${a.toString(8)}.${b}.${c}.0${d.toString(8)}`,
      `${a}.${(b << 16) | (c << 8) | d}`,
      `[::ffff:${a}.${b}.${c}.${d}]`,
      `[::${hex16(high)}:${hex16(low)}]`,
      `[::ffff:0:${hex16(high)}:${hex16(low)}]`,
      `[64:ff9b::${hex16(high)}:${hex16(low)}]`,
      `[2002:${hex16(high)}:${hex16(low)}::1]`,
    ]
    const spelled = spellings[form]!
    return upper ? spelled.toUpperCase() : spelled
  })
  const v6 = fc.constantFrom(
    '[::1]',
    '[::]',
    '[fc00::1]',
    '[fd12:3456::1]',
    '[fe80::1]',
    '[fec0::1]',
    '[ff02::1]',
    '[0:0:0:0:0:0:0:1]',
  )
  const names = fc
    .tuple(
      fc.constantFrom(
        'localhost',
        'a.localhost',
        'localhost.localdomain',
        'printer.local',
        'db.internal',
        'nas.home.arpa',
      ),
      fc.constantFrom('', '.', '..'),
      fc.boolean(),
    )
    .map(([name, dots, upper]) => `${upper ? name.toUpperCase() : name}${dots}`)
  return fc.oneof(v4Spelling, v6, names)
}
