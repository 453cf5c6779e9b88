import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { createScorer, libraryScorer, parseScorerSpec } from '../../offline/bench/scorers.ts'
import { saveLibrary } from '../../offline/library/index.ts'
import { addEntry, emptyLibrary } from '../../src/library/index.ts'
import type { ChatModel } from '../../src/llm/types.ts'
import type { PromptItem } from '../../src/search/types.ts'
import { runCli } from '../support/cli.ts'

const FIXTURE = 'offline/evolve/fixtures/pairs-demo.json'

const run = runCli

const item: PromptItem = {
  prompt_id: 'p1',
  prompt: 'Explain the water cycle and its main stages.',
  candidates: [
    {
      candidate_id: 'c0',
      text: 'Water cycle: evaporation, condensation, precipitation, collection.',
      source: 'unknown',
      label: {},
      metadata: {},
    },
    { candidate_id: 'c1', text: 'Water moves.', source: 'unknown', label: {}, metadata: {} },
  ],
  metadata: {},
}

function reply(text: string): ChatModel {
  return {
    id: 'fixed',
    complete: async () => ({ text, model: 'fixed', usage: { prompt_tokens: 0, completion_tokens: 0 } }),
  }
}

describe('bench --scorer library:<dir>', () => {
  let libDir = ''
  beforeAll(async () => {
    libDir = await mkdtemp(join(tmpdir(), 'bench-lib-'))
    const library = addEntry(emptyLibrary('bench'), {
      name: 'instruction-coverage',
      kind: 'skill',
      description: 'Prefer the answer that covers what the instruction asks',
      body: 'Judge by instruction coverage: the better answer addresses every part the instruction asks for.',
    })
    await saveLibrary(library, libDir)
  })

  it('scores candidates by their win rate over both orders of every pair (mock judge)', async () => {
    expect(parseScorerSpec(`library:${libDir}`)).toEqual({ kind: 'library', dir: libDir })
    const scorer = await createScorer({ kind: 'library', dir: libDir }, { concurrency: 2, seed: 0 })
    expect(scorer.name).toBe(`library:${libDir}`)
    const [scores] = await scorer.scoreAll([item])
    expect(scores).toEqual([{ score: 1 }, { score: 0 }])
  })

  it('counts failed judgments apart (never as ties) and reads a judged tie as 0.5', async () => {
    const broken = await libraryScorer(libDir, { concurrency: 2, seed: 0, model: reply('not json at all') })
    const [failed] = await broken.scoreAll([item])
    expect(failed!.every((score) => 'error' in score)).toBe(true)
    expect(broken.stats.failures).toBe(broken.stats.judgments)
    expect(broken.stats.judgments).toBe(2)

    const tie = await libraryScorer(libDir, {
      concurrency: 2,
      seed: 0,
      model: reply('{"entries": [], "answer": {"preference": "tie", "reason": "same"}}'),
    })
    const [tied] = await tie.scoreAll([item])
    expect(tied).toEqual([{ score: 0.5 }, { score: 0.5 }])
    expect(tie.stats.failures).toBe(0)
  })

  it('runs from the CLI on a library evolved on the mock backend; refuses a directory that is not one', async () => {
    const runDir = await mkdtemp(join(tmpdir(), 'bench-evolve-'))
    expect(
      (
        await run(
          'evolve',
          '--dataset',
          FIXTURE,
          '--out',
          runDir,
          '--iterations',
          '2',
          '--backend',
          'mock',
          '--seed',
          '42',
          '--no-cache',
        )
      ).code,
    ).toBe(0)
    const result = await run(
      'bench',
      '--dataset',
      FIXTURE,
      '--scorer',
      `library:${join(runDir, 'checkpoints', 'best')}`,
      '--json',
    )
    expect(result.code).toBe(0)
    const report = JSON.parse(result.out)
    expect(report.overall.pairwise.ab).toMatchObject({ n: 12, failures: 0 })
    expect(report.overall.pairwise.ab.accuracy).toBeGreaterThan(0.5)
    const missing = await run('bench', '--dataset', FIXTURE, '--scorer', `library:${join(runDir, 'nope')}`)
    expect(missing.code).toBe(2)
    expect(missing.err).toMatch(/registry\.json/)
  }, 60_000)
})
