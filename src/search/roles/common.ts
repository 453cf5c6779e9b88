/**
 * Request-building pieces the four search roles share: their options, localised fixed phrases, data blocks.
 *
 * Retries: every role call is ONE `runAgent` (one `withRetry` loop over transport failures and invalid replies).
 * The OpenAI adapter makes one HTTP request per call and no role retries wrap `runAgent`, so the worst
 * case is `retry.maxAttempts` requests per call, never a product of nested retry layers (fixes autosr §8.7).
 */
import type { RetryPolicy } from '../../llm/retry.ts'
import type { Locale, PromptOverrides } from '../../prompts/index.ts'

export interface SearchRoleOptions {
  /** Prompt language; default `en`. */
  locale?: Locale
  /** The one retry loop of each call (see the module note); default the house policy (4 attempts). */
  retry?: Partial<RetryPolicy>
  /** Replacements for the bundled templates, keyed `<locale>/<name>` (e.g. `en/search-verifier.system`). */
  prompts?: PromptOverrides
}

const LABELS = {
  en: {
    sample: (n: number) => `Sample answer ${n}:`,
    naAllowed: 'N/A is allowed: give null for a criterion that does not apply to this prompt and answer.',
    naForbidden: 'N/A is not allowed: every criterion needs an integer grade.',
  },
  zh: {
    sample: (n: number) => `样例回答 ${n}：`,
    naAllowed: '允许 N/A：对不适用于该提示和回答的标准给出 null。',
    naForbidden: '不允许 N/A：每条标准都必须给出整数分。',
  },
} as const satisfies Record<Locale, unknown>

/**
 * Localised fixed phrases of the search prompts.
 * @example searchLabels('en').naRule(true) // 'N/A is allowed: …'
 */
export function searchLabels(locale: Locale): { sample: (n: number) => string; naRule: (allowed: boolean) => string } {
  const labels = LABELS[locale]
  return { sample: labels.sample, naRule: (allowed) => (allowed ? labels.naAllowed : labels.naForbidden) }
}

/**
 * Untrusted text between the data markers of a request.
 * @example dataBlock('0123456789abcdef', 'answer text') // '<<<DATA-0123456789abcdef\nanswer
 *   text\nDATA-0123456789abcdef>>>'
 */
export function dataBlock(boundary: string, text: string): string {
  return `<<<DATA-${boundary}\n${text}\nDATA-${boundary}>>>`
}
