import { PROMPT_TEMPLATES } from '../../prompts/index.ts'

export type Locale = keyof typeof PROMPT_TEMPLATES
export type PromptName = keyof (typeof PROMPT_TEMPLATES)['en']
/** A run's replacements for bundled templates, keyed `<locale>/<name>`, e.g. `en/scorer.system`. */
export type PromptOverrides = Partial<Record<string, string>>

/**
 * Fills a prompt template's `{{name}}` placeholders. A placeholder without a value is an error,
 * never an empty string. `overrides` (a run's own prompts) win over the bundled templates.
 * @example renderPrompt('en', 'scorer.system', { grade_max: 10, boundary: 'ab12' })
 */
export function renderPrompt(
  locale: Locale,
  name: PromptName,
  values: Record<string, string | number>,
  overrides: PromptOverrides = {},
): string {
  const template = overrides[`${locale}/${name}`] ?? PROMPT_TEMPLATES[locale][name]
  return template.replace(/\{\{(\w+)\}\}/g, (_match, key: string) => {
    const value = values[key]
    if (value === undefined) throw new Error(`prompt ${locale}/${name} needs a value for {{${key}}}`)
    return String(value)
  })
}

/**
 * The template text itself, for cache keys: a changed prompt must never reuse an old judgement.
 * @example const key = await sha256Hex(promptTemplate('en', 'scorer.user'))
 */
export function promptTemplate(locale: Locale, name: PromptName): string {
  return PROMPT_TEMPLATES[locale][name]
}
