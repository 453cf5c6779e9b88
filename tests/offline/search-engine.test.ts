import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { createContext, scorePopulation } from '../../src/search/algorithms/context.ts'
import { MutationScheduler } from '../../src/search/algorithms/mutation-schedule.ts'
import { scheduleOptions } from '../../src/search/algorithms/evolutionary.ts'
import { distinctPerParent, executeEvolution, planEvolution } from '../../src/search/algorithms/population.ts'
import {
  parseSearchConfig,
  runSearch,
  type SearchConfigInput,
  type SearchProgress,
  type SearchState,
} from '../../src/search/index.ts'
import { Rng } from '../../src/hash/index.ts'
import { LlmError } from '../../src/llm/types.ts'
import { rubricKey } from '../../src/search/evaluator.ts'
import { MUTATION_MODES, type PreferenceDataset, type PromptItem, type SearchRoles } from '../../src/search/types.ts'
import type { Criterion, SearchRubric } from '../../src/schemas/search-rubric.ts'

// A toy world: candidates are bags of keywords; good keywords make a better answer, fluff makes it worse.
// The verifier grades a criterion "Rewards <word>" (or "Avoids <word>") by keyword presence, the judge reads the
// ground-truth ranks, and the proposer adds, removes or re-weights keyword criteria, driven by its seed.
const GOOD = ['accurate', 'evidence', 'structured', 'concise', 'specific']
const FLUFF = ['delve', 'tapestry']

function toyPrompt(p: number): PromptItem {
  const goods = (count: number) => Array.from({ length: count }, (_, i) => GOOD[(i + p) % GOOD.length]!)
  const texts = [
    [...goods(5)],
    [...goods(4), 'delve'],
    [...goods(3)],
    [...goods(2), 'delve', 'tapestry'],
    [...goods(1), 'delve'],
    ['delve', 'tapestry', 'filler'],
  ]
  return {
    prompt_id: `p${p}`,
    prompt: `Write answer number ${p}.`,
    metadata: {},
    candidates: texts.map((words, i) => ({
      candidate_id: `p${p}-c${i + 1}`,
      text: `Answer: ${words.join(' ')}.`,
      source: ['strong', 'base', 'diverse'][i % 3]!,
      label: { rank: i + 1 },
      metadata: {},
    })),
  }
}
const toyDataset = (prompts = 3): PreferenceDataset => ({
  prompts: Array.from({ length: prompts }, (_, p) => toyPrompt(p)),
})

const criterion = (verb: 'Rewards' | 'Avoids', word: string, weight = 1): Criterion => ({
  criterion_id: `${verb === 'Rewards' ? 'k' : 'a'}-${word}`,
  text: `${verb} ${word}`,
  weight,
  criterion_type: null,
  check_points: [],
  positive_examples: [],
  negative_examples: [],
})
const BAD_RUBRIC: SearchRubric = {
  rubric_id: 'bad',
  criteria: [criterion('Rewards', 'delve'), criterion('Rewards', 'tapestry')],
  grading_protocol: { grade_max: 10, allow_na: true, num_votes: 1 },
  metadata: {},
}

interface FakeOptions {
  /** Microtask hops inside each verifier call, so calls overlap. */
  hops?: number
  /** Votes disagree by ±1 grade, from the seed. */
  noisyVotes?: boolean
  onGrade?: () => void
}

