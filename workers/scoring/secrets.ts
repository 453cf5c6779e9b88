import type { HeldSecrets } from '../../src/credentials/index.ts'
import { AppError } from '../../src/errors/index.ts'
import type { Env } from '../env.ts'

/** The Worker's own secrets: never an LLM endpoint's API key, whatever a config or a var says. */
const RESERVED_SECRETS: ReadonlySet<string> = new Set(['ADMIN_TOKEN', 'RM_TOKEN', 'SESSION_SECRET'])

/**
 * The secret names a run's `api_key_env` (or a deployment's `llm.api_key_env`) may name: the operator's comma-separated
 * var `JUDGE_KEY_NAMES`, less the Worker's own secrets. A config cannot make the Worker send anything else.
 * @example judgeKeyNames({ JUDGE_KEY_NAMES: 'VLLM_KEY, OPENAI_KEY' } as Env) // Set { 'VLLM_KEY', 'OPENAI_KEY' }
 */
function judgeKeyNames(env: Env): Set<string> {
  const listed = (env.JUDGE_KEY_NAMES ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean)
  return new Set(listed.filter((name) => !RESERVED_SECRETS.has(name)))
}

/**
 * Refuses a secret name a config may not use as an API key: one of the Worker's own secrets, one the operator has
 * not listed in `JUDGE_KEY_NAMES`, or one the Worker does not have.
 * @example checkKeyName(env, 'ADMIN_TOKEN', 'agents.scorer.api_key_env', 'invalid_request') // throws 400
 */
export function checkKeyName(
  env: Env,
  name: string,
  field: string,
  code: 'invalid_request' | 'llm_not_configured',
): void {
  if (RESERVED_SECRETS.has(name))
    throw new AppError(
      code,
      `${field} may not name "${name}": it is one of this Worker's own secrets, never sent to an LLM endpoint`,
    )
  if (!judgeKeyNames(env).has(name)) {
    throw new AppError(
      code,
      `${field} names "${name}", which this Worker does not let configs use: ` +
        `list it in the var JUDGE_KEY_NAMES (now "${env.JUDGE_KEY_NAMES ?? ''}") ` +
        `and set the secret with \`wrangler secret put ${name}\``,
    )
  }
  if (typeof (env as unknown as Record<string, unknown>)[name] !== 'string') {
    throw new AppError(
      code,
      `${field} names "${name}", but this Worker has no such secret ` +
        `(set it with \`wrangler secret put ${name}\` or in .dev.vars)`,
    )
  }
}

/**
 * The API keys configs may name, by name: only the listed, present secrets (what the LLM adapters are given).
 * @example createChatModel(settings, { secrets: judgeSecrets(env) })
 */
export function judgeSecrets(env: Env): Record<string, string> {
  const secrets: Record<string, string> = {}
  for (const name of judgeKeyNames(env)) {
    const value = (env as unknown as Record<string, unknown>)[name]
    if (typeof value === 'string') secrets[name] = value
  }
  return secrets
}

/** The secrets this Worker holds besides the judge keys a config may name: none may appear in what it stores. */
const HELD_SECRET_NAMES = ['ADMIN_TOKEN', 'RM_TOKEN', 'SESSION_SECRET', 'RM_LLM_API_KEY', 'EMBEDDINGS_API_KEY'] as const

/**
 * Every secret this Worker holds, by name: its own tokens and keys and the judge keys of `JUDGE_KEY_NAMES`. A config,
 * artifact or lineage record that carries one of these values (a run's `base_url` with the admin token in its path,
 * the RM token pasted into a rubric) is refused naming the field (src/credentials).
 * @example refuseLiteralCredentials(body.config, 'config', heldSecrets(env))
 */
export function heldSecrets(env: Env): HeldSecrets {
  const held: Record<string, string> = { ...judgeSecrets(env) }
  for (const name of HELD_SECRET_NAMES) {
    const value = env[name]
    if (typeof value === 'string' && value.trim() !== '') held[name] = value.trim()
  }
  return held
}
