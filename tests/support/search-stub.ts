/**
 * An OpenAI-compatible stub's answers to the rubric search's four roles (prompts/<locale>/search-*.system.txt), and
 * how it tells them apart (`roleOf`): valid, deterministic replies computed from each request, as a cooperative model
 * would write them. Used by tests/offline/search-cli.test.ts, tests/offline/search-roles-llm.test.ts and
 * bench/search-cpu.ts (through bench/loopback-llm-stub.ts).
 */
import { PROMPT_TEMPLATES } from '../../prompts/index.ts'
import type { Locale } from '../../src/prompts/index.ts'
import type { ChatCompletionBody } from './llm-stub.ts'

export type SearchRole = 'initializer' | 'proposer' | 'verifier' | 'judge'
const SEARCH_ROLES = ['initializer', 'proposer', 'verifier', 'judge'] as const satisfies readonly SearchRole[]
/** The opening of each role's system prompt, in every locale: what tells the roles apart. */
const openings = (Object.keys(PROMPT_TEMPLATES) as Locale[]).flatMap((locale) =>
  SEARCH_ROLES.map((role): [SearchRole, string] => [
    role,
    PROMPT_TEMPLATES[locale][`search-${role}.system`].split('{{')[0]!.trim().slice(0, 60),
  ]),
)
/** Which search role sent a request, by the opening of its system prompt. */
export const roleOf = (body: ChatCompletionBody): SearchRole | undefined => {
  const system = body.messages.find((message) => message.role === 'system')?.content ?? ''
  return openings.find(([, opening]) => system.startsWith(opening))?.[0]
}
/** The text of a request's user message. */
export const userOf = (body: ChatCompletionBody) =>
  body.messages.find((message) => message.role === 'user')?.content ?? ''

interface StubCriterion {
  criterion_id: string
  text: string
  weight: number
  criterion_type: string | null
  check_points: string[]
  positive_examples: string[]
  negative_examples: string[]
}

const uniqueId = (base: string, taken: readonly StubCriterion[]) => {
  let id = base
  for (let n = 2; taken.some((criterion) => criterion.criterion_id === id); n++) id = `${base}_${n}`
  return id
}

/** A valid mutation in each mode (the proposer checks the mode's contract). */
function mutate(criteria: StubCriterion[], mode: string): StubCriterion[] {
  const next = criteria.map((criterion) => ({ ...criterion }))
  const full = next.length >= 16
  switch (mode) {
    case 'raise_bar':
      next[0] = { ...next[0]!, text: `${next[0]!.text} Require concrete evidence.`, weight: next[0]!.weight * 1.2 }
      return next
    case 'decompose': {
      if (full)
        return next.map((criterion, index) =>
          index === 0 ? { ...criterion, text: `${criterion.text} (split)` } : criterion,
        )
      const [first, ...rest] = next
      return [
        {
          ...first!,
          criterion_id: uniqueId(`${first!.criterion_id}_a`, next),
          text: `${first!.text} (first part)`,
          weight: first!.weight / 2,
        },
        {
          ...first!,
          criterion_id: uniqueId(`${first!.criterion_id}_b`, next),
          text: `${first!.text} (second part)`,
          weight: first!.weight / 2,
        },
        ...rest,
      ]
    }
    case 'factual_focus':
      return next.map((criterion, index) => ({
        ...criterion,
        text: index === 0 ? `${criterion.text} State facts precisely.` : criterion.text,
        weight:
          criterion.weight *
          (criterion.criterion_type === 'factual' || criterion.criterion_type === 'reasoning' ? 1.25 : 0.9),
      }))
    case 'anti_fluff':
      if (full)
        return next.map((criterion, index) =>
          index === 0
            ? { ...criterion, text: `${criterion.text} No filler.`, negative_examples: ['In conclusion'] }
            : criterion,
        )
      return [
        ...next,
        {
          criterion_id: uniqueId('no_fluff', next),
          text: 'No filler or boilerplate.',
          weight: 0.2,
          criterion_type: 'style',
          check_points: [],
          positive_examples: [],
          negative_examples: ['In conclusion', 'As an AI language model'],
        },
      ]
    case 'counterexample_trigger':
      if (full)
        return next.map((criterion, index) =>
          index === 0 ? { ...criterion, text: `${criterion.text} Name a limit.` } : criterion,
        )
      return [
        ...next,
        {
          criterion_id: uniqueId('limits', next),
          text: 'Names a limitation or risk where it matters.',
          weight: 0.2,
          criterion_type: 'reasoning',
          check_points: ['risk'],
          positive_examples: [],
          negative_examples: [],
        },
      ]
    default: // weight_perturb
      return next.map((criterion, index) => ({
        ...criterion,
        weight: criterion.weight * [1.15, 0.85, 1.1, 0.9][index % 4]!,
      }))
  }
}

/** Answers every search role validly, deterministically from the request. */
export function searchResponder(body: ChatCompletionBody): string {
  const user = userOf(body)
  switch (roleOf(body)) {
    case 'initializer':
      return JSON.stringify({
        rubric: {
          criteria: [
            {
              criterion_id: 'correct',
              text: 'The answer is correct.',
              weight: 3,
              criterion_type: 'factual',
              check_points: ['because'],
            },
            {
              criterion_id: 'complete',
              text: 'The answer covers what the prompt asks.',
              weight: 2,
              criterion_type: 'reasoning',
            },
            { criterion_id: 'clear', text: 'The answer is clearly organised.', weight: 1, criterion_type: 'format' },
          ],
        },
      })
    case 'proposer': {
      const mode = /^Mutation mode: (\w+)/m.exec(user)![1]!
      const rubric = JSON.parse(
        user.slice(user.indexOf('The current rubric:\n') + 20, user.indexOf('\n\nThe data blocks below')),
      ) as { criteria: StubCriterion[] }
      return JSON.stringify({ rubric: { criteria: mutate(rubric.criteria, mode) } })
    }
    case 'verifier': {
      const gradeMax = Number(/from 0 to (\d+)/.exec(body.messages[0]!.content)![1])
      const ids = [...user.matchAll(/^- (\S+) \((?:[a-z]+, )?weight [\d.]+\):/gm)].map((match) => match[1]!)
      const answer = /The answer to grade:\n<<<DATA-(\w+)\n([\s\S]*?)\nDATA-\1>>>/.exec(user)![2]!
      const words = answer.split(/\s+/).length
      return JSON.stringify({
        grades: Object.fromEntries(
          ids.map((id, index) => [id, Math.min(gradeMax, Math.floor(words / (8 + 3 * index)))]),
        ),
      })
    }
    case 'judge': {
      const [a, b] = ['A', 'B'].map(
        (name) => new RegExp(`Answer ${name}:\\n<<<DATA-(\\w+)\\n([\\s\\S]*?)\\nDATA-\\1>>>`).exec(user)![2]!,
      )
      return JSON.stringify({
        winner: a!.length === b!.length ? 'tie' : a!.length > b!.length ? 'A' : 'B',
        reason: 'stub: the longer answer',
      })
    }
    default:
      return 'not a search request'
  }
}
