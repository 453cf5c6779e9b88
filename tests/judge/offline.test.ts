/**
 * The offline commands on a real model: `search`, `bench` and `evolve` against SmolLM2-135M on llama-cpp-python's
 * server (what `npm run judge:local` serves), each run as a user runs it (the `reward-harness` bin, the flags the
 * commands already have), on the four shortest pairs of the LLMBar fixtures (a 135M model on two cores writes about
 * 30 tokens a second).
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
let dataset: string

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
  dataset = join(work, 'llmbar-slice.json')
  writeFileSync(dataset, JSON.stringify([...pairs].sort((a, b) => size(a) - size(b)).slice(0, 4)))
}, 180_000)

afterAll(() => {
  judge?.server.kill('SIGINT')
  rmSync(work, { recursive: true, force: true })
})

const cli = (args: string[]) => runRewardHarness([...args, '--json'], {}, COMMAND_TIMEOUT_MS)

describe('the offline commands on the real judge', () => {
  it('search writes a rubric per prompt, and bench grades with it on the model: n and an interval', async () => {
    const output = join(work, 'search', 'best.json')
    const searched = await cli([
      'search',
      ...['--dataset', dataset, '--output', output],
      ...['--endpoint', `${judge.url},max_concurrency=1,structured_output=json_schema`, '--model', judge.model],
      ...['--generations', '1', '--population-size', '2', '--mutations-per-round', '1'],
      ...['--grade-max', '4', '--max-tokens', '256', '--role-attempts', '2', '--max-attempts', '2'],
      ...['--timeout-ms', '300000'],
    ])
    expect(searched.code, searched.err).toBe(0)
    const best = JSON.parse(readFileSync(output, 'utf8'))
    const rubrics = Object.values(best.best_rubrics ?? {}) as unknown[]
    console.log(`search: ${rubrics.length} rubrics;`, searched.out.trim().split('\n').at(-1))
    expect(rubrics.length).toBeGreaterThan(0)

    const benched = await cli([
      'bench',
      ...['--dataset', dataset, '--scorer', `rubric:${output}`, '--concurrency', '1'],
      ...['--llm-base-url', judge.url, '--llm-model', judge.model, '--llm-structured-output', 'json_schema'],
    ])
    expect(benched.code, benched.err).toBe(0)
    const report = JSON.parse(benched.out)
    console.log('bench on the searched rubric:', JSON.stringify(report.metrics ?? report).slice(0, 600))
    expect(JSON.stringify(report)).toMatch(/"n"\s*:\s*[1-9]/)
  })

  it('evolve runs a baseline and an iteration of its judge library on the model', async () => {
    const out = join(work, 'evolve')
    const evolved = await cli([
      'evolve',
      ...['--dataset', dataset, '--out', out, '--iterations', '1', '--concurrency', '1'],
      ...['--backend', 'openai', '--endpoint', `${judge.url},max_concurrency=1,structured_output=json_schema`],
      ...['--model', judge.model],
    ])
    expect(evolved.code, evolved.err).toBe(0)
    console.log('evolve:', evolved.out.trim().slice(0, 600))
  })
})
