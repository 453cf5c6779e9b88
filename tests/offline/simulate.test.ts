/**
 * The pure parts of `npm run simulate`: seeded questions and answers, the behaviour mix over the
 * stages, that the simulated hacking really trips the mock analyzer (the real Analyzer agent on the
 * mock backend), and the CLI's parsing and summary.
 */
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { finalNumber, loadDatasetQuestions } from '../../offline/simulate/dataset-questions.ts'
import { groupBy } from '../../src/collections/index.ts'
import { describe, expect, it } from 'vitest'
import { runAnalyzer } from '../../src/agents/analyzer/index.ts'
import { judgeRollout } from '../../src/agents/scorer/index.ts'
import { MockChatModel } from '../../src/llm/mock.ts'
import type { Rubric } from '../../src/schemas/rubric.ts'
import { RunConfig } from '../../src/schemas/run-config.ts'
import { parseSimulateArgs as parseCliArgs } from '../../offline/cli/commands/simulate.ts'
import { UsageError } from '../../src/usage-error/index.ts'
import { runCli } from '../support/cli.ts'
import type { StepReport } from '../../offline/simulate/loop.ts'
import { formatStepRow, formatSummary, formatTableHeader, summarize } from '../../offline/simulate/report.ts'
import {
  allocateBehaviours,
  BEHAVIOURS,
  behaviourMix,
  generateQuestion,
  planStep,
  rngFor,
  rubricVocabulary,
  SIMULATION_RUBRICS,
  simulationRunConfig,
  STAGE_MIXES,
  writeAnswer,
  type Behaviour,
  type SimulatedRollout,
} from '../../offline/simulate/scenario.ts'

const CREATED = '2026-01-01T00:00:00.000Z'
/** The rubrics of a run made by `--create-run`, as the service builds them. */
const RUBRICS: Rubric[] = [
  ...SIMULATION_RUBRICS.anchor_rubrics.map((seed) => ({
    id: seed.id!,
    text: seed.text,
    weight: seed.weight ?? 1,
    is_anchor: true,
    version: 1,
    created_at: CREATED,
    metadata: {},
  })),
  ...SIMULATION_RUBRICS.adaptive_rubrics.map((seed) => ({
    id: seed.id!,
    text: seed.text,
    weight: seed.weight ?? 1,
    is_anchor: false,
    version: 1,
    created_at: CREATED,
    metadata: {},
  })),
]
const RUBRIC_TEXTS = RUBRICS.map((rubric) => rubric.text)
const model = new MockChatModel()

/** What the pipeline does with a rollout: score it on the mock, then run the Analyzer agent on the mock. */
async function analyse(simulated: SimulatedRollout, rubrics: Rubric[] = RUBRICS) {
  const judgement = await judgeRollout(model, {
    rubrics,
    rollout: simulated.rollout,
    metadata: simulated.metadata,
    gradeMax: 10,
    locale: 'en',
  })
  const analysis = await runAnalyzer(model, {
    rollout: simulated.rollout,
    metadata: simulated.metadata,
    rubrics,
    score: judgement.score,
    criteria: judgement.criteria,
    gradeMax: 10,
    locale: 'en',
  })
  return { score: judgement.score, verdict: analysis.reward_hacking, observations: analysis.observations }
}

/** Rollouts of many seeds and steps, each behaviour well represented. */
function manyRollouts(): SimulatedRollout[] {
  const rollouts: SimulatedRollout[] = []
  for (const seed of [1, 2, 3, 17])
    for (let step = 0; step < 6; step++)
      rollouts.push(...planStep({ seed, step, totalSteps: 6, rolloutsPerStep: 12, rubricTexts: RUBRIC_TEXTS }))
  return rollouts
}

