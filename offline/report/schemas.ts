/**
 * How the report words a refused input: each input is parsed with its one schema (src/schemas, src/search/output.ts)
 * and the first problem is named with its field path.
 */
import type { z } from 'zod'

/**
 * The first problem of a failed parse, as `field.path: message`.
 * @example firstIssue(BenchReport.safeParse({}).error!) // 'schema_version: Invalid input: expected 1'
 */
export function firstIssue(error: z.ZodError): string {
  const issue = error.issues[0]
  if (!issue) return 'invalid'
  const path = issue.path
    .map((part) => (typeof part === 'number' ? `[${part}]` : `.${String(part)}`))
    .join('')
    .replace(/^\./, '')
  return `${path || '(root)'}: ${issue.message}`
}