function fakeRoles(options: FakeOptions = {}) {
  const counts = { verifier: 0, judge: 0, proposer: 0, initializer: 0, inFlight: 0, maxInFlight: 0 }
  const pairCalls = new Map<string, number>()
  const roles: SearchRoles = {
    initializer: {
      async initialize() {
        counts.initializer++
        return structuredClone(BAD_RUBRIC)
      },
    },
    proposer: {
      async propose({ rubric, mode, seed }) {
        counts.proposer++
        const criteria = rubric.criteria.map((c) => ({ ...c }))
        const has = (id: string) => criteria.some((c) => c.criterion_id === id)
        const addGood = (offset: number) => {
          for (let k = 0; k < GOOD.length; k++) {
            const word = GOOD[(seed + offset + k) % GOOD.length]!
            if (!has(`k-${word}`)) return void criteria.push(criterion('Rewards', word))
          }
        }
        const isFluffReward = (c: Criterion) => c.criterion_id.startsWith('k-') && FLUFF.includes(c.text.split(' ')[1]!)
        if (mode === 'anti_fluff') {
          const kept = criteria.filter((c) => !isFluffReward(c))
          if (kept.length > 0 && kept.length < criteria.length) criteria.splice(0, criteria.length, ...kept)
          else if (!has(`a-${FLUFF[seed % 2]}`)) criteria.push(criterion('Avoids', FLUFF[seed % 2]!))
        } else if (mode === 'weight_perturb') {
          const target = criteria[seed % criteria.length]!
          target.weight = isFluffReward(target) ? target.weight / 2 : target.weight * 2
        } else if (mode === 'decompose') {
          addGood(1)
          addGood(2)
        } else addGood(0)
        return { ...rubric, rubric_id: `${rubric.rubric_id}>${mode.slice(0, 3)}${seed % 97}`, criteria }
      },
    },
    verifier: {
      async grade({ candidate, rubric, seed }) {
        counts.verifier++
        counts.inFlight++
        counts.maxInFlight = Math.max(counts.maxInFlight, counts.inFlight)
        options.onGrade?.()
        for (let hop = 0; hop < (options.hops ?? 0); hop++) await Promise.resolve()
        counts.inFlight--
        const words = new Set(candidate.text.toLowerCase().match(/[a-z]+/g))
        const max = rubric.grading_protocol.grade_max
        return Object.fromEntries(
          rubric.criteria.map((c) => {
            const [verb, word] = c.text.split(' ')
            let grade = (verb === 'Avoids') !== words.has(word!) ? max : 0
            if (options.noisyVotes) grade = Math.min(max, Math.max(0, grade + (seed % 3) - 1))
            return [c.criterion_id, grade]
          }),
        )
      },
    },
    judge: {
      async compare({ item, left, right }) {
        counts.judge++
        const key = [item.prompt_id, ...[left.candidate_id, right.candidate_id].sort()].join('|')
        pairCalls.set(key, (pairCalls.get(key) ?? 0) + 1)
        const a = left.label.rank!
        const b = right.label.rank!
        return a < b ? 1 : a > b ? -1 : 0
      },
    },
  }
  return { roles, counts, pairCalls }
}

const SMALL: SearchConfigInput = {
  mode: 'evolutionary',
  iteration_scope: 'global_batch',
  generations: 5,
  population_size: 4,
  mutations_per_round: 4,
  mutation_parent_count: 2,
  batch_size: 2,
  stagnation_generations: 3,
  seed: 11,
}

describe('runSearch: iterative', () => {
  it('keeps a non-decreasing history of the accepted rubric and never ends below the initial rubric', async () => {
    const { roles } = fakeRoles()
    const { output, status } = await runSearch(toyDataset(), roles, { mode: 'iterative', iterations: 6, seed: 3 })
    expect(status).toBe('completed')
    for (const entry of output!.best_rubrics) {
      expect(entry.history).toHaveLength(6)
      for (let i = 1; i < entry.history.length; i++)
        expect(entry.history[i]).toBeGreaterThanOrEqual(entry.history[i - 1]!)
      expect(entry.score).toBeGreaterThanOrEqual(entry.history[0]!)
    }
    expect(output!.search_diagnostics).toMatchObject({ mode: 'iterative', iteration_scope: null, avg_diversity: null })
  })
})