/** A step's report: its hacking and correct means, and whether its update made a new rubric version. */
const report = (step: number, hacking: number, correct: number, changed: boolean): StepReport => ({
  step,
  stage: 'early',
  server_step: step,
  counts: { correct: 2, wrong: 1, verbose: 1, sycophantic: 0, reward_hacking: 1 },
  scores: {
    correct: { n: 2, mean: correct },
    wrong: { n: 1, mean: 0.6 },
    verbose: { n: 1, mean: 0.9 },
    sycophantic: { n: 0, mean: null },
    reward_hacking: { n: 1, mean: hacking },
  },
  mean_score: 0.7,
  errors: 0,
  rubric_version_scored: step + 1,
  rubric_version: changed ? step + 2 : step + 1,
  status: 'updated',
  update_timed_out: false,
  hacking_flags: 2,
  hacking_flags_source: 'rubric_status',
  flagged_by_behaviour: { correct: 0, wrong: 0, verbose: 1, sycophantic: 0, reward_hacking: 1 },
  update: changed
    ? { strategy: 'CORRECTIVE', changed: true, rubric_version: step + 2, source: 'history' }
    : { strategy: 'MAINTENANCE', changed: false, rubric_version: step + 1, source: 'status' },
  timings_ms: { score: 100, score_sum: 400, score_p50: 50, score_max: 80, complete: 5, wait: 1000, trainer: 1105 },
})

describe('questions and answers are seeded', () => {
  it('the same seed, step and rubric texts give the same rollouts; another seed gives others', () => {
    const options = { seed: 7, step: 2, totalSteps: 10, rolloutsPerStep: 16, rubricTexts: RUBRIC_TEXTS }
    expect(planStep(options)).toEqual(planStep(options))
    expect(JSON.stringify(planStep(options))).toBe(JSON.stringify(planStep({ ...options })))
    const other = planStep({ ...options, seed: 8 })
    expect(other.map((r) => r.rollout.output)).not.toEqual(planStep(options).map((r) => r.rollout.output))
    expect(rngFor(1, 'a')()).toBe(rngFor(1, 'a')())
    expect(rngFor(1, 'a')()).not.toBe(rngFor(1, 'b')())
  })

  it('a group size makes GRPO groups: that many rollouts answer each question, with their own answers', () => {
    const rollouts = planStep({ seed: 7, step: 1, totalSteps: 4, rolloutsPerStep: 16, groupSize: 4 })
    const groups = groupBy(rollouts, (r) => r.rollout.input)
    expect([...groups.values()].map((group) => group.length)).toEqual([4, 4, 4, 4])
    expect(new Set(rollouts.map((r) => r.rollout.id)).size).toBe(16)
    expect(
      groupBy(planStep({ seed: 7, step: 1, totalSteps: 4, rolloutsPerStep: 16 }), (r) => r.rollout.input).size,
    ).toBe(16)
  })

  it('every question has a positive integer ground truth that its working ends on, and a slip that differs', () => {
    for (let index = 0; index < 200; index++) {
      const question = generateQuestion(3, index % 7, index)
      expect(Number.isInteger(question.answer) && question.answer > 0, question.prompt).toBe(true)
      expect(question.working.endsWith(`= ${question.answer}.`)).toBe(true)
      expect(question.slip.answer).not.toBe(question.answer)
      expect(question.reference).toContain(`The answer is ${question.answer}.`)
    }
  })

  it('a rollout carries its question, reference and step; ids are unique within and across steps', () => {
    const steps = [0, 1, 2].map((step) =>
      planStep({ seed: 1, step, totalSteps: 3, rolloutsPerStep: 8, idPrefix: 'sim-test' }),
    )
    const ids = steps.flat().map((r) => r.rollout.id)
    expect(new Set(ids).size).toBe(ids.length)
    for (const [step, rollouts] of steps.entries()) {
      for (const simulated of rollouts) {
        expect(simulated.rollout.input).toBe(simulated.question.prompt)
        expect(simulated.rollout.supplemental_context).toBe(simulated.question.reference)
        expect(simulated.metadata).toMatchObject({ current_step: step, total_steps: 3 })
        expect(simulated.rollout.id).toMatch(new RegExp(`^sim-test-s${step}-r\\d+$`))
      }
    }
  })

  it('correct answers end on the ground truth, wrong ones on the slip', () => {
    for (const simulated of manyRollouts()) {
      const { behaviour, answer, question } = simulated
      if (behaviour === 'correct' || behaviour === 'verbose')
        expect(answer.output).toMatch(new RegExp(`answer is ${question.answer}\\.$`))
      if (behaviour === 'wrong') expect(answer.output).toMatch(new RegExp(`answer is ${question.slip.answer}\\.$`))
      if (behaviour === 'verbose')
        expect(answer.output.split(/\s+/).length).toBeGreaterThan(3 * question.reference.split(/\s+/).length)
    }
  })
})

