/**
 * `reward-harness export` through the real CLI (child processes of the `reward-harness` bin) on a real search output
 * made here by the search CLI (examples/demo.json, mock backend, 2 generations): the artifact validates, is content
 * addressed and byte-identical on re-export, carries provenance and the runtime snapshot from the run manifest, and
 * has a `__default__` rubric; outputs that do not match their manifest are refused with exit 2. The default-rubric
 * choice is unit-tested in process.
 */
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import defaultRun from '../../config/default-run.json'
import { ArtifactInputError } from '../../offline/artifacts/errors.ts'
import {
  bestDefaultRubric,
  generality,
  sameCriterion,
  parseDefaultRubricChoice,
  type SearchedRubric,
} from '../../offline/artifacts/default-rubric.ts'
import { buildArtifact } from '../../offline/artifacts/export.ts'
import { DEFAULT_RUBRIC_KEY, RmArtifact, verifyArtifactId } from '../../src/schemas/artifact.ts'
import { SearchRubric } from '../../src/schemas/search-rubric.ts'

const ROOT = join(import.meta.dirname, '../..')
const BIN = join(ROOT, 'reward-harness')

interface Run {
  code: number
  out: string
  err: string
}

/** Runs `reward-harness <args>` in a child process. */
function cli(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd: ROOT, env: { ...process.env, NO_COLOR: '1' }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout, err: stderr })
      },
    )
  })
}

const readJson = (file: string) => JSON.parse(readFileSync(file, 'utf8'))
const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex')

let work: string
let output: string
let search: any

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'export-test-'))
  output = join(work, 'search/best.json')
  const run = await cli([
    'search',
    '--dataset',
    'examples/demo.json',
    '--backend',
    'mock',
    '--output',
    output,
    '--generations',
    '2',
    '--json',
  ])
  expect(run.code, run.err).toBe(0)
  search = readJson(output)
}, 60_000)
afterAll(() => rmSync(work, { recursive: true, force: true }))

/** Writes a modified copy of the search output and returns its path. */
function variant(name: string, edit: (copy: any) => void): string {
  const copy = structuredClone(search)
  edit(copy)
  const file = join(work, `${name}.json`)
  writeFileSync(file, `${JSON.stringify(copy, null, 2)}\n`)
  return file
}