describe('runSearch: evolutionary', () => {
  it('improves a bad initial rubric on the toy dataset (objective, tail accuracy and Kendall tau)', async () => {
    const { roles } = fakeRoles()
    const { output } = await runSearch(toyDataset(), roles, SMALL)
    for (const entry of output!.best_rubrics) {
      expect(entry.score).toBeGreaterThan(entry.history[0]! + 0.05)
      expect(entry.objective.raw_tail_acc).toBeGreaterThan(0.5)
      expect(entry.objective.kendall_tau!).toBeGreaterThan(0)
      // The bad rubric puts the fluffiest answers first; the best one must rank the true best at the top.
      expect(entry.best_candidate_id).toBe(`${entry.prompt_id}-c1`)
    }
    const margins = output!.search_diagnostics.margin_improvement
    expect(margins.global.improved_prompts).toBe(3)
    expect(margins.per_prompt.p0!.initial_margin).toBeLessThanOrEqual(0)
  })

  it('writes the output shape: entries by prompt id, candidate scores best first, diagnostics filled', async () => {
    const { roles } = fakeRoles()
    const dataset = toyDataset(3)
    dataset.prompts.reverse()
    const { output } = await runSearch(dataset, roles, { ...SMALL, generations: 2 })
    expect(output!.best_rubrics.map((entry) => entry.prompt_id)).toEqual(['p0', 'p1', 'p2'])
    for (const entry of output!.best_rubrics) {
      const scores = Object.values(entry.candidate_scores)
      expect(scores).toEqual([...scores].sort((a, b) => b - a))
      expect(Object.keys(entry.candidate_scores)[0]).toBe(entry.best_candidate_id)
      expect(output!.best_objective_scores[entry.prompt_id]).toBe(entry.score)
    }
    expect(output!.search_diagnostics).toMatchObject({
      mode: 'evolutionary',
      iteration_scope: 'global_batch',
      selection_strategy: 'rank',
      adaptive_mutation: 'fixed',
      generations_run: 2,
    })
    expect(output!.search_diagnostics.avg_diversity).toBeGreaterThan(0)
    expect(output).toMatchObject({ run_manifest: null, usage: null })
  })

  it('returns identical output for the same seed, with any concurrency', async () => {
    const config = { ...SMALL, selection_strategy: 'tournament', adaptive_mutation: 'success_feedback' } as const
    const first = await runSearch(toyDataset(), fakeRoles({ hops: 3 }).roles, { ...config, concurrency: 1 })
    const second = await runSearch(toyDataset(), fakeRoles({ hops: 1 }).roles, { ...config, concurrency: 16 })
    expect(second.output).toEqual(first.output)
    expect(JSON.stringify(second.state)).toBe(JSON.stringify(first.state))
  })

  it('never has more verifier calls in flight than `concurrency`, and does use the room', async () => {
    const { roles, counts } = fakeRoles({ hops: 5 })
    await runSearch(toyDataset(), roles, { ...SMALL, generations: 2, concurrency: 3 })
    expect(counts.maxInFlight).toBe(3)
  })

  it('asks the judge at most once per unordered pair per prompt for the whole search', async () => {
    const { roles, pairCalls, counts } = fakeRoles()
    await runSearch(toyDataset(), roles, { ...SMALL, adaptive_mutation: 'diversity_driven', concurrency: 12 })
    expect(counts.judge).toBeGreaterThan(0)
    expect(Math.max(...pairCalls.values())).toBe(1)
    expect(pairCalls.size).toBeLessThanOrEqual(3 * 15)
  })

  it('grades each (rubric content, candidate, vote) once: rescoring a population costs no verifier call', async () => {
    const { roles, counts } = fakeRoles()
    const result = await runSearch(toyDataset(1), roles, { ...SMALL, generations: 3 })
    const keys = Object.keys(result.state.memo.grades)
    expect(counts.verifier).toBe(keys.length)
    expect(result.stats.grade_memo_hits).toBeGreaterThan(counts.verifier)
  })

  it('prompt_local keeps evolving a bad rubric past generation 1, and stops once it is distinguished', async () => {
    const { roles } = fakeRoles()
    const { output } = await runSearch(toyDataset(2), roles, {
      ...SMALL,
      iteration_scope: 'prompt_local',
      generations: 8,
      stagnation_generations: 8,
    })
    for (const entry of output!.best_rubrics) {
      expect(entry.generations_run).toBeGreaterThan(1)
      if (entry.stop_reason === 'distinguished') {
        expect(entry.objective.signed_top_margin).toBeGreaterThan(0)
        expect(entry.objective.raw_tail_acc).toBeGreaterThanOrEqual(0.8)
      }
    }
    expect(output!.best_rubrics.some((entry) => entry.stop_reason === 'distinguished')).toBe(true)
    expect(Object.keys(output!.search_diagnostics.mutation_diagnostics as object)).toEqual(['p0', 'p1'])
  })

  it('uses every mutation mode within one generation under the fixed schedule', async () => {
    const seen: string[] = []
    const { roles } = fakeRoles()
    const propose = roles.proposer.propose.bind(roles.proposer)
    roles.proposer.propose = (input) => {
      seen.push(input.mode)
      return propose(input)
    }
    await runSearch(toyDataset(1), roles, {
      ...SMALL,
      generations: 1,
      population_size: 2,
      mutations_per_round: 6,
      batch_size: 1,
    })
    // The initial population proposes one child; the first generation six, one per mode.
    expect(new Set(seen.slice(-6)).size).toBe(6)
  })

  it('drops a mutation whose proposer replies stay unusable, counts it, and searches on with the others', async () => {
    const { roles } = fakeRoles()
    const propose = roles.proposer.propose.bind(roles.proposer)
    let call = 0
    // Every other proposal breaks its mode's contract through all its retries, as a small model's did.
    roles.proposer.propose = (input) =>
      call++ % 2 === 0
        ? Promise.reject(new LlmError('invalid_reply', 'proposer reply breaks the raise_bar contract'))
        : propose(input)
    const { output, status, stats } = await runSearch(toyDataset(1), roles, { ...SMALL, generations: 2 })
    expect(status).toBe('completed')
    expect(output!.best_rubrics).toHaveLength(1)
    expect(stats.proposer_refused).toBe(Math.ceil(stats.proposer_calls / 2))
    expect(stats.proposer_refused).toBeGreaterThan(0)
  })

  it('fails the search when the proposer cannot be reached at all: that is not a bad mutation', async () => {
    const { roles } = fakeRoles()
    roles.proposer.propose = () => Promise.reject(new LlmError('network', 'connection refused'))
    await expect(runSearch(toyDataset(1), roles, SMALL)).rejects.toThrow('connection refused')
  })

  it('mutates the initial population using the top two candidates under the base rubric', async () => {
    const contrasts: Array<[string, string]> = []
    const { roles } = fakeRoles()
    const propose = roles.proposer.propose.bind(roles.proposer)
    roles.proposer.propose = (input) => {
      contrasts.push([input.top.candidate_id, input.runnerUp.candidate_id])
      return propose(input)
    }
    await runSearch(toyDataset(1), roles, { ...SMALL, generations: 1, batch_size: 1, mutations_per_round: 1 })
    // Under the bad rubric c4 and c6 (delve + tapestry) lead, not the dataset's first two.
    expect(contrasts[0]).toEqual(['p0-c4', 'p0-c6'])
  })
})

