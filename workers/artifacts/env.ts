import type { Env } from '../env.ts'

/**
 * Vars and secrets of the RM-server surface (`/rm/<target>/…`), beside the Worker's `Env`:
 * - `RM_TOKEN` (secret): a bearer token that may call `/rm/*` in production (as may the admin token).
 * - `RM_LLM_BASE_URL` (var): the OpenAI-compatible endpoint of openai-backend artifacts whose deployment names none.
 * - `RM_LLM_API_KEY` (secret): its API key, unless the deployment names its own `api_key_env`.
 */
export interface RmBindings {
  RM_TOKEN?: string
  RM_LLM_BASE_URL?: string
  RM_LLM_API_KEY?: string
}

/**
 * The Worker's env seen with the RM vars and secrets typed.
 * @example const { RM_LLM_BASE_URL } = rmEnv(c.env)
 */
export function rmEnv(env: Env): Env & RmBindings {
  return env as Env & RmBindings
}