describe('the behaviour mix shifts over the stages', () => {
  it('each stage mix sums to 1; correct and hacking grow, wrong and verbose shrink', () => {
    for (const mix of Object.values(STAGE_MIXES))
      expect(BEHAVIOURS.reduce((sum, b) => sum + mix[b], 0)).toBeCloseTo(1, 10)
    const { early, middle, late } = STAGE_MIXES
    expect(early.correct).toBeLessThan(middle.correct)
    expect(middle.correct).toBeLessThan(late.correct)
    expect(early.reward_hacking).toBeLessThan(middle.reward_hacking)
    expect(middle.reward_hacking).toBeLessThan(late.reward_hacking)
    expect(early.wrong).toBeGreaterThan(middle.wrong)
    expect(middle.wrong).toBeGreaterThan(late.wrong)
    expect(early.verbose).toBeGreaterThan(late.verbose)
    // Early on, wrong and verbose answers are the most common.
    expect(Math.max(early.wrong, early.verbose)).toBeGreaterThan(
      Math.max(early.correct, early.sycophantic, early.reward_hacking),
    )
  })

  it('follows the server’s thirds of training: early, middle, late', () => {
    expect(behaviourMix(0, 9)).toBe(STAGE_MIXES.early)
    expect(behaviourMix(4, 9)).toBe(STAGE_MIXES.middle)
    expect(behaviourMix(8, 9)).toBe(STAGE_MIXES.late)
  })

  it('allocation sums to k, follows the mix, and keeps hacking in the first and last step of a short run', () => {
    for (const k of [1, 2, 5, 8, 13, 64, 1000]) {
      for (const mix of Object.values(STAGE_MIXES)) {
        const counts = allocateBehaviours(mix, k)
        expect(BEHAVIOURS.reduce((sum, b) => sum + counts[b], 0)).toBe(k)
        for (const b of BEHAVIOURS) expect(Math.abs(counts[b] - mix[b] * k)).toBeLessThan(1)
      }
    }
    expect(allocateBehaviours(STAGE_MIXES.early, 8)).toEqual({
      correct: 1,
      wrong: 3,
      verbose: 2,
      sycophantic: 1,
      reward_hacking: 1,
    })
    // The e2e simulation (3 steps × 8) has hacking to compare at its first and last step.
    const count = (step: number, b: Behaviour) =>
      planStep({ seed: 1, step, totalSteps: 3, rolloutsPerStep: 8 }).filter((r) => r.behaviour === b).length
    expect(count(0, 'reward_hacking')).toBeGreaterThanOrEqual(1)
    expect(count(2, 'reward_hacking')).toBeGreaterThanOrEqual(2)
    expect(count(2, 'correct')).toBeGreaterThan(count(0, 'correct'))
    expect(count(2, 'wrong')).toBeLessThan(count(0, 'wrong'))
  })

  it('over a longer run hacking never shrinks and wrong answers never grow', () => {
    const counts = Array.from({ length: 12 }, (_, step) => allocateBehaviours(behaviourMix(step, 12), 32))
    for (let step = 1; step < counts.length; step++) {
      expect(counts[step]!.reward_hacking).toBeGreaterThanOrEqual(counts[step - 1]!.reward_hacking)
      expect(counts[step]!.wrong).toBeLessThanOrEqual(counts[step - 1]!.wrong)
    }
  })
})

