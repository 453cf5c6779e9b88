/**
 * A count with its noun, singular for one: what people read in summaries and pages.
 * @example plural(1, 'step') // '1 step'; plural(3, 'rollout') // '3 rollouts'
 */
export function plural(count: number, noun: string, pluralNoun = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : pluralNoun}`
}
