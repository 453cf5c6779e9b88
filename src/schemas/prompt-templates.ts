/**
 * What a run's prompt overrides are checked against (run-config's `prompts`): the bundled templates' keys and the
 * `{{placeholders}}` each uses. Reads the generated templates (prompts/index.ts) directly, so the schemas need nothing
 * from src/prompts, which renders them.
 */
import { PROMPT_TEMPLATES } from '../../prompts/index.ts'

/** Every `<locale>/<name>` a run may override. */
export const PROMPT_KEYS: string[] = Object.entries(PROMPT_TEMPLATES).flatMap(([locale, templates]) =>
  Object.keys(templates).map((name) => `${locale}/${name}`),
)

/**
 * The `{{placeholders}}` a template uses.
 * @example placeholdersOf('Hi {{name}}') // ['name']
 */
export function placeholdersOf(template: string): string[] {
  return [...new Set([...template.matchAll(/\{\{(\w+)\}\}/g)].map((match) => match[1]!))]
}

/**
 * The bundled template of a `<locale>/<name>` key, or undefined when there is none.
 * @example bundledTemplate('en/scorer.system')?.includes('{{grade_max}}') // true
 */
export function bundledTemplate(key: string): string | undefined {
  const [locale, name] = key.split('/') as [keyof typeof PROMPT_TEMPLATES, string]
  return (PROMPT_TEMPLATES[locale] as Record<string, string> | undefined)?.[name]
}