describe('one round of evolution', () => {
  const rubricOf = (id: string, words: string[]): SearchRubric => ({
    ...BAD_RUBRIC,
    rubric_id: id,
    criteria: words.map((w) => criterion('Rewards', w)),
  })

  it('gives no parent the same mode twice in a round while one is free, and keeps every mode drawn once', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(...MUTATION_MODES), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 4 }),
        (drawn, parentCount) => {
          const modes = distinctPerParent(drawn, parentCount)
          expect(modes).toHaveLength(drawn.length)
          for (let parent = 0; parent < parentCount; parent++) {
            const children = modes.filter((_, index) => index % parentCount === parent)
            // A repeat only once the parent has had every mode.
            expect(new Set(children).size).toBe(Math.min(children.length, MUTATION_MODES.length))
            const firsts = drawn.filter(
              (mode, index) =>
                index % parentCount === parent &&
                drawn.findIndex((other, at) => other === mode && at % parentCount === parent) === index,
            )
            for (const mode of firsts) expect(children).toContain(mode)
          }
        },
      ),
    )
  })

  it.each(['success_feedback', 'exploration_decay', 'diversity_driven'] as const)(
    'plans rounds whose children of one parent are asked in different modes (%s draws modes at random)',
    async (adaptive_mutation) => {
      const item = toyPrompt(0)
      const { roles } = fakeRoles()
      const config = parseSearchConfig({
        population_size: 4,
        mutations_per_round: 4,
        mutation_parent_count: 1,
        adaptive_mutation,
      })
      const ctx = createContext(config, roles)
      const population = await scorePopulation(ctx, item, [rubricOf('p1', ['delve']), rubricOf('p2', ['filler'])])
      for (let seed = 1; seed <= 20; seed++) {
        const scheduler = new MutationScheduler(scheduleOptions(config))
        const plan = planEvolution(ctx, item, population, scheduler, Rng.fromSeed(seed), 0, null)
        const requests = plan.modes.map((mode, index) => `${plan.parents[index % plan.parents.length]!.key} ${mode}`)
        expect(new Set(requests).size, `seed ${seed}`).toBe(requests.length)
      }
    },
  )

  it('keeps the elites and admits every child better than the worst, once per content', async () => {
    const item = toyPrompt(0)
    const { roles } = fakeRoles()
    // Children, in order: two copies of a strong rubric, a medium one, and one as bad as the worst member.
    const children = [
      rubricOf('s1', GOOD),
      rubricOf('s2', GOOD),
      rubricOf('m', ['structured', 'concise']),
      rubricOf('w', ['delve', 'tapestry']),
    ]
    const config = parseSearchConfig({
      population_size: 4,
      elitism_count: 1,
      mutations_per_round: 4,
      mutation_parent_count: 1,
    })
    const ctx = createContext(config, roles)
    const population = await scorePopulation(ctx, item, [
      rubricOf('p1', ['delve']),
      rubricOf('p2', ['tapestry']),
      rubricOf('p3', ['delve', 'filler']),
      rubricOf('p4', ['filler']),
    ])
    const plan = planEvolution(
      ctx,
      item,
      population,
      new MutationScheduler(scheduleOptions(config)),
      Rng.fromSeed(1),
      0,
      null,
    )
    // Child i (proposed concurrently, but in order) is children[i].
    let call = 0
    roles.proposer.propose = async () => structuredClone(children[call++]!)
    const outcome = await executeEvolution(ctx, plan)
    const keys = outcome.population.map((member) => member.key)
    expect(keys).toContain(population[0]!.key) // the elite
    expect(keys).toContain(rubricKey(children[0]!))
    expect(keys).toContain(rubricKey(children[2]!))
    expect(new Set(keys).size).toBe(keys.length)
    expect(outcome).toMatchObject({ children: 4, admitted: 2 })
    expect(outcome.novel_children).toBeLessThanOrEqual(3) // s2 is a copy of s1 and never graded again
    expect(outcome.population.map((member) => member.total)).toEqual(
      [...outcome.population.map((member) => member.total)].sort((a, b) => b - a),
    )
    // Each child is credited with its own improvement over its parent: the strong child more than the medium one.
    expect(outcome.credits[0]!.improvement).toBeGreaterThan(outcome.credits[2]!.improvement)
    expect(outcome.credits[0]!.improvement).toBe(outcome.credits[1]!.improvement)
  })

  it('success_feedback credits only the mode whose children improved', async () => {
    const { roles } = fakeRoles()
    roles.proposer.propose = async ({ rubric, mode }) =>
      mode === 'anti_fluff'
        ? rubricOf(`${rubric.rubric_id}+af`, GOOD)
        : {
            ...rubric,
            rubric_id: `${rubric.rubric_id}+${mode}`,
            criteria: [...rubric.criteria.filter((c) => c.criterion_id !== 'k-answer'), criterion('Rewards', 'answer')],
          }
    const { output } = await runSearch(toyDataset(1), roles, {
      ...SMALL,
      generations: 3,
      population_size: 2,
      mutations_per_round: 6,
      adaptive_mutation: 'success_feedback',
    })
    const diagnostics = output!.search_diagnostics.mutation_diagnostics as {
      success_rates: Record<string, number | null>
    }
    expect(diagnostics.success_rates.anti_fluff).toBeGreaterThan(0)
    for (const [mode, rate] of Object.entries(diagnostics.success_rates))
      if (mode !== 'anti_fluff') expect(rate ?? 0).toBe(0)
  })
})

