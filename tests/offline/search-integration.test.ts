import { describe, expect, it } from 'vitest'
import { runSearch, type SearchState } from '../../src/search/index.ts'
import { createSearchRoles } from '../../src/search/roles/index.ts'
import { PreferenceDataset } from '../../src/search/types.ts'
import { SearchRubric } from '../../src/schemas/search-rubric.ts'

// The engine against the real roles on the mock backend (MockChatModel answering through the LLM request path).
const dataset = PreferenceDataset.parse({
  prompts: [
    {
      prompt_id: 'p_email',
      prompt: 'Write a short email asking a client to confirm the meeting time for Thursday.',
      candidates: [
        {
          candidate_id: 'e1',
          source: 'strong',
          label: { rank: 1 },
          text:
            'Hi Dana, could you confirm that Thursday at 10:00 still works for our review meeting? If not, please ' +
            'suggest two other slots. Thanks, Sam',
        },
        {
          candidate_id: 'e2',
          source: 'base',
          label: { rank: 2 },
          text: 'Hi Dana, please confirm our meeting on Thursday. Thanks, Sam',
        },
        { candidate_id: 'e3', source: 'diverse', label: { rank: 3 }, text: 'Meeting Thursday? Let me know.' },
        {
          candidate_id: 'e4',
          source: 'base',
          label: { rank: 4 },
          text:
            'In conclusion, as an AI language model, I think meetings are an important part of business ' +
            'communication in general.',
        },
      ],
    },
    {
      prompt_id: 'p_fix',
      prompt: 'Explain how to fix "TypeError: undefined is not a function" in JavaScript.',
      candidates: [
        {
          candidate_id: 'f1',
          source: 'strong',
          label: { rank: 1 },
          text:
            'Find the call on the line in the stack trace, log the value you call, and check the import or ' +
            'property name: usually the function is misspelled or not exported.',
        },
        {
          candidate_id: 'f2',
          source: 'base',
          label: { rank: 2 },
          text: 'Check the stack trace and make sure the thing you call is really a function.',
        },
        { candidate_id: 'f3', source: 'diverse', label: { rank: 3 }, text: 'Reinstall node_modules.' },
        {
          candidate_id: 'f4',
          source: 'base',
          label: { rank: 4 },
          text: 'Errors happen. It is important to delve into the rich tapestry of JavaScript.',
        },
      ],
    },
  ],
})

describe('runSearch with the mock-backend roles', () => {
  it('runs every mode to a valid output, deterministically, and resumes to the same output', async () => {
    for (const config of [
      { mode: 'evolutionary', generations: 3, population_size: 4, mutations_per_round: 3 },
      {
        mode: 'evolutionary',
        iteration_scope: 'prompt_local',
        generations: 3,
        population_size: 4,
        mutations_per_round: 3,
        adaptive_mutation: 'success_feedback',
      },
      { mode: 'iterative', iterations: 3 },
    ] as const) {
      const first = await runSearch(dataset, createSearchRoles({ backend: 'mock', dataset }), config)
      const second = await runSearch(dataset, createSearchRoles({ backend: 'mock', dataset }), {
        ...config,
        concurrency: 2,
      })
      expect(second.output).toEqual(first.output)
      for (const entry of first.output!.best_rubrics) {
        expect(SearchRubric.safeParse(entry.rubric).success).toBe(true)
        expect(Object.keys(entry.candidate_scores)).toHaveLength(4)
      }
      expect(first.stats.judge_calls).toBeLessThanOrEqual(2 * 6)

      const stopped = await runSearch(dataset, createSearchRoles({ backend: 'mock', dataset }), config, {
        onCheckpoint: () => 'stop',
      })
      const resumed = await runSearch(dataset, createSearchRoles({ backend: 'mock', dataset }), config, {
        resumeFrom: JSON.parse(JSON.stringify(stopped.state)) as SearchState,
      })
      expect(resumed.output).toEqual(first.output)
    }
  })
})
