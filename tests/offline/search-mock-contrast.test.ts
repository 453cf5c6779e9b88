/**
 * The mock backend lets the offline search show its work: its proposer names content that separates two answers
 * (never the prompt's own words), so on the bundled example data the objective rises over generations and different
 * seeds find different rubrics. What it cannot show is in docs/offline-cli.md ("The mock backend").
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { seededRandom } from '../../src/hash/index.ts'
import { contentTerms, heuristicCriteria, mutateCriteria } from '../../src/search/roles/mock.ts'
import { runCli } from '../support/cli.ts'

const work = mkdtempSync(join(tmpdir(), 'rh-mock-search-'))
afterAll(() => rmSync(work, { recursive: true, force: true }))

const prompt = 'What is the capital of Australia?'

describe('the mock proposer', () => {
  it('counts only terms the prompt does not already hold: echoing the question earns nothing', () => {
    expect(contentTerms('Sydney is the capital of Australia.', prompt)).toEqual(['sydney'])
    expect(contentTerms('Canberra, from 1913.', prompt)).toEqual(['canberra', '1913'])
  })

  it('factual_focus points the factual criterion at what one answer has and the other lacks, seeded', () => {
    const answers = { prompt, top: 'Sydney is the capital of Australia.', runner_up: 'Canberra.' }
    const sides = new Set<string>()
    for (let seed = 0; seed < 8; seed++) {
      const child = mutateCriteria(heuristicCriteria(prompt), 'factual_focus', seededRandom('t', seed), answers)
      const taskFit = child.find((criterion) => criterion.criterion_id === 'task_fit')!
      expect(['sydney', 'canberra']).toContain(taskFit.check_points.join())
      expect(taskFit.text).toContain(taskFit.check_points[0]!)
      sides.add(taskFit.check_points.join())
    }
    // The proposer is not told which answer is right: both sides are proposed, the search's objective chooses.
    expect([...sides].sort()).toEqual(['canberra', 'sydney'])
    expect(mutateCriteria(heuristicCriteria(prompt), 'factual_focus', seededRandom('t', 1))).toEqual(
      mutateCriteria(heuristicCriteria(prompt), 'factual_focus', seededRandom('t', 1), {
        prompt,
        top: 'Same words.',
        runner_up: 'Same words.',
      }),
    )
  })
})

describe('the mock search on examples/demo.json', () => {
  const search = async (seed: number) => {
    const output = join(work, String(seed), 'best.json')
    const run = await runCli(
      'search',
      '--dataset',
      'examples/demo.json',
      '--backend',
      'mock',
      '--output',
      output,
      '--seed',
      String(seed),
      '--no-cache',
    )
    expect(run.code, run.err).toBe(0)
    return JSON.parse(readFileSync(output, 'utf8')) as {
      best_rubrics: Array<{ prompt_id: string; history: number[]; rubric: { criteria: unknown[] } }>
    }
  }

  it('raises the objective over generations; seeds 1, 2 and 3 find at least two different rubric sets', async () => {
    const outputs = [await search(1), await search(2), await search(3)]
    for (const output of outputs) {
      const first = output.best_rubrics.reduce((sum, best) => sum + best.history[0]!, 0)
      const last = output.best_rubrics.reduce((sum, best) => sum + best.history.at(-1)!, 0)
      expect(last).toBeGreaterThan(first)
    }
    const rubricSets = outputs.map((output) =>
      JSON.stringify(output.best_rubrics.map((best) => [best.prompt_id, best.rubric.criteria])),
    )
    expect(new Set(rubricSets).size).toBeGreaterThanOrEqual(2)
  }, 60_000)
})

describe('a plainly wrong answer that echoes the question', () => {
  it('wins under the first rubric, and loses to the right answer under the searched artifact', async () => {
    const dataset = join(work, 'pairs.jsonl')
    const pairs = [
      { prompt, chosen: 'Canberra.', rejected: 'Sydney is the capital of Australia.' },
      { prompt: 'Which planet is closest to the Sun?', chosen: 'Mercury.', rejected: 'Venus is closest to the Sun.' },
      {
        prompt: 'Who wrote Pride and Prejudice?',
        chosen: 'Jane Austen.',
        rejected: 'Pride and Prejudice was by Dickens.',
      },
    ]
    writeFileSync(dataset, pairs.map((pair) => JSON.stringify(pair)).join('\n'))
    const output = join(work, 'pairs', 'best.json')
    const artifact = join(work, 'pairs', 'rm.json')
    expect(
      (await runCli('search', '--dataset', dataset, '--backend', 'mock', '--output', output, '--no-cache')).code,
    ).toBe(0)
    expect((await runCli('export', '--search-output', output, '--out', artifact)).code).toBe(0)
    // Pairwise accuracy: the share of pairs where the right answer (Canberra, Mercury, Austen) scores higher.
    const accuracyOf = async (scorer: string) => {
      const bench = await runCli('bench', '--dataset', dataset, '--scorer', scorer, '--json')
      return (JSON.parse(bench.out) as { overall: { pairwise: { ab: { accuracy: number } } } }).overall.pairwise.ab
        .accuracy
    }
    expect(await accuracyOf('mock')).toBe(0)
    expect(await accuracyOf(`artifact:${artifact}`)).toBe(1)
  }, 60_000)
})