describe('runSearch: checkpoints and resume', () => {
  const roundTrip = (state: SearchState): SearchState => JSON.parse(JSON.stringify(state)) as SearchState

  it('global_batch: stopping after k generations and resuming gives exactly the uninterrupted output', async () => {
    const config = {
      ...SMALL,
      generations: 5,
      stagnation_generations: 5,
      selection_strategy: 'top_k',
      adaptive_mutation: 'success_feedback',
    } as const
    const straight = await runSearch(toyDataset(), fakeRoles().roles, config)
    for (const stopAt of [1, 3]) {
      let seen = 0
      const first = await runSearch(toyDataset(), fakeRoles().roles, config, {
        onCheckpoint: () => (++seen === stopAt ? 'stop' : undefined),
      })
      expect(first.status).toBe('stopped')
      expect(first.output).toBeNull()
      expect(first.state.global_batch!.generation).toBe(stopAt - 1)
      const { roles, counts } = fakeRoles()
      const resumed = await runSearch(toyDataset(), roles, config, { resumeFrom: roundTrip(first.state) })
      expect(resumed.output).toEqual(straight.output)
      expect(resumed.state).toEqual(straight.state)
      expect(counts.initializer).toBe(0)
    }
  })

  it('global_batch: an abort mid-generation rejects, and the last checkpoint resumes to the same output', async () => {
    const straight = await runSearch(toyDataset(), fakeRoles().roles, SMALL)
    const controller = new AbortController()
    let last: SearchState | null = null
    let grades = 0
    const { roles } = fakeRoles({ onGrade: () => ++grades === 100 && controller.abort(new Error('operator abort')) })
    await expect(
      runSearch(toyDataset(), roles, SMALL, {
        signal: controller.signal,
        onCheckpoint: (state) => void (last = state),
      }),
    ).rejects.toThrow('operator abort')
    expect(last).not.toBeNull()
    expect(last!.complete).toBe(false)
    const fresh = fakeRoles()
    const resumed = await runSearch(toyDataset(), fresh.roles, SMALL, { resumeFrom: roundTrip(last!) })
    expect(resumed.output).toEqual(straight.output)
    // The judge memo travels with the checkpoint: no pair is judged twice across the two runs.
    for (const key of fresh.pairCalls.keys())
      expect(Object.keys(last!.memo.judge).map((k) => k.split('\u0000'))).not.toContainEqual(key.split('|'))
  })

  it('prompt_local: stopping at a prompt boundary and resuming gives the same output', async () => {
    const config = {
      ...SMALL,
      iteration_scope: 'prompt_local',
      prompt_concurrency: 2,
      adaptive_mutation: 'exploration_decay',
    } as const
    const straight = await runSearch(toyDataset(), fakeRoles().roles, config)
    const first = await runSearch(toyDataset(), fakeRoles().roles, config, { onCheckpoint: () => 'stop' })
    expect(first.status).toBe('stopped')
    expect(Object.keys(first.state.completed_prompts!)).toHaveLength(1)
    const resumed = await runSearch(toyDataset(), fakeRoles().roles, config, { resumeFrom: roundTrip(first.state) })
    expect(resumed.output).toEqual(straight.output)
  })

  it('iterative: resumes at a prompt boundary too', async () => {
    const config = { mode: 'iterative', iterations: 4, prompt_concurrency: 1 } as const
    const straight = await runSearch(toyDataset(), fakeRoles().roles, config)
    let seen = 0
    const first = await runSearch(toyDataset(), fakeRoles().roles, config, {
      onCheckpoint: () => (++seen === 2 ? 'stop' : undefined),
    })
    const resumed = await runSearch(toyDataset(), fakeRoles().roles, config, { resumeFrom: roundTrip(first.state) })
    expect(resumed.output).toEqual(straight.output)
  })

  it('checkpoints once after initialisation, at every generation boundary and at the end', async () => {
    const states: SearchState[] = []
    await runSearch(
      toyDataset(),
      fakeRoles().roles,
      { ...SMALL, generations: 3, stagnation_generations: 3 },
      { onCheckpoint: (state) => void states.push(state) },
    )
    expect(states.map((state) => [state.global_batch!.generation, state.complete])).toEqual([
      [0, false],
      [1, false],
      [2, false],
      [3, false],
      [3, true],
    ])
  })

  it('rebuilds the output of a finished search from its final state without any role call', async () => {
    for (const config of [
      SMALL,
      { ...SMALL, iteration_scope: 'prompt_local' },
      { mode: 'iterative', iterations: 3 },
    ] as const) {
      const done = await runSearch(toyDataset(2), fakeRoles().roles, config)
      expect(done.state.complete).toBe(true)
      const { roles, counts } = fakeRoles()
      const again = await runSearch(toyDataset(2), roles, config, { resumeFrom: roundTrip(done.state) })
      expect(again.output).toEqual(done.output)
      expect(counts).toMatchObject({ verifier: 0, judge: 0, proposer: 0, initializer: 0 })
    }
  })

  it('refuses to resume a checkpoint of another configuration or dataset', async () => {
    const { state } = await runSearch(
      toyDataset(1),
      fakeRoles().roles,
      { ...SMALL, generations: 1 },
      { onCheckpoint: () => 'stop' },
    )
    await expect(
      runSearch(toyDataset(1), fakeRoles().roles, { ...SMALL, generations: 1, seed: 12 }, { resumeFrom: state }),
    ).rejects.toThrow(/config_hash/)
    await expect(
      runSearch(toyDataset(2), fakeRoles().roles, { ...SMALL, generations: 1 }, { resumeFrom: state }),
    ).rejects.toThrow(/dataset_hash/)
    // Concurrency is not part of the result, so it may change between runs.
    await expect(
      runSearch(toyDataset(1), fakeRoles().roles, { ...SMALL, generations: 1, concurrency: 2 }, { resumeFrom: state }),
    ).resolves.toMatchObject({ status: 'completed' })
  })

  it('reports progress for every phase', async () => {
    const events: SearchProgress[] = []
    await runSearch(
      toyDataset(2),
      fakeRoles().roles,
      { ...SMALL, generations: 2 },
      { onProgress: (event) => events.push(event) },
    )
    expect(new Set(events.map((event) => event.phase))).toEqual(new Set(['initialize', 'generation', 'finalize']))
    expect(
      events.filter((event) => event.phase === 'generation').map((event) => `${event.done}/${event.total}`),
    ).toEqual(['1/2', '2/2'])
  })
})

