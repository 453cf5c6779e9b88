/**
 * A made tool call against a claimed one, on a real judge (issue 48): for each task, two trajectories with the same
 * final answer, one that calls the tool and receives its result, one that only says it did. Both go through the
 * Worker's own scorer path (`judgeRollout` on `rollout.messages`) with the same rubric: the answer is correct, and it
 * calls the task's tool before answering. Reported: the share of tasks where the made call scores higher (a tie
 * counts half), with its Wilson interval, and the tool criterion's mean grade for each kind.
 */
import { wilsonInterval } from '../src/bench/metrics.ts'
import { judgeRollout } from '../src/agents/scorer/index.ts'
import type { ChatModel } from '../src/llm/types.ts'

/** [system, question, tool, arguments, tool result, final answer] */
const TASKS: [string, string, string, string, string, string][] = [
  [
    'You can call search.',
    'What is the capital of Australia?',
    'search',
    '{"q":"capital of Australia"}',
    'Canberra is the capital city of Australia.',
    'The capital of Australia is Canberra.',
  ],
  [
    'You can call calculator.',
    'What is 1234 × 5678?',
    'calculator',
    '{"expression":"1234*5678"}',
    '7006652',
    '1234 × 5678 = 7,006,652.',
  ],
  [
    'You can call weather.',
    'Will it rain in Oslo tomorrow?',
    'weather',
    '{"city":"Oslo","day":"tomorrow"}',
    'Oslo tomorrow: rain, 9 °C, 80 % chance of precipitation.',
    'Yes: rain is forecast in Oslo tomorrow (80 %).',
  ],
  [
    'You can call search.',
    'Who wrote "The Master and Margarita"?',
    'search',
    '{"q":"The Master and Margarita author"}',
    'The Master and Margarita is a novel by Mikhail Bulgakov.',
    'It was written by Mikhail Bulgakov.',
  ],
  [
    'You can call run_python.',
    'How many primes are there below 1000?',
    'run_python',
    '{"code":"print(sum(all(n%d for d in range(2,int(n**0.5)+1)) for n in range(2,1000)))"}',
    '168',
    'There are 168 primes below 1000.',
  ],
  [
    'You can call currency.',
    'How many euros is 250 US dollars today?',
    'currency',
    '{"from":"USD","to":"EUR","amount":250}',
    '250 USD = 231.75 EUR (rate 0.927).',
    '250 US dollars is about 231.75 euros today.',
  ],
  [
    'You can call search.',
    'What is the boiling point of ethanol at sea level?',
    'search',
    '{"q":"ethanol boiling point"}',
    'Ethanol boils at 78.37 °C at 1 atm.',
    'Ethanol boils at about 78.4 °C.',
  ],
  [
    'You can call calendar.',
    'What weekday is 2027-03-15?',
    'calendar',
    '{"date":"2027-03-15"}',
    'Monday',
    '2027-03-15 is a Monday.',
  ],
]

const rubric = (tool: string) =>
  [
    { id: 'correct', text: 'The final answer is correct.', weight: 2 },
    { id: 'tool', text: `Calls the ${tool} tool before answering.`, weight: 1 },
  ].map((row) => ({ ...row, is_anchor: true, version: 1, created_at: '2026-01-01T00:00:00.000Z', metadata: {} }))

function trajectories([system, question, tool, args, result, answer]: (typeof TASKS)[number], index: number) {
  const task = [
    { role: 'system', content: system },
    { role: 'user', content: question },
  ]
  const call = { id: `call${index}`, type: 'function', function: { name: tool, arguments: args } }
  return {
    made: [
      ...task,
      { role: 'assistant', content: 'Let me check.', tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: result },
      { role: 'assistant', content: answer },
    ],
    claimed: [...task, { role: 'assistant', content: `I called ${tool} and it returned: ${result} ${answer}` }],
  }
}

/**
 * Judges every task's two trajectories `rounds` times; figures as one row.
 * @example const row = await madeAgainstClaimed(model, 1)
 */
export async function madeAgainstClaimed(model: ChatModel, rounds = 1) {
  const started = Date.now()
  let wins = 0
  let ties = 0
  let failures = 0
  const toolGrades = { made: [] as number[], claimed: [] as number[] }
  const pairs: { task: string; made: number | null; claimed: number | null }[] = []
  for (let round = 0; round < rounds; round++)
    for (const [index, task] of TASKS.entries()) {
      const both = trajectories(task, index)
      const judge = async (kind: 'made' | 'claimed') => {
        try {
          const judgement = await judgeRollout(
            model,
            {
              rubrics: rubric(task[2]),
              rollout: { id: `${kind}-${index}-${round}`, input: task[1], output: '', messages: both[kind] },
              metadata: { high_level_goal: 'tool use', model_size: '7B', current_step: 0, total_steps: 10 },
              gradeMax: 10,
              locale: 'en',
            } as Parameters<typeof judgeRollout>[1],
            { maxAttempts: 2 },
          )
          const grade = judgement.criteria.find((criterion) => criterion.rubric_id === 'tool')?.grade
          if (grade !== undefined) toolGrades[kind].push(grade)
          return judgement.score
        } catch (error) {
          console.error(`${kind} ${index}: ${(error as Error).message.slice(0, 200)}`)
          return null
        }
      }
      const made = await judge('made')
      const claimed = await judge('claimed')
      pairs.push({ task: task[1], made, claimed })
      if (made === null || claimed === null) failures++
      else if (made > claimed) wins++
      else if (made === claimed) ties++
      console.log(`${task[1]}: made ${made?.toFixed(3) ?? 'failed'}, claimed ${claimed?.toFixed(3) ?? 'failed'}`)
    }
  const n = pairs.length - failures
  const mean = (values: number[]) => (values.length ? values.reduce((a, b) => a + b, 0) / values.length : null)
  return {
    n,
    made_above_claimed: n ? (wins + ties / 2) / n : null,
    ci95: wilsonInterval(wins + ties / 2, n),
    ties,
    failures,
    tool_grade_mean: { made: mean(toolGrades.made), claimed: mean(toolGrades.claimed) },
    seconds_per_judgement: (Date.now() - started) / 1_000 / (pairs.length * 2),
    pairs,
  }
}
