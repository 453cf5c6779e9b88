/**
 * Questions from a preference dataset instead of the generated arithmetic: each chosen/rejected record with a
 * reference answer (gsm8k-solutions' `pairs.jsonl`, or any JSONL of that shape) gives a prompt, a right and a wrong
 * real answer, and the ground truth the judge is shown.
 */
import { readFileSync } from 'node:fs'
import { UsageError } from '../../src/usage-error/index.ts'
import type { Question } from './scenario.ts'

/** One line of the dataset: what the loader reads of it. */
interface PairRecord {
  id?: string
  prompt?: unknown
  reference?: unknown
  chosen?: unknown
  rejected?: unknown
}

/**
 * The last number a solution states: its final answer (gsm8k solutions end with `A: 18`).
 * @example finalNumber('… so 2 * 9 = $18 per day\nA: 18') // 18
 * @internal
 */
export function finalNumber(text: string): number | undefined {
  const numbers = text.replace(/(\d),(?=\d{3}(?!\d))/g, '$1').match(/-?\d+(?:\.\d+)?/g)
  const last = numbers?.at(-1)
  return last === undefined ? undefined : Number(last)
}

/**
 * The questions of a chosen/rejected JSONL file whose `reference` is a number and whose rejected answer ends on
 * another one, in file order; a file with none is a UsageError.
 * @example loadDatasetQuestions('../shared/datasets/gsm8k-solutions/pairs.jsonl')[0].answer // 18
 */
export function loadDatasetQuestions(file: string): Question[] {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    throw new UsageError(`--questions: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? error})`)
  }
  const questions = text
    .split('\n')
    .filter((line) => line.trim())
    .flatMap((line, index): Question[] => {
      let record: PairRecord
      try {
        record = JSON.parse(line) as PairRecord
      } catch {
        throw new UsageError(`--questions: line ${index + 1} of ${file} is not JSON`)
      }
      const { prompt, reference, chosen, rejected } = record
      if (![prompt, reference, chosen, rejected].every((field) => typeof field === 'string')) return []
      const answer = finalNumber(reference as string)
      const slip = finalNumber(rejected as string)
      if (answer === undefined || slip === undefined || slip === answer) return []
      return [
        {
          id: `d-${record.id ?? index}`,
          prompt: prompt as string,
          answer,
          working: chosen as string,
          slip: { answer: slip, working: rejected as string },
          reference: `The answer is ${reference}.`,
          solutions: { right: chosen as string, wrong: rejected as string },
        },
      ]
    })
  if (questions.length === 0)
    throw new UsageError(
      `--questions: ${file} has no usable record (each needs prompt, a numeric reference, chosen and a rejected ` +
        'answer that ends on another number)',
    )
  return questions
}
