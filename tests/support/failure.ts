import type { LlmError } from '../../src/llm/index.ts'

/**
 * The error a promise rejects with; fails the test when it resolves instead.
 * @example expect(await failureOf(model.complete(request))).toMatchObject({ kind: 'timeout' })
 */
export async function failureOf(promise: Promise<unknown>): Promise<LlmError> {
  try {
    await promise
  } catch (error) {
    return error as LlmError
  }
  throw new Error('expected a failure')
}