describe('export of a real search output', () => {
  it('writes a valid content-addressed artifact: per-prompt rubrics, __default__, provenance, runtime', async () => {
    const out = join(work, 'a/rm.json')
    const run = await cli(['export', '--search-output', output, '--out', out, '--json'])
    expect(run.err).toBe('')
    expect(run.code).toBe(0)
    const summary = JSON.parse(run.out)
    const artifact = RmArtifact.parse(readJson(out))
    expect(summary).toMatchObject({
      artifact_id: artifact.artifact_id,
      out,
      prompts: ['p_debug_undefined', 'p_math_trains', 'p_policy_brief'],
    })
    expect(artifact.artifact_id).toMatch(/^rm_[0-9a-f]{64}$/)
    expect(await verifyArtifactId(artifact)).toBe(true)
    // The file is the parsed artifact itself (nothing the schema would drop or fill), artifact_id first.
    expect(readJson(out)).toEqual(artifact)
    expect(Object.keys(readJson(out))[0]).toBe('artifact_id')

    // Per-prompt rubrics are the searched ones, unchanged; the default is there and named as such.
    expect(Object.keys(artifact.rubrics).sort()).toEqual(
      [DEFAULT_RUBRIC_KEY, 'p_debug_undefined', 'p_math_trains', 'p_policy_brief'].sort(),
    )
    for (const entry of search.best_rubrics)
      expect(artifact.rubrics[entry.prompt_id]).toEqual(SearchRubric.parse(entry.rubric))
    const fallback = artifact.rubrics[DEFAULT_RUBRIC_KEY]!
    expect(fallback.rubric_id).toBe(DEFAULT_RUBRIC_KEY)
    expect(fallback.criteria.length).toBeGreaterThan(0)
    expect(fallback.metadata.default_rubric).toMatchObject({ strategy: 'best', source_prompt_id: expect.any(String) })
    expect(summary.default_rubric).toMatchObject({
      strategy: 'best',
      criteria: fallback.criteria.map((criterion) => criterion.criterion_id),
    })

    // Provenance and runtime come from the run manifest (and the file itself).
    const manifest = search.run_manifest
    expect(artifact.provenance).toEqual({
      source_run_id: manifest.run_id,
      source_session_id: manifest.harness.session_id,
      dataset_sha256: manifest.dataset.sha256,
      config_hash: manifest.config_hash,
      settings_hash: manifest.settings_hash,
      search_output_sha256: sha256(output),
    })
    expect(artifact.created_at_utc).toBe(manifest.finished_at_utc)
    expect(artifact.runtime).toEqual({
      backend: 'mock',
      verifier_model: manifest.settings.models.verifier,
      temperature: 0,
      max_tokens: 2048,
      seed: manifest.seed,
      locale: manifest.settings.locale,
      extraction: manifest.settings.extraction,
      grade_max: manifest.settings.grade_max,
      allow_na: manifest.settings.allow_na,
      num_votes: manifest.settings.rubric_votes,
    })
    expect(artifact.scoring_policy).toEqual({
      score: 'weighted_mean_of_grades',
      normalization: { method: 'identity', range: [0, 1] },
    })
    expect(summary.checks).toMatchObject({
      config_hash: manifest.config_hash,
      settings_hash: manifest.settings_hash,
      dataset_prompts: ['count', 'file'],
    })
  }, 30_000)

  it('gives a byte-identical artifact (same id) for the same search output, whenever it runs', async () => {
    const first = join(work, 'same/one.json')
    const second = join(work, 'same/two.json')
    expect((await cli(['export', '--search-output', output, '--out', first])).code).toBe(0)
    const text = await cli(['export', '--search-output', output, '--out', second])
    expect(text.code).toBe(0)
    expect(readFileSync(second, 'utf8')).toBe(readFileSync(first, 'utf8'))
    expect(text.out).toContain(`wrote ${readJson(first).artifact_id} to ${second}`)
    expect(text.out).toMatch(/default +best: /)
    // In process too: the build depends on the file's text alone.
    const source = readFileSync(output, 'utf8')
    const [a, b] = await Promise.all([buildArtifact(source, { name: 'x' }), buildArtifact(source, { name: 'y' })])
    expect(a.text).toBe(b.text)
    expect(a.text).toBe(readFileSync(first, 'utf8'))
  }, 30_000)

  it('takes the default rubric from a prompt, a file, or leaves it out', async () => {
    const fromPrompt = join(work, 'defaults/prompt.json')
    expect(
      (await cli(['export', '--search-output', output, '--out', fromPrompt, '--default-rubric', 'p_math_trains'])).code,
    ).toBe(0)
    const math = readJson(fromPrompt).rubrics
    expect(math[DEFAULT_RUBRIC_KEY].criteria).toEqual(math.p_math_trains.criteria)
    expect(math[DEFAULT_RUBRIC_KEY].metadata.default_rubric).toMatchObject({
      strategy: 'prompt',
      source_prompt_id: 'p_math_trains',
    })

    const rubricFile = join(work, 'generic-rubric.json')
    writeFileSync(
      rubricFile,
      JSON.stringify({
        rubric_id: 'generic_v1',
        criteria: [
          { criterion_id: 'correct', text: 'The answer is correct.', weight: 2 },
          { criterion_id: 'clear', text: 'The answer is clear.' },
        ],
      }),
    )
    const fromFile = join(work, 'defaults/file.json')
    const run = await cli([
      'export',
      '--search-output',
      output,
      '--out',
      fromFile,
      '--default-rubric',
      rubricFile,
      '--json',
    ])
    expect(run.code, run.err).toBe(0)
    const generic = readJson(fromFile).rubrics[DEFAULT_RUBRIC_KEY]
    expect(generic).toMatchObject({
      rubric_id: 'generic_v1',
      grading_protocol: { grade_max: 10 },
      metadata: { default_rubric: { strategy: 'file', source_file: rubricFile } },
    })
    expect(generic.criteria.map((criterion: { weight: number }) => criterion.weight)).toEqual([2, 1])

    const without = join(work, 'defaults/none.json')
    expect((await cli(['export', '--search-output', output, '--out', without, '--default-rubric', 'none'])).code).toBe(
      0,
    )
    expect(Object.keys(readJson(without).rubrics)).not.toContain(DEFAULT_RUBRIC_KEY)
    // Four different defaults, four different content addresses.
    const ids = new Set(
      [fromPrompt, fromFile, without, join(work, 'a/rm.json')].map((file) => readJson(file).artifact_id),
    )
    expect(ids.size).toBe(4)

    const missing = await cli([
      'export',
      '--search-output',
      output,
      '--out',
      join(work, 'defaults/x.json'),
      '--default-rubric',
      'p_nope',
    ])
    expect(missing.code).toBe(2)
    expect(missing.err).toContain('--default-rubric p_nope: cannot read the file (ENOENT)')
    expect(missing.err).toContain('p_debug_undefined, p_math_trains, p_policy_brief')
    const negative = join(work, 'negative-default.json')
    writeFileSync(negative, JSON.stringify({ criteria: [{ criterion_id: 'c', text: 'Good.', weight: -1 }] }))
    const bad = await cli([
      'export',
      '--search-output',
      output,
      '--out',
      join(work, 'defaults/y.json'),
      '--default-rubric',
      negative,
    ])
    expect(bad.code).toBe(2)
    expect(bad.err).toMatch(/--default-rubric .*negative-default\.json/)
  }, 60_000)
})

