/**
 * The offline commands on a real model: `search`, `bench` and `evolve` against SmolLM2-135M on llama-cpp-python's
 * server (what `npm run judge:local` serves), each run as a user runs it (the `reward-harness` bin, the flags the
 * commands already have), on the shortest pairs of the LLMBar fixtures (a 135M model on two cores reads about 90
 * prompt tokens a second and writes about 40).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LocalJudge } from '../../offline/judge-local/index.ts'
import { runRewardHarness } from '../support/child.ts'
import { LLMBAR_FIXTURES } from '../support/cli.ts'
import { startInstalledJudge } from './support.ts'

const COMMAND_TIMEOUT_MS = 900_000

let judge: LocalJudge
let work: string
/** The `count` shortest pairs, as a dataset file: one for search and bench, three for evolve (two train, one val). */
let pairsOf: (count: number) => string

interface LlmBarPair {
  input: string
  output_1: string
  output_2: string
  label: number
}

beforeAll(async () => {
  judge = await startInstalledJudge()
  work = mkdtempSync(join(tmpdir(), 'judge-offline-'))
  const pairs: LlmBarPair[] = JSON.parse(readFileSync(join(LLMBAR_FIXTURES, 'natural.json'), 'utf8'))
  const size = (pair: LlmBarPair) => pair.input.length + pair.output_1.length + pair.output_2.length
  const shortest = [...pairs].sort((a, b) => size(a) - size(b))
  pairsOf = (count) => {
    const path = join(work, `llmbar-${count}.json`)
    writeFileSync(path, JSON.stringify(shortest.slice(0, count)))
    return path
  }
}, 180_000)

afterAll(() => {
  judge?.stop()
  rmSync(work, { recursive: true, force: true })
})

const cli = (args: string[]) => runRewardHarness([...args, '--json'], {}, COMMAND_TIMEOUT_MS)

describe('the offline commands on the real judge', () => {
  it('search writes a rubric per prompt, and bench grades with it on the model: n and an interval', async () => {
    // One pair: a search's ~12 calls a prompt take ~10 s each here (800-token prompts at ~80 tokens a second). A
    // 135M model under a JSON grammar can fill a proposal's every string to its bound (1,618 tokens, 100 s under
    // CI's load), so the replies are capped as a user on a slow model would cap them.
    const dataset = pairsOf(1)
    const output = join(work, 'search', 'best.json')
    const searched = await cli([
      'search',
      ...['--dataset', dataset, '--output', output],
      ...['--endpoint', `${judge.url},max_concurrency=1,structured_output=json_schema`, '--model', judge.model],
      ...['--generations', '1', '--population-size', '2', '--mutations-per-round', '1', '--mutation-parent-count', '1'],
      ...['--grade-max', '4', '--role-attempts', '2', '--max-attempts', '2'],
      ...['--timeout-ms', '300000', '--max-tokens', '512'],
    ])
    expect(searched.code, searched.err).toBe(0)
    const best = JSON.parse(readFileSync(output, 'utf8'))
    const rubrics = Object.values(best.best_rubrics ?? {}) as unknown[]
    console.log(`search: ${rubrics.length} rubric(s)`)
    expect(rubrics).toHaveLength(1)

    const benched = await cli([
      'bench',
      ...['--dataset', dataset, '--scorer', `rubric:${output}`, '--concurrency', '1'],
      ...['--llm-base-url', judge.url, '--llm-model', judge.model, '--llm-structured-output', 'json_schema'],
    ])
    expect(benched.code, benched.err).toBe(0)
    const report = JSON.parse(benched.out)
    const { ab, ba } = report.overall.pairwise
    console.log('bench on the searched rubric:', JSON.stringify(report.overall.pairwise))
    // The pair judged in both orders; each interval an honest Wilson one around a 135M model's guess.
    for (const order of [ab, ba]) {
      expect(order.n).toBe(1)
      expect(order.ci95).toHaveLength(2)
      expect(order.failures).toBe(0)
    }
  })

  it('evolve runs a baseline and an iteration of its judge library on the model', async () => {
    const out = join(work, 'evolve')
    const evolved = await cli([
      'evolve',
      ...['--dataset', pairsOf(3), '--out', out, '--iterations', '1', '--concurrency', '1'],
      ...['--orders', 'one', '--tool-check', '0', '--max-tokens', '512', '--timeout-ms', '300000'],
      ...['--backend', 'openai', '--endpoint', `${judge.url},max_concurrency=1,structured_output=json_schema`],
      ...['--model', judge.model],
    ])
    expect(evolved.code, evolved.err).toBe(0)
    const summary = JSON.parse(evolved.out)
    console.log('evolve:', JSON.stringify({ judging: summary.judging, best_val_accuracy: summary.best_val_accuracy }))
    expect(summary.iterations_done).toBe(1)
    // A verdict came back on the model: the library's answer-only turns send their schema.
    expect(summary.judging.failures).toBeLessThan(summary.judging.judged)
  })
})