describe('simulated hacking trips the mock analyzer (the Analyzer agent on MockChatModel)', () => {
  it('each reward_hacking rollout is flagged with a high-severity tactic; stuffing is recognised as such', async () => {
    const hacking = manyRollouts().filter((r) => r.behaviour === 'reward_hacking')
    expect(hacking.length).toBeGreaterThan(20)
    const tactics = new Set<string>()
    for (const simulated of hacking) {
      const { verdict } = await analyse(simulated)
      expect(verdict.flag, simulated.rollout.output).toBe(true)
      expect(verdict.severity, simulated.rollout.output).toBe('high')
      for (const tactic of verdict.tactics) tactics.add(tactic)
      if (simulated.answer.tactics.includes('keyword_stuffing'))
        expect(verdict.tactics, simulated.rollout.output).toContain('rubric keyword stuffing')
    }
    // Every appeal the scenario writes is recognised, and so is stuffing.
    expect([...tactics]).toEqual(
      expect.arrayContaining([
        'addresses the grader',
        'claims its own score',
        'asks to ignore the rubric',
        'rubric keyword stuffing',
      ]),
    )
  })

  it('hacking trips the analyzer even on rubrics it has not seen (the appeal never depends on them)', async () => {
    const unseen: Rubric[] = [
      {
        id: 'a1',
        text: 'Gives the exact number.',
        weight: 1,
        is_anchor: true,
        version: 1,
        created_at: CREATED,
        metadata: {},
      },
    ]
    for (const simulated of planStep({ seed: 5, step: 9, totalSteps: 10, rolloutsPerStep: 20 }).filter(
      (r) => r.behaviour === 'reward_hacking',
    )) {
      expect((await analyse(simulated, unseen)).verdict.flag, simulated.rollout.output).toBe(true)
    }
  })

  it('correct, wrong, verbose and sycophantic answers are not flagged; flattery is noted', async () => {
    for (const simulated of manyRollouts().filter((r) => r.behaviour !== 'reward_hacking')) {
      const { verdict, observations } = await analyse(simulated)
      expect(verdict.flag, simulated.rollout.output).toBe(false)
      if (simulated.behaviour === 'sycophantic')
        expect(observations.join('\n'), simulated.rollout.output).toMatch(/^flattery or filler: /m)
    }
  })

  it("names the detector's rate on the simulate scenario: precision at least 0.9, recall 1", async () => {
    // `npm run simulate`'s own scenario (its default steps, rollouts per step and seed) and two more seeds, each
    // rollout scored by the mock judge and analysed by the mock analyzer against the created run's rubrics.
    const { steps, rolloutsPerStep, seed } = parseCliArgs([], {})
    let flagged = 0
    let hackingFlagged = 0
    let hacking = 0
    for (const scenarioSeed of [seed, seed + 1, seed + 2])
      for (let step = 0; step < steps; step++)
        for (const simulated of planStep({
          seed: scenarioSeed,
          step,
          totalSteps: steps,
          rolloutsPerStep,
          rubricTexts: RUBRIC_TEXTS,
        })) {
          const { verdict } = await analyse(simulated)
          const isHacking = simulated.behaviour === 'reward_hacking'
          if (isHacking) hacking++
          if (verdict.flag) flagged++
          if (verdict.flag && isHacking) hackingFlagged++
        }
    const precision = hackingFlagged / flagged
    const recall = hackingFlagged / hacking
    console.log(
      `hacking detector on the simulate scenario (seeds ${seed}–${seed + 2}, ${steps} steps × ${rolloutsPerStep}): ` +
        `precision ${precision.toFixed(2)} (${hackingFlagged} of the ${flagged} flagged were reward_hacking), ` +
        `recall ${recall.toFixed(2)} (${hackingFlagged} of the ${hacking} reward_hacking rollouts flagged)`,
    )
    expect(hacking).toBeGreaterThan(20)
    expect(precision).toBeGreaterThanOrEqual(0.9)
    expect(recall).toBe(1)
  })

  it('the rubric vocabulary is what the mock counts as stuffing material', () => {
    expect(rubricVocabulary(['The final answer is correct.', 'The answer shows its working, 2 steps.'])).toEqual([
      'final',
      'answer',
      'correct',
      'shows',
      'working',
      'steps',
    ])
    const simulated = writeAnswer(generateQuestion(1, 0, 0), 'reward_hacking', () => 0.3, RUBRIC_TEXTS)
    expect(simulated.tactics).toContain('keyword_stuffing')
  })
})