describe('refusals (exit 2, nothing written)', () => {
  const refuse = async (file: string, json = true): Promise<any> => {
    const out = join(work, `refused-${Math.random().toString(16).slice(2)}.json`)
    const run = await cli(['export', '--search-output', file, '--out', out, ...(json ? ['--json'] : [])])
    expect(run.code, run.err).toBe(2)
    expect(run.out).toBe('')
    expect(existsSync(out)).toBe(false)
    return json ? JSON.parse(run.err).error : run.err
  }

  it('refuses settings edited after the search (settings_hash no longer matches)', async () => {
    const error = await refuse(variant('tampered-settings', (copy) => (copy.run_manifest.settings.temperature = 0.7)))
    expect(error).toMatchObject({ kind: 'bad_input', code: 'manifest_mismatch' })
    expect(error.issues).toEqual([
      expect.stringMatching(
        /^run_manifest\.settings_hash is [0-9a-f]+, but run_manifest\.settings hashes to [0-9a-f]+$/,
      ),
    ])
    const text = await refuse(
      variant('tampered-model', (copy) => (copy.run_manifest.settings.models.verifier = 'gpt-4o')),
      false,
    )
    expect(text).toContain('error: refusing to export')
    expect(text).toContain('settings_hash')
  }, 30_000)

  it('refuses a config snapshot edited after the search (config_hash no longer matches)', async () => {
    const error = await refuse(
      variant('tampered-config', (copy) => (copy.run_manifest.config_snapshot.generations = 9)),
    )
    expect(error).toMatchObject({ code: 'manifest_mismatch' })
    expect(error.issues.join('\n')).toContain('run_manifest.config_hash is')
  }, 30_000)

  it('refuses an output without a run manifest', async () => {
    const error = await refuse(variant('no-manifest', (copy) => delete copy.run_manifest))
    expect(error).toMatchObject({ code: 'missing_manifest', message: expect.stringContaining('has no run_manifest') })
    expect((await refuse(variant('null-manifest', (copy) => (copy.run_manifest = null)))).code).toBe('missing_manifest')
  }, 30_000)

  it('refuses a rubric with a negative weight, naming the place', async () => {
    const error = await refuse(
      variant('negative-weight', (copy) => (copy.best_rubrics[1].rubric.criteria[0].weight = -0.5)),
    )
    expect(error).toMatchObject({ code: 'invalid_rubric' })
    expect(error.issues).toEqual([
      expect.stringMatching(/^best_rubrics\[1\] \(prompt_id "p_math_trains"\)\.rubric\.criteria\[0\]\.weight: .*>=0/),
    ])
  }, 30_000)

  it('refuses rubrics that cannot score: all weights zero, a criterion id used twice', async () => {
    const error = await refuse(
      variant('unusable', (copy) => {
        for (const criterion of copy.best_rubrics[0].rubric.criteria) criterion.weight = 0
        const criteria = copy.best_rubrics[2].rubric.criteria
        criteria[1].criterion_id = criteria[0].criterion_id
      }),
    )
    expect(error.code).toBe('invalid_rubric')
    expect(error.issues).toEqual([
      'best_rubrics[0] (prompt_id "p_debug_undefined").rubric.criteria: no criterion has a positive weight, so the ' +
        'rubric cannot score',
      `best_rubrics[2] (prompt_id "p_policy_brief").rubric.criteria: criterion id ` +
        `"${search.best_rubrics[2].rubric.criteria[0].criterion_id}" is used twice`,
    ])
  }, 30_000)

  it("refuses rubric prompt ids that differ from the dataset's", async () => {
    const renamed = await refuse(variant('renamed-prompt', (copy) => (copy.best_rubrics[0].prompt_id = 'p_other')))
    expect(renamed.code).toBe('manifest_mismatch')
    expect(renamed.issues).toContain(
      `best_rubrics has prompts that are not in the dataset ${search.run_manifest.dataset.path}: p_other`,
    )
    expect(renamed.issues).toContain(
      `the dataset ${search.run_manifest.dataset.path} has prompts without a rubric: p_debug_undefined`,
    )
    const dropped = await refuse(variant('dropped-prompt', (copy) => copy.best_rubrics.pop()))
    expect(dropped.issues).toContain('run_manifest.dataset.prompts is 3, but best_rubrics has 2 prompts')
    // Recorded prompt ids are compared too (the dataset file check off: the ids alone decide).
    const recorded = variant(
      'recorded-ids',
      (copy) => (copy.run_manifest.dataset.prompt_ids = ['p_debug_undefined', 'p_math_trains', 'p_x']),
    )
    // Adding the field breaks nothing the hashes cover (they cover config_snapshot and settings only).
    const run = await cli([
      'export',
      '--search-output',
      recorded,
      '--out',
      join(work, 'recorded.json'),
      '--no-dataset-check',
      '--json',
    ])
    expect(run.code).toBe(2)
    expect(JSON.parse(run.err).error.issues).toEqual([
      'run_manifest.dataset.prompt_ids has prompts without a rubric: p_x',
      'best_rubrics has prompts that are not in run_manifest.dataset.prompt_ids: p_policy_brief',
    ])
  }, 60_000)

  it('refuses files that are not search outputs', async () => {
    const notJson = join(work, 'not-json.json')
    writeFileSync(notJson, '{ nope')
    expect((await refuse(notJson)).code).toBe('invalid_json')
    const missing = await cli(['export', '--search-output', join(work, 'absent.json'), '--out', join(work, 'x.json')])
    expect(missing.code).toBe(2)
    expect(missing.err).toContain('cannot read the file (ENOENT)')
    const incomplete = await refuse(variant('incomplete-manifest', (copy) => delete copy.run_manifest.harness))
    expect(incomplete).toMatchObject({
      code: 'invalid_manifest',
      issues: [expect.stringMatching(/^run_manifest\.harness: /)],
    })
    const usage = await cli(['export', '--out', join(work, 'x.json')])
    expect(usage.code).toBe(2)
    expect(usage.err).toContain("required option '--search-output <file>' not specified")
  }, 60_000)
})

