/**
 * How the artifact tools name a problem: a zod issue as `place: message`, its path written as `a.b[0].c`, the way
 * export, import and deploy list every problem of a refused file.
 */
import type { z } from 'zod'

/**
 * Every issue of a zod error as `place: message`, the place built from the issue's path.
 * @example issuesOf(error, (path) => `run_manifest.${pathText(path)}`) // ['run_manifest.seed: Invalid input…']
 */
export function issuesOf(error: z.ZodError, place: (path: PropertyKey[]) => string): string[] {
  return error.issues.map((issue) => `${place(issue.path)}: ${issue.message}`)
}

/**
 * A zod path as text: keys joined by dots, array indexes in brackets; `(root)` for the empty path.
 * @example pathText(['rubric', 'p1', 'criteria', 0, 'weight']) // 'rubric.p1.criteria[0].weight'
 */
export function pathText(path: readonly PropertyKey[]): string {
  return (
    path.reduce<string>(
      (text, key) => (typeof key === 'number' ? `${text}[${key}]` : text ? `${text}.${String(key)}` : String(key)),
      '',
    ) || '(root)'
  )
}