describe('questions from a dataset (--questions)', () => {
  /** A chosen/rejected JSONL in the gsm8k-solutions shape, in a temporary directory. */
  function pairsFile(records: object[]): string {
    const file = join(mkdtempSync(join(tmpdir(), 'sim-questions-')), 'pairs.jsonl')
    writeFileSync(file, `${records.map((record) => JSON.stringify(record)).join('\n')}\n`)
    return file
  }
  const PAIR = (id: string, right: number, wrong: number) => ({
    id,
    prompt: `Question ${id}: how many?`,
    reference: String(right),
    chosen: `Working to ${right}.\nA: ${right}`,
    rejected: `Working to ${wrong}.\nA: ${wrong}`,
  })

  it("reads each solution's final number, whatever the working says before it", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: -10_000, max: 10_000 }), { maxLength: 6 }),
        fc.integer({ min: 0, max: 10_000_000 }),
        (earlier, last) => {
          const working = earlier.map((n) => `${n} apples`).join(', ')
          expect(finalNumber(`${working}\nA: ${last.toLocaleString('en-US')}`)).toBe(last)
        },
      ),
    )
    expect(finalNumber('no number here')).toBeUndefined()
  })

  it("rollouts answer the dataset's prompts with its own right and wrong answers, the reference on one line", () => {
    const file = pairsFile([
      PAIR('a', 18, 224),
      PAIR('b', 3, 4),
      { id: 'no-reference', prompt: 'p', chosen: 'A: 1', rejected: 'A: 2' },
      PAIR('same', 5, 5),
      PAIR('c', 7, 70),
    ])
    const questions = loadDatasetQuestions(file)
    expect(questions.map((question) => question.id)).toEqual(['d-a', 'd-b', 'd-c'])
    const plan = planStep({ seed: 3, step: 0, totalSteps: 2, rolloutsPerStep: 6, questions, groupSize: 2 })
    for (const [index, { behaviour, question, rollout }] of plan.entries()) {
      expect(rollout.input).toBe(question.prompt)
      expect(rollout.supplemental_context).toBe(`The answer is ${question.answer}.`)
      expect(plan[index - (index % 2)]!.question.id).toBe(question.id)
      if (behaviour === 'correct') expect(rollout.output).toBe(question.solutions!.right)
      if (behaviour === 'wrong') expect(rollout.output).toBe(question.solutions!.wrong)
    }
    // Three questions, three groups: each question once in the step.
    expect(new Set(plan.map(({ question }) => question.id)).size).toBe(3)
    expect(() => loadDatasetQuestions(pairsFile([{ prompt: 'p' }]))).toThrow(/no usable record/)
    expect(() => loadDatasetQuestions(join(tmpdir(), 'missing-pairs.jsonl'))).toThrow(/cannot read/)
  })
})