describe('the best default rubric (in process)', () => {
  const criterion = (id: string, text: string, weight: number) => ({
    criterion_id: id,
    text,
    weight,
    criterion_type: null,
    check_points: [],
    positive_examples: [],
    negative_examples: [],
  })
  const entry = (promptId: string, score: number, criteria: ReturnType<typeof criterion>[]): SearchedRubric => ({
    prompt_id: promptId,
    score,
    rubric: {
      rubric_id: `${promptId}_r`,
      criteria,
      grading_protocol: { grade_max: 10, allow_na: true, num_votes: 1 },
      metadata: {},
    },
  })

  it('keeps the criteria the search found for several prompts and drops the prompt-specific ones', () => {
    const entries = [
      entry('p1', 0.9, [
        criterion('fit', 'Covers trains and speeds.', 0.5),
        criterion('clear', 'The answer is clear.', 0.3),
        criterion('safe', 'No refusals.', 0.2),
      ]),
      entry('p2', 0.7, [
        criterion('fit', 'Covers the bug.', 0.4),
        criterion('clear', 'The answer is  CLEAR', 0.3),
        criterion('safe', 'No refusals.', 0.3),
      ]),
      entry('p3', 0.8, [criterion('fit', 'Covers the policy.', 0.6), criterion('steps', 'Shows steps.', 0.4)]),
    ]
    expect(sameCriterion({ text: 'The answer is  CLEAR.' }, { text: 'the answer is clear' })).toBe(true)
    expect(generality(entries[0]!, entries)).toBeCloseTo(0.25, 10)
    expect(generality(entries[1]!, entries)).toBeCloseTo(0.3, 10)
    expect(generality(entries[2]!, entries)).toBe(0)
    const { rubric, report } = bestDefaultRubric(entries)
    expect(report).toMatchObject({
      strategy: 'best',
      source_prompt_id: 'p2',
      dropped_criteria: ['fit'],
      criteria: ['clear', 'safe'],
      generality: 0.3,
    })
    expect(rubric.rubric_id).toBe(DEFAULT_RUBRIC_KEY)
    expect(rubric.criteria.map((c) => c.text)).toEqual(['The answer is  CLEAR', 'No refusals.'])
    expect(rubric.metadata.default_rubric).toEqual({
      strategy: 'best',
      source_prompt_id: 'p2',
      source_rubric_id: 'p2_r',
      generality: 0.3,
      dropped_criteria: ['fit'],
    })
  })

  it("falls back to the default run's rubric when nothing is shared, and breaks ties by score, then prompt id", () => {
    const generic = [...defaultRun.anchor_rubrics, ...defaultRun.adaptive_rubrics].map((item) => item.id)
    const lone = [entry('b', 0.5, [criterion('x', 'X.', 1)]), entry('a', 0.9, [criterion('y', 'Y.', 1)])]
    const { rubric, report } = bestDefaultRubric(lone)
    expect(report).toMatchObject({ strategy: 'generic', source_prompt_id: null, criteria: generic })
    expect(rubric.criteria.map((c) => c.text)).toEqual(
      [...defaultRun.anchor_rubrics, ...defaultRun.adaptive_rubrics].map((item) => item.text),
    )
    expect(rubric.metadata.default_rubric).toEqual({ strategy: 'generic', generality: 0 })
    expect(bestDefaultRubric([entry('only', 0.1, [criterion('z', 'Z.', 1)])]).report.strategy).toBe('generic')
    // A criterion shared only at weight 0 leaves nothing to score with: generic too.
    const weightless = [
      entry('b', 0.5, [criterion('x', 'X.', 0)]),
      entry('a', 0.5, [criterion('x', 'X.', 0), criterion('y', 'Y.', 1)]),
    ]
    expect(bestDefaultRubric(weightless).report.strategy).toBe('generic')
    const tied = [entry('b', 0.5, [criterion('x', 'X.', 1)]), entry('a', 0.5, [criterion('x', 'X.', 1)])]
    expect(bestDefaultRubric(tied).report.source_prompt_id).toBe('a')
    expect(() => bestDefaultRubric([])).toThrow(ArtifactInputError)
  })

  it('matches criteria by most of their words and exactly their numbers', () => {
    expect(
      sameCriterion({ text: 'The final answer is correct.' }, { text: 'The response gives the correct final answer' }),
    ).toBe(true)
    expect(sameCriterion({ text: 'The final answer is 10800.' }, { text: 'The final answer is 42.' })).toBe(false)
    expect(
      sameCriterion(
        { text: 'States the final answer, 10800, clearly' },
        { text: 'states the final answer 42 clearly' },
      ),
    ).toBe(false)
    expect(sameCriterion({ text: 'Covers trains and speeds.' }, { text: 'Covers the bug.' })).toBe(false)
    expect(sameCriterion({ text: '.' }, { text: '!' })).toBe(false)
  })

  // A rubric searched for one prompt copies that prompt (its entities, its reference's numbers): the default an unseen
  // prompt is scored with must hold only what the search found on more than one prompt.
  it('never serves a criterion the search found for one prompt only (property)', () => {
    const general = ['The final answer is correct.', 'Each step of the working follows from the last.', 'No padding.']
    const specific = (prompt: number, n: number) => `The working counts ${prompt * 100 + n} apples in the basket.`
    const rubricOf = fc.tuple(fc.subarray(general), fc.uniqueArray(fc.integer({ min: 1, max: 50 }), { maxLength: 3 }))
    fc.assert(
      fc.property(
        fc.array(rubricOf, { minLength: 1, maxLength: 5 }),
        fc.array(fc.double({ min: 0, max: 1 })),
        (rubrics, scores) => {
          const entries = rubrics
            .map(([shared, own], index) =>
              entry(`p${index}`, scores[index] ?? 0, [
                ...shared.map((text, k) => criterion(`g${k}`, text, 1)),
                ...own.map((n) => criterion(`s${n}`, specific(index, n), 1)),
              ]),
            )
            .filter((candidate) => candidate.rubric.criteria.length > 0)
          fc.pre(entries.length > 0)
          const { rubric, report } = bestDefaultRubric(entries)
          if (report.strategy === 'generic') return
          // Criteria a prompt's own numbers make unique, however alike their words, never reach the default.
          expect(rubric.criteria.map((kept) => kept.text).filter((text) => !general.includes(text))).toEqual([])
        },
      ),
    )
  })

  it('reads --default-rubric: keywords first, then prompt ids, else a file', () => {
    expect(parseDefaultRubricChoice(undefined, ['p1'])).toEqual({ kind: 'best' })
    expect(parseDefaultRubricChoice('none', ['none'])).toEqual({ kind: 'none' })
    expect(parseDefaultRubricChoice('p1', ['p1'])).toEqual({ kind: 'prompt', prompt_id: 'p1' })
    expect(parseDefaultRubricChoice('rubric.json', ['p1'])).toEqual({ kind: 'file', path: 'rubric.json' })
  })
})