describe('runSearch: the memo ignores ids and metadata', () => {
  it('does not re-grade a rubric that comes back under another id', async () => {
    const { roles, counts } = fakeRoles()
    roles.proposer.propose = async ({ rubric, seed }) => ({ ...rubric, rubric_id: `copy-${seed}`, metadata: { seed } })
    await runSearch(toyDataset(1), roles, { ...SMALL, generations: 2 })
    expect(counts.verifier).toBe(6)
    expect(rubricKey({ ...BAD_RUBRIC, rubric_id: 'x', metadata: { a: 1 } })).toBe(rubricKey(BAD_RUBRIC))
  })

  it('rejects datasets with duplicate ids', async () => {
    const dataset = toyDataset(1)
    dataset.prompts[0]!.candidates[1]!.candidate_id = dataset.prompts[0]!.candidates[0]!.candidate_id
    await expect(runSearch(dataset, fakeRoles().roles, SMALL)).rejects.toThrow(/duplicate candidate_id/)
  })
})

describe('runSearch: a prompt whose model replies stay unusable', () => {
  const MODES: SearchConfigInput[] = [
    { mode: 'iterative', iterations: 2, seed: 5 },
    { ...SMALL, iteration_scope: 'prompt_local', generations: 2 },
    { ...SMALL, generations: 2 },
  ]

  it('is dropped and named, with the reason, and the search finishes with the others, in every mode', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...MODES),
        fc.uniqueArray(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 3 }),
        async (config, failing) => {
          const { roles } = fakeRoles()
          const initialize = roles.initializer.initialize.bind(roles.initializer)
          roles.initializer.initialize = async (item, options) => {
            if (failing.includes(Number(item.prompt_id.slice(1))))
              throw new LlmError('invalid_reply', 'initializer reply has 2 criteria; expected 3 to 6')
            return initialize(item, options)
          }
          const { output, status } = await runSearch(toyDataset(4), roles, config)
          expect(status).toBe('completed')
          const dropped = failing.map((p) => `p${p}`).sort()
          expect(output!.search_diagnostics.dropped_prompts).toEqual(
            dropped.map((prompt_id) => ({ prompt_id, reason: 'initializer reply has 2 criteria; expected 3 to 6' })),
          )
          const kept = ['p0', 'p1', 'p2', 'p3'].filter((id) => !dropped.includes(id))
          expect(output!.best_rubrics.map((entry) => entry.prompt_id).sort()).toEqual(kept)
        },
      ),
      { numRuns: 15 },
    )
  })

  it('fails the search, naming each reason, only when all prompts are dropped; a server down fails it', async () => {
    const { roles } = fakeRoles()
    roles.initializer.initialize = async () => {
      throw new LlmError('invalid_reply', 'the reply was cut at max_tokens (1024)')
    }
    await expect(runSearch(toyDataset(2), roles, MODES[0]!)).rejects.toThrow(/p0: the reply was cut.*p1: the reply/)
    roles.initializer.initialize = async () => {
      throw new LlmError('network', 'could not reach the model server')
    }
    await expect(runSearch(toyDataset(2), roles, MODES[0]!)).rejects.toMatchObject({ kind: 'network' })
  })
})
