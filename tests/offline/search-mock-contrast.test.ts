/**
 * The mock backend lets the offline search show its work: its proposer names content that separates two answers
 * (never the prompt's own words), and its verifier finds a check point only where an answer states it whole, so on
 * the bundled example data the objective rises over generations, different seeds find different rubrics, and the
 * searched rubrics rank answers the search never saw (examples/demo-held-out.json) better than the first rubric.
 * What it cannot show is in docs/offline-cli.md ("The mock backend").
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { seededRandom } from '../../src/hash/index.ts'
import { contentTerms, heuristicCriteria, heuristicGrades, mutateCriteria } from '../../src/search/roles/mock.ts'
import type { Criterion } from '../../src/schemas/search-rubric.ts'
import { runCli } from '../support/cli.ts'

const work = mkdtempSync(join(tmpdir(), 'rh-mock-search-'))
afterAll(() => rmSync(work, { recursive: true, force: true }))

const prompt = 'What is the capital of Australia?'

describe('the mock proposer', () => {
  it('counts only terms the prompt does not already hold: echoing the question earns nothing', () => {
    expect(contentTerms('Sydney is the capital of Australia.', prompt)).toEqual(['sydney'])
    expect(contentTerms('Canberra, from 1913.', prompt)).toEqual(['canberra', '1913'])
  })

  it('names a number whole, as a fact check would: "177.8" and "11:13", not "177", "8", "11" and "13"', () => {
    const trains = 'Two trains leave at 9:00 and 10:00. When do they meet?'
    expect(contentTerms('They meet at 11:13, about 177.8 km from A, 9:00 and 2 h.', trains)).toEqual([
      '11:13',
      'about',
      '177.8',
    ])
  })
})

describe('the mock verifier', () => {
  const checks = (check_points: string[], negative_examples: string[] = []): Criterion[] => [
    {
      criterion_id: 'facts',
      text: 'States the facts.',
      weight: 1,
      criterion_type: 'factual',
      check_points,
      positive_examples: [],
      negative_examples,
    },
  ]
  const grade = (answer: string, criteria: Criterion[]) => heuristicGrades(answer, criteria, 10, () => 1, 0).facts

  it('finds a check point only where the answer states it whole, not inside a longer number or word', () => {
    expect(grade('Traffic fell by 20% and buses ran faster.', checks(['20']))).toBe(10)
    expect(grade('Stockholm tried one in 2006.', checks(['20']))).toBe(0)
    expect(grade('About 133 km from City A.', checks(['13']))).toBe(0)
    expect(grade('They meet at 11:13:20.', checks(['11:13']))).toBe(10)
    // A list marker is not the start of a decimal: "1." is not found in "1.67 hours".
    expect(grade('After 1.67 hours.', checks(['1.']))).toBe(0)
    expect(grade('1. Head start.', checks(['1.']))).toBe(10)
  })

  it('zeroes a criterion for a negative example stated whole, and only then', () => {
    expect(grade('Overall, a complex issue.', checks([], ['overall']))).toBe(0)
    expect(grade('The overall effect is clear and the evidence is long enough.', checks([], ['all']))).toBeGreaterThan(
      0,
    )
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
  type SearchOutput = {
    best_rubrics: Array<{ prompt_id: string; history: number[]; rubric: { criteria: unknown[] } }>
  }
  // As the docs run it: every seed's output in one directory, so every run shares one reply cache.
  const search = async (seed: number) => {
    const file = join(work, 'demo', `best-${seed}.json`)
    const args = ['--dataset', 'examples/demo.json', '--backend', 'mock', '--output', file, '--seed', String(seed)]
    const run = await runCli('search', ...args)
    expect(run.code, run.err).toBe(0)
    return { output: JSON.parse(readFileSync(file, 'utf8')) as SearchOutput, file }
  }
  const rubricSet = (output: SearchOutput) =>
    JSON.stringify(output.best_rubrics.map((best) => [best.prompt_id, best.rubric.criteria]))
  // Bench's accuracies on answers the search never saw: the top-labelled answer scored strictly highest (K-way, the
  // first line bench prints) and every pair of answers to a prompt ordered as labelled (pairs within K-way items).
  const heldOut = async (scorer: string) => {
    const bench = await runCli('bench', '--dataset', 'examples/demo-held-out.json', '--scorer', scorer, '--json')
    expect(bench.code, bench.err).toBe(0)
    const { overall } = JSON.parse(bench.out) as {
      overall: { kway: { accuracy: number }; pairs_within_kway: { accuracy: number } }
    }
    return { kway: overall.kway.accuracy, pairs: overall.pairs_within_kway.accuracy }
  }

  it('raises the objective over generations, finds different rubrics per seed through one cache, and beats the ' +
    'first rubric on held-out answers (seeds 1, 2, 3 and the default 7)', async () => {
    const seeds = [1, 2, 3, 7]
    const runs = []
    for (const seed of seeds) runs.push(await search(seed))
    for (const [index, { output }] of runs.entries()) {
      const first = output.best_rubrics.reduce((sum, best) => sum + best.history[0]!, 0)
      const last = output.best_rubrics.reduce((sum, best) => sum + best.history.at(-1)!, 0)
      expect(last, `seed ${seeds[index]}`).toBeGreaterThan(first)
    }
    const sets = runs.map(({ output }) => rubricSet(output))
    expect(new Set(sets.slice(0, 3)).size).toBeGreaterThanOrEqual(2)
    // docs/artifacts.md deploys seed 7's artifact, then seed 2's, then rolls back: two different rubric sets.
    expect(sets[1]).not.toBe(sets[3])
    // The mock samples by each request's seed, and the reply cache keys on it: without the cache, the same rubrics.
    const uncached = join(work, 'uncached', 'best-1.json')
    const args = ['--dataset', 'examples/demo.json', '--backend', 'mock', '--seed', '1', '--no-cache']
    expect((await runCli('search', ...args, '--output', uncached)).code).toBe(0)
    expect(rubricSet(JSON.parse(readFileSync(uncached, 'utf8')) as SearchOutput)).toBe(sets[0])

    // `bench --scorer mock` grades with the search initializer's rubric: the first rubric of every search above.
    const initial = await heldOut('mock')
    for (const [index, { file }] of runs.entries()) {
      const artifact = join(work, `rm-${seeds[index]}.json`)
      expect((await runCli('export', '--search-output', file, '--out', artifact)).code).toBe(0)
      const searched = await heldOut(`artifact:${artifact}`)
      expect(searched.pairs, `seed ${seeds[index]}`).toBeGreaterThan(initial.pairs)
      expect(searched.kway, `seed ${seeds[index]}`).toBeGreaterThan(initial.kway)
    }
  }, 120_000)
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