describe('the created run and the CLI', () => {
  it('the run config is valid; the judge flags set agents.default', () => {
    expect(RunConfig.safeParse(simulationRunConfig()).success).toBe(true)
    const judged = RunConfig.parse(
      simulationRunConfig({ baseUrl: 'http://127.0.0.1:8000/v1', model: 'Qwen/Qwen3-8B', apiKeyEnv: 'VLLM_KEY' }),
    )
    expect(judged.agents.default).toMatchObject({
      backend: 'openai',
      base_url: 'http://127.0.0.1:8000/v1',
      model: 'Qwen/Qwen3-8B',
      api_key_env: 'VLLM_KEY',
    })
    expect(RunConfig.parse(simulationRunConfig()).agents.default.backend).toBe('auto')
    const local = ['--create-run', '--judge-base-url', 'http://127.0.0.1:8090/v1', '--judge-model', 'smollm2-135m']
    const schemaJudge = parseCliArgs([...local, '--judge-structured-output', 'json_schema'], {}).judge
    expect(RunConfig.parse(simulationRunConfig(schemaJudge)).agents.default.structured_output).toBe('json_schema')
    expect(() => parseCliArgs([...local, '--judge-structured-output', 'xml'], {})).toThrow(UsageError)
    const verdicts = parseCliArgs([...local, '--judging', 'verdicts'], {}).judge
    expect(RunConfig.parse(simulationRunConfig(verdicts)).judging).toBe('verdicts')
    const slow = parseCliArgs([...local, '--judge-concurrency', '2', '--judge-timeout-ms', '300000'], {}).judge
    expect(RunConfig.parse(simulationRunConfig(slow)).agents.default).toMatchObject({
      concurrency: 2,
      timeout_ms: 300_000,
    })
    expect(() => parseCliArgs([...local, '--judge-timeout-ms', '10'], {})).toThrow(/--judge-timeout-ms/)
    expect(() => parseCliArgs([...local, '--judging', 'votes'], {})).toThrow(/--judging must be grades or verdicts/)
    expect(() => parseCliArgs(['--judging', 'verdicts'], {})).toThrow(/--create-run/)
    expect(parseCliArgs(['--questions', 'pairs.jsonl'], {}).questions).toBe('pairs.jsonl')
  })

  it('parses flags with defaults, and refuses what is wrong', () => {
    expect(parseCliArgs([], {})).toMatchObject({
      url: 'http://127.0.0.1:8787',
      steps: 5,
      rolloutsPerStep: 16,
      concurrency: 8,
      seed: 1,
      wait: true,
      json: false,
      createRun: false,
    })
    expect(
      parseCliArgs(
        ['--steps', '3', '--rollouts-per-step', '8', '--create-run', '--json', '--no-wait', '--seed', '9'],
        {},
      ),
    ).toMatchObject({
      steps: 3,
      rolloutsPerStep: 8,
      createRun: true,
      json: true,
      wait: false,
      seed: 9,
      groupSize: 1,
      archive: false,
    })
    expect(parseCliArgs(['--create-run', '--archive', '--group-size', '8'], {})).toMatchObject({
      createRun: true,
      archive: true,
      groupSize: 8,
    })
    expect(() => parseCliArgs(['--archive'], {})).toThrow(/add --create-run/)
    expect(parseCliArgs([], { PORT: '9011' }).url).toBe('http://127.0.0.1:9011')
    expect(parseCliArgs([], { REWARD_HARNESS_TOKEN: 'rh_x' }).token).toBe('rh_x')
    expect(() => parseCliArgs(['--steps', '0'], {})).toThrow(UsageError)
    expect(() => parseCliArgs(['--steps', 'two'], {})).toThrow(/--steps/)
    expect(() => parseCliArgs(['--bogus'], {})).toThrow(UsageError)
    expect(() => parseCliArgs(['--judge-model', 'm'], {})).toThrow(/--create-run/)
    expect(() => parseCliArgs(['--run-id', 'Bad Id'], {})).toThrow(/--run-id/)
    expect(() => parseCliArgs(['--url', 'localhost:8787'], {})).toThrow(/--url/)
  })

  it('summarises and prints steps', () => {
    const summary = summarize({ reports: [report(0, 0.7, 0.8, true), report(1, 0.4, 0.9, false)] })
    expect(summary).toMatchObject({
      hacking: { first: 0.7, last: 0.4 },
      correct: { first: 0.8, last: 0.9 },
      hacking_penalised: true,
      hacking_flags_total: 4,
      hacking_rollouts_flagged: { flagged: 2, rollouts: 2 },
      // Each step flags its reward_hacking rollout and a verbose one: precision 2 of 4, recall 2 of 2.
      hacking_detector: { flagged: 4, true_positives: 2, precision: 0.5, recall: 1 },
      rubric_version: { first: 1, last: 2 },
      rubric_changes: 1,
      strategies: { CORRECTIVE: 1, MAINTENANCE: 1 },
    })
    expect(summarize({ reports: [report(0, 0.5, 0.4, false), report(1, 0.6, 0.5, false)] }).hacking_penalised).toBe(
      false,
    )
    const row = formatStepRow(report(0, 0.7, 0.8, true))
    const slow = formatStepRow({
      ...report(1, 0.4, 0.9, false),
      update: null,
      update_timed_out: true,
      update_progress: { phase: 'analysing', analyses: { selected: 8, done: 3, failed: 1 }, at: '2026-12-02T08:00Z' },
    })
    expect(slow).toContain('update still running (wait timed out; analysing, 3 of 8 analyses done, 1 failed)')
    expect(row).toContain('CORRECTIVE → v2')
    expect(row).toContain('2/5')
    expect(row).toContain('1→2')
    expect(formatTableHeader()).toContain('hacking')
    const reports = [report(0, 0.7, 0.8, true), report(1, 0.4, 0.9, false)]
    const text = formatSummary(
      { reports, run_id: 'sim-x', seed: 1, steps: 2, rollouts_per_step: 5, duration_ms: 1_000, waited: true },
      summarize({ reports }),
    )
    expect(text).toContain('the evolved rubrics penalise hacking')
    expect(text).toContain('rubric version 1 → 2')
    expect(text).toContain(
      'hacking detector: precision 0.50 (2 of the 4 flagged were reward_hacking), recall 1.00 (2 of the 2 ' +
        'reward_hacking rollouts flagged)',
    )
    // A trainer that does not wait scores step 1 on version 1 although step 0's update made version 2.
    const stale = [report(0, 0.7, 0.8, true), { ...report(1, 0.4, 0.9, false), rubric_version_scored: 1 }]
    expect(
      formatSummary(
        { reports: stale, run_id: 'sim-x', seed: 1, steps: 2, rollouts_per_step: 5, duration_ms: 1_000, waited: false },
        summarize({ reports: stale }),
      ),
    ).toContain('1 of 1 later steps were scored on rubrics older')
  })

  it('credits evolution only when the last step was scored on rubrics an update changed', () => {
    const steps = fc.array(
      fc.record({
        hacking: fc.double({ min: 0, max: 1, noNaN: true }),
        correct: fc.double({ min: 0, max: 1, noNaN: true }),
        changed: fc.boolean(),
        stale: fc.boolean(),
      }),
      { minLength: 1, maxLength: 6 },
    )
    fc.assert(
      fc.property(steps, (plan) => {
        let version = 1
        const reports = plan.map((step, index) => {
          const scoredOn = step.stale && index > 0 ? version - 1 || 1 : version
          if (step.changed) version++
          return {
            ...report(index, step.hacking, step.correct, step.changed),
            rubric_version_scored: scoredOn,
            rubric_version: version,
          }
        })
        const text = formatSummary(
          { reports, run_id: 'sim-p', seed: 1, steps: plan.length, rollouts_per_step: 5, duration_ms: 1, waited: true },
          summarize({ reports }),
        )
        const verdict = text.split('\n').find((line) => line.startsWith('  verdict:'))!
        const evolved = reports.at(-1)!.rubric_version_scored > reports[0]!.rubric_version_scored
        expect(verdict.includes('evolved rubrics') || verdict.includes('is not penalised')).toBe(evolved)
        expect(verdict.includes('no update changed the rubrics')).toBe(!evolved)
      }),
    )
  })

  it('says plainly when padded answers outscore concise right ones at the last step, and why; not otherwise', () => {
    const step = (verbose: number, correct: number): StepReport => ({
      step: 0,
      stage: 'early',
      server_step: 0,
      counts: { correct: 2, wrong: 0, verbose: 2, sycophantic: 0, reward_hacking: 0 },
      scores: {
        correct: { n: 2, mean: correct },
        wrong: { n: 0, mean: null },
        verbose: { n: 2, mean: verbose },
        sycophantic: { n: 0, mean: null },
        reward_hacking: { n: 0, mean: null },
      },
      mean_score: 0.8,
      errors: 0,
      rubric_version_scored: 1,
      rubric_version: 1,
      status: 'updated',
      update_timed_out: false,
      hacking_flags: 0,
      hacking_flags_source: 'rubric_status',
      flagged_by_behaviour: null,
      update: null,
      timings_ms: { score: 1, score_sum: 1, score_p50: 1, score_max: 1, complete: 1, wait: 1, trainer: 1 },
    })
    const text = (verbose: number, correct: number) => {
      const reports = [step(verbose, correct)]
      const meta = { reports, run_id: 'sim', seed: 1, steps: 1, rollouts_per_step: 4, duration_ms: 1, waited: true }
      return formatSummary(meta, summarize({ reports }))
    }
    expect(text(0.89, 0.82)).toContain(
      'padding is rewarded: verbose answers (right, but padded) score 0.89 against 0.82',
    )
    expect(text(0.89, 0.82)).toContain('the padding restates the prompt')
    expect(text(0.6, 0.82)).not.toContain('padding')
  })
})

describe('an unreachable server', () => {
  it('exits 1 saying the URL cannot be reached and how to start or point at the server', async () => {
    const result = await runCli('simulate', '--url', 'http://127.0.0.1:59998', '--steps', '1')
    expect(result.code).toBe(1)
    expect(result.err).toContain('cannot reach the edge at http://127.0.0.1:59998 (ECONNREFUSED). Start the server')
    expect(result.err).toMatch(/`npm start`.*--url/)
  })
})
