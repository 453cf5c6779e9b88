/**
 * The names the search CLI's modules share: its four roles and its backend choices. Kept apart from the flags
 * (options.ts) and the backends (backend.ts) so that neither has to import the other for them.
 */
import type { SearchRoleName } from '../../src/search/roles/rubric.ts'

/** The four search roles, in the order reports list them. */
export const SEARCH_ROLES = [
  'initializer',
  'proposer',
  'verifier',
  'judge',
] as const satisfies readonly SearchRoleName[]

/** Which models answer: the deterministic mock, OpenAI-compatible servers, or openai when any endpoint is given. */
export type BackendChoice = 'auto' | 'mock' | 'openai'
