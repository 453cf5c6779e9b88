import { AppError } from '../errors/index.ts'

/** One problem in a dataset: where it is (`prompts[3] (prompt_id "p_4").candidates[1].text`) and what is wrong. */
export interface DatasetIssue {
  /** Path to the offending value; empty for a problem with the whole document (e.g. an empty file). */
  place: string
  reason: string
}

/** Most issues a message lists; the rest are counted. */
const MESSAGE_ISSUES = 20

/**
 * A dataset that cannot be used as it is. `issues` lists every problem found (up to a cap); the message
 * names each one's place, prefixed with the dataset's name when one was given. An `invalid_request`
 * AppError, so a route that accepts datasets answers 400 without extra mapping.
 * @example
 * try { parseDataset(text, { name: 'demo.json' }) } catch (error) {
 *   if (error instanceof DatasetError) console.error(error.message) // 'demo.json: prompts[3] (prompt_id
 * "p_4").candidates: needs at least 2 candidates, got 1' }
 */
export class DatasetError extends AppError {
  constructor(
    readonly issues: readonly DatasetIssue[],
    readonly datasetName?: string,
  ) {
    super('invalid_request', formatIssues(issues, datasetName), { details: { issues } })
    this.name = 'DatasetError'
  }
}

/**
 * One line per issue (`place: reason`), each prefixed with `name: ` when given; long lists are cut.
 * @example formatIssues([{ place: 'line 3', reason: 'not valid JSON: unexpected end of input' }], 'pairs.jsonl')
 * // 'pairs.jsonl: line 3: not valid JSON: unexpected end of input'
 */
function formatIssues(issues: readonly DatasetIssue[], name?: string): string {
  const prefix = name ? `${name}: ` : ''
  const lines = issues
    .slice(0, MESSAGE_ISSUES)
    .map((issue) => `${prefix}${issue.place ? `${issue.place}: ` : ''}${issue.reason}`)
  if (issues.length > MESSAGE_ISSUES) lines.push(`${prefix}… and ${issues.length - MESSAGE_ISSUES} more problems`)
  return lines.join('\n')
}
