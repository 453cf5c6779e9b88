/**
 * Literal credentials in a configuration a person writes (a run config, a deployment's `llm`, a lineage manifest):
 * refused, never stored, since whatever is stored is served back (`GET /run`, `/rm/<target>/healthz`) and logged. A
 * key lives in a Worker secret that the config names: `api_key_env: NAME` for the bearer key, `headers: {"X-Api-Key":
 * {"secret": NAME}}` for a header. Configs stored before this rule are read back redacted ({@link redactConfig}).
 */
import { AppError } from '../errors/index.ts'
import {
  type HeldSecrets,
  heldSecretIn,
  isCredentialKey,
  isCredentialName,
  isCredentialQueryName,
  looksLikeCredential,
  REDACTED,
  redactEmbedded,
  redactUrl,
} from './index.ts'

/** One literal credential: where, and what to do instead (its value is never repeated). */
interface CredentialProblem {
  path: string
  message: string
}

/** A field whose value names a secret rather than holding one: `api_key_env`, `{secret: NAME}`. */
const SECRET_NAME = /^[A-Z_][A-Z0-9_]*$/
const INSTEAD =
  'put the key in a Worker secret (wrangler secret put NAME) and name it with "api_key_env": "NAME", or for a ' +
  'header "headers": {"<name>": {"secret": "NAME"}}'

/** True when `key: value` names a secret instead of holding one. */
function namesSecret(key: string, value: string): boolean {
  return (key === 'secret' || /_env$/i.test(key)) && SECRET_NAME.test(value)
}

/** What a string carries, as the words of a problem; undefined when it carries nothing. */
function carried(text: string, held: HeldSecrets): string | undefined {
  const secret = heldSecretIn(text, held)
  if (secret !== undefined) return `the value of ${secret}, a secret of this server`
  if (looksLikeCredential(text)) return 'a value shaped like a credential'
  let url: URL | undefined
  try {
    url = /^https?:\/\//i.test(text.trim()) ? new URL(text.trim()) : undefined
  } catch {
    url = undefined
  }
  if (url) {
    if (url.username !== '' || url.password !== '') return 'user-info (user:password@) in the URL'
    const name = [...url.searchParams].find(
      ([param, value]) => isCredentialQueryName(param) || looksLikeCredential(value) || redactEmbedded(value).count > 0,
    )?.[0]
    if (name !== undefined) return `a credential in the URL's query ("${isCredentialKey(name) ? REDACTED : name}")`
  }
  return redactEmbedded(text).count > 0 ? 'a credential (a key or token shape) inside the text' : undefined
}

/**
 * Every literal credential in `value`, each with its path and the way to do it instead: a credential-named field
 * holding a string (`headers.x-api-key`, `api_key`), a URL with user-info, a credential query value or a credential
 * shape, and a credential shape anywhere in a text. Fields that name a secret (`api_key_env`, `{secret: NAME}`) pass.
 * @example literalCredentialProblems({ headers: { 'x-api-key': 'sk-…' } }, 'agents.scorer') // [{ path:
 *   'agents.scorer.headers.x-api-key', message: '…' }]
 */
function literalCredentialProblems(value: unknown, path = '', held: HeldSecrets = {}): CredentialProblem[] {
  const problems: CredentialProblem[] = []
  const problem = (at: string, what: string) =>
    problems.push({ path: at, message: `${what}; credentials never live in a config: ${INSTEAD}` })
  const visit = (item: unknown, at: string, key: string): void => {
    if (typeof item === 'string') {
      if (item === '' || (namesSecret(key, item) && heldSecretIn(item, held) === undefined)) return
      const what = isCredentialName(key) ? 'a literal value in a credential-named field' : carried(item, held)
      if (what) problem(at, what)
      return
    }
    if (Array.isArray(item)) {
      for (const [index, element] of item.entries()) visit(element, `${at}[${index}]`, key)
    } else if (typeof item === 'object' && item !== null)
      for (const [name, field] of Object.entries(item)) {
        const fieldPath = at === '' ? name : `${at}.${name}`
        if (isCredentialKey(name, held)) problem(at === '' ? REDACTED : `${at}.${REDACTED}`, 'a credential as a key')
        else visit(field, fieldPath, name)
      }
  }
  visit(value, path, '')
  return problems
}

/**
 * `value` with every literal credential replaced by `[redacted]` (a URL keeps its shape, see `redactUrl`), and the
 * paths replaced: how a config stored before the rule is read back and shown.
 * @example redactConfig({ base_url: 'http://u:p@h/v1' }).value // { base_url: 'http://[redacted]@h/v1' }
 */
export function redactConfig<T>(value: T, held: HeldSecrets = {}): { value: T; redacted: string[] } {
  const problems = literalCredentialProblems(value, '', held)
  if (problems.length === 0) return { value, redacted: [] }
  const redact = (item: unknown, key: string): unknown => {
    if (typeof item === 'string') {
      if (item === '' || (namesSecret(key, item) && heldSecretIn(item, held) === undefined)) return item
      if (isCredentialName(key) || looksLikeCredential(item) || heldSecretIn(item, held) !== undefined) return REDACTED
      return redactUrl(item)
    }
    if (Array.isArray(item)) return item.map((element) => redact(element, key))
    if (typeof item === 'object' && item !== null)
      return Object.fromEntries(
        Object.entries(item).flatMap(([name, field]) =>
          isCredentialKey(name, held) ? [] : [[name, redact(field, name)]],
        ),
      )
    return item
  }
  return { value: redact(value, '') as T, redacted: problems.map((problem) => problem.path) }
}

/**
 * Throws 400 `invalid_request` naming each literal credential in `value` (under `path`) and the way instead; a
 * configuration without one passes.
 * @example refuseLiteralCredentials(body.config, 'config') // throws for config.agents.default.base_url 'http://u:p@h'
 */
export function refuseLiteralCredentials(value: unknown, path: string, held: HeldSecrets = {}): void {
  const problems = literalCredentialProblems(value, path, held)
  if (problems.length === 0) return
  const summary = problems
    .slice(0, 3)
    .map((problem) => `${problem.path}: ${problem.message.split(';')[0]}`)
    .join('; ')
  throw new AppError(
    'invalid_request',
    `the request carries literal credentials — ${summary}. Credentials never live in a config: ${INSTEAD}`,
    { details: problems },
  )
}

/** What was already said about stored configs, so a log line comes once per isolate and config. */
const reported = new Set<string>()

/**
 * A configuration read back from storage, redacted ({@link redactConfig}) when it was stored with literal credentials
 * before they were refused; says so once per isolate in the log (paths only, never values).
 * @example const config = parseStored(RunConfig, redactStored('run', runId, row.config))
 */
export function redactStored<T>(kind: string, id: string, value: T, held: HeldSecrets = {}): T {
  const { value: clean, redacted } = redactConfig(value, held)
  if (redacted.length > 0 && !reported.has(`${kind}:${id}`)) {
    reported.add(`${kind}:${id}`)
    console.warn(
      `${kind} "${id}" was stored with literal credentials at ${redacted.join(', ')}: read back redacted, so they ` +
        `are neither used nor shown. ${INSTEAD}`,
    )
  }
  return clean
}
