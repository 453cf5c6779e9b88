/** The text a finished (or interrupted) search prints: what it found, what it cost, where everything went. */
import { isAbsolute, relative } from 'node:path'
import type { SearchRunSummary } from './run.ts'
import { SEARCH_ROLES } from './roles.ts'

/**
 * A short human-readable report of a search run (paths relative to `cwd`).
 * @example console.log(formatSummary(summary))
 */
export function formatSummary(summary: SearchRunSummary, cwd: string = process.cwd()): string {
  const path = (file: string | null) => {
    if (file === null) return '-'
    const inside = relative(cwd, file)
    return inside === '' ? '.' : inside.startsWith('..') || isAbsolute(inside) ? file : inside
  }
  const usage = summary.usage
  const lines: string[] = []
  if (summary.status === 'completed') {
    lines.push(
      `search completed in ${summary.seconds}s (${summary.backend.resolved} backend, judge: ` +
        `${summary.backend.judge}${summary.resumed_from ? `, resumed from ${path(summary.resumed_from)}` : ''})`,
    )
    const width = Math.max(...summary.best_rubrics.map((entry) => entry.prompt_id.length), 6)
    for (const entry of summary.best_rubrics) {
      lines.push(
        `  ${entry.prompt_id.padEnd(width)}  score ${entry.score.toFixed(3)}  best ${entry.best_candidate_id} ` +
          ` rubric ` +
          `${entry.rubric_id} (${entry.criteria} criteria)`,
      )
    }
    for (const { prompt_id, reason } of summary.dropped_prompts)
      lines.push(`  dropped      ${prompt_id}: the model's replies stayed unusable (${reason.slice(0, 160)})`)
  } else {
    lines.push(`search interrupted (${summary.interrupted_by}) after ${summary.seconds}s`)
  }
  const perRole = SEARCH_ROLES.map((role) => `${role} ${usage.roles[role].calls}`).join(', ')
  lines.push(
    `  calls        ${usage.total.calls} (${perRole}); cache hits ${usage.total.cache_hits}; tokens ` +
      `${usage.total.prompt_tokens} in / ${usage.total.completion_tokens} out`,
  )
  if (usage.total.attempts !== undefined)
    lines.push(`  http         ${usage.total.attempts} attempts, ${usage.total.retries ?? 0} retries`)
  if (summary.output) lines.push(`  output       ${path(summary.output)}`)
  lines.push(
    `  run records  ${path(summary.run_records.manifest)}`,
    `               ${path(summary.run_records.replay)}`,
  )
  lines.push(
    `  checkpoints  ${path(summary.checkpoints.directory)} (${summary.checkpoints.written} ` +
      `written${summary.checkpoints.latest ? `, latest ${path(summary.checkpoints.latest).split('/').at(-1)}` : ''})`,
  )
  if (summary.status === 'interrupted') {
    lines.push(
      summary.checkpoints.latest
        ? `resume with:\n  ${summary.resume_command}`
        : `no checkpoint was reached yet; run the same command again (answers so far are cached):\n  ` +
            `${summary.resume_command?.replace(/ --resume \S+$/, '')}`,
    )
  }
  return lines.join('\n')
}
