/**
 * RM artifacts both ways between this project and autosr (reference autosr.md §1.6): `import --from autosr` of an
 * autosr artifact built here from the format's description (rubrics, votes, extraction, judge, provenance kept; API
 * keys dropped; every refusal naming its field, exit 2), `export --format autosr` of a mock search's artifact checked
 * against a strict schema of what autosr's RM server loads, the round trip scored by the Worker's `ArtifactScorer` on
 * the mock model, and deploy converting an autosr file with the same code. Every CLI call runs in this process.
 */
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { z } from 'zod'
import { readDeployableArtifact } from '../../offline/artifacts/autosr-import.ts'
import { MockChatModel } from '../../src/llm/index.ts'
import { DEFAULT_RUBRIC_KEY, RmArtifact, verifyArtifactId } from '../../src/schemas/artifact.ts'
import { PreferenceDataset } from '../../src/search/types.ts'
import { ArtifactScorer } from '../../workers/artifacts/score.ts'
import { autosrFixture, SECRET } from '../support/autosr-fixture.ts'
import { runCli } from '../support/cli.ts'

const JUDGE = ['--llm-base-url', 'https://openrouter.ai/api/v1', '--llm-model', 'qwen/qwen3-8b']

// ---------------------------------------------------------------------------------------------
// A strict schema of §1.6: what autosr's RM server needs to load an artifact and start (every key, nothing blank, a
// complete runtime snapshot with the ten llm keys), written from the reference, independently of src/schemas.

const NonBlank = z.string().refine((text) => text.trim() !== '', 'blank')
const StrictCriterion = z.strictObject({
  criterion_id: NonBlank,
  text: NonBlank,
  weight: z.number().min(0),
  criterion_type: z.string().nullable(),
  check_points: z.array(z.string()),
  positive_examples: z.array(z.string()),
  negative_examples: z.array(z.string()),
})
const StrictRubric = z.strictObject({
  rubric_id: NonBlank,
  criteria: z.array(StrictCriterion).min(1),
  grading_protocol: z.strictObject({
    output_format: z.literal('json'),
    allow_na: z.boolean(),
    num_votes: z.number().int().min(1),
    vote_method: z.literal('majority'),
    strict_json: z.literal(true),
  }),
  metadata: z.record(z.string(), z.unknown()),
})
const StrictAutosrArtifact = z.strictObject({
  schema_version: z.literal('1.0'),
  artifact_id: NonBlank,
  created_at_utc: z.iso.datetime({ offset: true }),
  source_session_id: NonBlank,
  source_run_id: NonBlank,
  dataset_hash: NonBlank,
  config_hash: NonBlank,
  rubric: z.record(NonBlank, StrictRubric).refine((map) => Object.keys(map).length > 0),
  scoring_policy: z.looseObject({
    policy_version: z.literal('1.0'),
    objective: z.record(z.string(), z.unknown()),
    search: z.looseObject({ mode: z.string() }),
    score_key: z.literal('best_objective_scores'),
  }),
  normalization: z.strictObject({ method: z.literal('identity'), score_range: z.tuple([z.literal(0), z.literal(1)]) }),
  compatibility: z.strictObject({
    artifact_type: z.literal('rm'),
    min_rm_api_version: z.literal('1.0'),
    output_schema: z.literal('reward_score_v1'),
  }),
  runtime_snapshot: z.strictObject({
    seed: z.number().int(),
    extraction: z.strictObject({
      strategy: z.enum(['identity', 'tag', 'regex']),
      tag_name: z.string(),
      pattern: z.string().nullable(),
      join_separator: z.string(),
    }),
    candidate_extraction: z.strictObject({ strategy: z.enum(['answer', 'identity']), join_separator: z.string() }),
    llm: z.strictObject({
      base_url: z.url(),
      timeout: z.number().positive(),
      max_retries: z.number().int().min(0),
      retry_backoff_base: z.number(),
      retry_backoff_max: z.number(),
      retry_jitter: z.number(),
      fail_soft: z.boolean(),
      default_model: NonBlank,
      verifier_model: NonBlank,
      prompt_language: z.enum(['en', 'zh']),
    }),
  }),
})

let work: string
let counter = 0
/** Writes a JSON document to a fresh file and returns its path. */
function writeJson(document: unknown, name = 'autosr'): string {
  const file = join(work, `${name}-${counter++}.json`)
  writeFileSync(file, `${JSON.stringify(document, null, 2)}\n`)
  return file
}
const readJson = (file: string) => JSON.parse(readFileSync(file, 'utf8'))
const fileSha256 = (file: string) => createHash('sha256').update(readFileSync(file, 'utf8'), 'utf8').digest('hex')

/** `import --from autosr` of a document: the exit code, stdout/stderr and the parsed --json answer. */
async function importDocument(document: unknown) {
  const file = writeJson(document)
  const out = join(work, `imported-${counter++}.json`)
  const run = await runCli('import', '--from', 'autosr', file, '--out', out, '--json')
  return { ...run, file, out, json: run.code === 0 ? JSON.parse(run.out) : JSON.parse(run.err || '{}') }
}

let searchOutput: string
let rmFile: string
let dataset: PreferenceDataset

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'autosr-artifact-'))
  searchOutput = join(work, 'search/best.json')
  const search = await runCli(
    'search',
    '--dataset',
    'examples/demo.json',
    '--backend',
    'mock',
    '--output',
    searchOutput,
    '--generations',
    '1',
    '--json',
  )
  expect(search.code, search.err).toBe(0)
  rmFile = join(work, 'rm.json')
  const exported = await runCli('export', '--search-output', searchOutput, '--out', rmFile, '--json')
  expect(exported.code, exported.err).toBe(0)
  dataset = PreferenceDataset.parse(readJson('examples/demo.json'))
}, 120_000)
afterAll(() => rmSync(work, { recursive: true, force: true }))

describe('import --from autosr', () => {
  it('converts a complete artifact: rubrics, votes, extraction, judge, provenance kept; API keys dropped', async () => {
    const run = await importDocument(autosrFixture())
    expect(run.err).toBe('')
    expect(run.code).toBe(0)
    const text = readFileSync(run.out, 'utf8')
    expect(text).not.toContain(SECRET)
    expect(run.out).not.toContain(SECRET)
    const artifact = RmArtifact.parse(JSON.parse(text))
    expect(JSON.parse(text)).toEqual(artifact)
    expect(await verifyArtifactId(artifact)).toBe(true)
    expect(run.json).toMatchObject({
      artifact_id: artifact.artifact_id,
      from: { format: 'autosr', artifact_id: 'rm_20260222T120000_123456Z' },
      prompts: ['p_brief', 'p_trains'],
      dropped_keys: ['api_key', 'rubric.p_brief.metadata.provider.OPENROUTER_API_KEY', 'runtime_snapshot.llm.api_key'],
    })

    const fixture = autosrFixture()
    const trains = artifact.rubrics.p_trains!
    expect(trains.rubric_id).toBe('p_trains_r0_raise_bar_4821')
    expect(trains.criteria.map((c) => [c.criterion_id, c.text, c.weight, c.criterion_type])).toEqual(
      fixture.rubric.p_trains.criteria.map((c: any) => [
        c.criterion_id,
        c.text,
        c.weight,
        c.criterion_type === 'Completeness' ? null : c.criterion_type,
      ]),
    )
    expect(trains.criteria[1]).toMatchObject({ check_points: ['first', 'second', '1.', '2.'] })
    expect(trains.criteria[1]!.positive_examples).toEqual(['First, … Second, …'])
    expect(trains.metadata).toEqual({
      origin: 'heuristic_initializer',
      autosr_criterion_types: { completeness: 'Completeness' },
    })
    const brief = artifact.rubrics.p_brief!
    expect(brief.criteria.map((c) => c.criterion_type)).toEqual(['reasoning', null])
    expect(brief.criteria[0]).toMatchObject({ weight: 2, check_points: [], negative_examples: [] })
    expect(brief.criteria[1]!.negative_examples).toEqual(['in conclusion', 'as an ai language model'])
    expect(brief.metadata).toEqual({ origin: 'llm_initializer', provider: { name: 'openrouter' } })
    for (const rubric of Object.values(artifact.rubrics))
      expect(rubric.grading_protocol).toEqual({ grade_max: 5, allow_na: true, num_votes: 3 })

    expect(artifact.runtime).toEqual({
      backend: 'openai',
      verifier_model: 'qwen/qwen3-8b',
      base_url: 'https://openrouter.ai/api/v1',
      temperature: 0,
      max_tokens: 2048,
      seed: 11,
      locale: 'zh',
      extraction: { prompt: { kind: 'tag', tag: 'content', join: '\n' }, candidate: { kind: 'answer' } },
      grade_max: 5,
      allow_na: true,
      num_votes: 3,
    })
    expect(artifact.created_at_utc).toBe(fixture.created_at_utc)
    expect(artifact.provenance).toEqual({
      source_run_id: fixture.source_run_id,
      source_session_id: fixture.source_session_id,
      dataset_sha256: fixture.dataset_hash,
      config_hash: fixture.config_hash,
      settings_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      search_output_sha256: fileSha256(run.file),
      imported: { format: 'autosr', artifact_id: fixture.artifact_id, file_sha256: fileSha256(run.file) },
    })

    // The same file always gives the same artifact; the text report names what was dropped, never its value.
    const again = await runCli('import', '--from', 'autosr', run.file, '--out', join(work, 'again.json'))
    expect(again.code).toBe(0)
    expect(readFileSync(join(work, 'again.json'), 'utf8')).toBe(text)
    expect(again.out).toContain(`wrote ${artifact.artifact_id}`)
    expect(again.out).toContain('runtime_snapshot.llm.api_key')
    expect(again.out + again.err).not.toContain(SECRET)
  })

  it('falls back as autosr does (default model, English prompts); reads a regex and a __default__ rubric', async () => {
    const fixture = autosrFixture()
    fixture.runtime_snapshot.llm.verifier_model = null
    fixture.runtime_snapshot.llm.prompt_language = null
    fixture.runtime_snapshot.extraction = { strategy: 'regex', pattern: 'Q: (\\w+)', join_separator: ' | ' }
    fixture.runtime_snapshot.candidate_extraction = { strategy: 'identity', join_separator: '\n' }
    fixture.rubric[DEFAULT_RUBRIC_KEY] = structuredClone(fixture.rubric.p_brief)
    const run = await importDocument(fixture)
    expect(run.code, run.err).toBe(0)
    const artifact = RmArtifact.parse(readJson(run.out))
    expect(artifact.runtime).toMatchObject({
      verifier_model: 'stepfun/step-3.5-flash:free',
      locale: 'en',
      extraction: { prompt: { kind: 'regex', pattern: 'Q: (\\w+)', join: ' | ' }, candidate: { kind: 'identity' } },
    })
    expect(Object.keys(artifact.rubrics)).toContain(DEFAULT_RUBRIC_KEY)
    expect(run.json.notes.join('\n')).toMatch(/__default__: autosr served it only for prompt_id "__default__"/)
    expect(run.json.notes.join('\n')).toMatch(/verifier_model is not set/)
  })

  const refusals: Array<[string, (fixture: any) => void, string]> = [
    ['a missing dataset_hash', (f) => delete f.dataset_hash, 'dataset_hash: '],
    ['a blank config_hash', (f) => (f.config_hash = '  '), 'config_hash: must not be blank'],
    ['a blank artifact_id', (f) => (f.artifact_id = ''), 'artifact_id: must not be blank'],
    ['another schema_version', (f) => (f.schema_version = '2.0'), 'schema_version: must be "1.0"'],
    ['an empty rubric map', (f) => (f.rubric = {}), 'rubric: must include at least one prompt rubric'],
    ['a criterion without text', (f) => delete f.rubric.p_trains.criteria[0].text, 'rubric.p_trains.criteria[0].text'],
    [
      'a repeated criterion id',
      (f) => (f.rubric.p_trains.criteria[1].criterion_id = 'task_fit'),
      'rubric.p_trains.criteria[1].criterion_id: criterion id "task_fit" is used twice',
    ],
    ['a negative weight', (f) => (f.rubric.p_brief.criteria[0].weight = -1), 'rubric.p_brief.criteria[0].weight'],
    [
      'no positive weight',
      (f) => {
        for (const criterion of f.rubric.p_brief.criteria) criterion.weight = 0
      },
      'rubric.p_brief.criteria: no criterion has a positive weight',
    ],
    [
      'rubrics disagreeing on num_votes',
      (f) => (f.rubric.p_trains.grading_protocol = { ...f.rubric.p_trains.grading_protocol, num_votes: 5 }),
      'rubric.p_trains.grading_protocol.num_votes: 5, but rubric.p_brief has 3',
    ],
    [
      'rubrics disagreeing on allow_na',
      (f) => (f.rubric.p_trains.grading_protocol = { ...f.rubric.p_trains.grading_protocol, allow_na: false }),
      'rubric.p_trains.grading_protocol.allow_na: false, but rubric.p_brief has true',
    ],
    [
      'more votes than this project grades with',
      (f) => {
        for (const rubric of Object.values<any>(f.rubric))
          rubric.grading_protocol = { ...rubric.grading_protocol, num_votes: 20 }
      },
      'rubric.p_brief.grading_protocol.num_votes: 20',
    ],
    ['an empty runtime_snapshot', (f) => (f.runtime_snapshot = {}), 'runtime_snapshot: empty'],
    ['a fractional seed', (f) => (f.runtime_snapshot.seed = 1.5), 'runtime_snapshot.seed'],
    ['no llm', (f) => delete f.runtime_snapshot.llm, 'runtime_snapshot.llm: '],
    ['an incomplete llm', (f) => delete f.runtime_snapshot.llm.verifier_model, 'runtime_snapshot.llm.verifier_model'],
    ['an llm without a timeout', (f) => delete f.runtime_snapshot.llm.timeout, 'runtime_snapshot.llm.timeout'],
    [
      'an unknown extraction strategy',
      (f) => (f.runtime_snapshot.extraction.strategy = 'jsonpath'),
      'runtime_snapshot.extraction.strategy: "jsonpath"',
    ],
    [
      'a Python-only regex',
      (f) => (f.runtime_snapshot.extraction = { strategy: 'regex', pattern: '(?P<q>\\w+)' }),
      'runtime_snapshot.extraction.pattern: not a valid regular expression',
    ],
    [
      'a tag name this project cannot match',
      (f) => (f.runtime_snapshot.extraction.tag_name = 'two words'),
      'runtime_snapshot.extraction.tag_name',
    ],
    [
      'an unknown candidate extraction',
      (f) => (f.runtime_snapshot.candidate_extraction.strategy = 'last_line'),
      'runtime_snapshot.candidate_extraction.strategy: "last_line"',
    ],
    [
      'an answer separator this project cannot use',
      (f) => (f.runtime_snapshot.candidate_extraction.join_separator = '\n'),
      'runtime_snapshot.candidate_extraction.join_separator',
    ],
    [
      'a prompt language without verifier prompts',
      (f) => (f.runtime_snapshot.llm.prompt_language = 'fr'),
      'runtime_snapshot.llm.prompt_language: "fr"',
    ],
    [
      'a base_url that is no URL',
      (f) => (f.runtime_snapshot.llm.base_url = 'openrouter'),
      'runtime_snapshot.llm.base_url',
    ],
  ]
  it.each(refusals)('refuses %s with exit 2, naming the field', async (_name, edit, field) => {
    const fixture = autosrFixture()
    edit(fixture)
    const run = await importDocument(fixture)
    expect(run.code).toBe(2)
    expect(run.json.error).toMatchObject({ kind: 'bad_input', code: 'invalid_autosr_artifact' })
    expect(run.json.error.issues.join('\n')).toContain(field)
    expect(run.err).not.toContain(SECRET)
  })

  it('lists every problem at once, in text too, and refuses what is not an autosr artifact', async () => {
    const fixture = autosrFixture()
    delete fixture.dataset_hash
    fixture.runtime_snapshot.extraction.strategy = 'jsonpath'
    fixture.rubric.p_trains.grading_protocol = { ...fixture.rubric.p_trains.grading_protocol, num_votes: 1 }
    const file = writeJson(fixture)
    const schema = await runCli('import', '--from', 'autosr', file, '--out', join(work, 'x.json'))
    expect(schema.code).toBe(2)
    // autosr's own loader rules first (the file is unreadable to autosr too), then what this project cannot express.
    expect(schema.err).toMatch(/^error: refusing to import .*\n {2}- dataset_hash: /)
    delete fixture.dataset_hash
    fixture.dataset_hash = 'd'.repeat(64)
    const both = await runCli('import', '--from', 'autosr', writeJson(fixture), '--out', join(work, 'x.json'))
    expect(both.code).toBe(2)
    expect(both.err).toContain('2 problems')
    expect(both.err).toContain('  - runtime_snapshot.extraction.strategy: "jsonpath"')
    expect(both.err).toContain('  - rubric.p_trains.grading_protocol.num_votes: 1, but rubric.p_brief has 3')

    expect((await runCli('import', '--from', 'openai', file, '--out', join(work, 'x.json'))).code).toBe(2)
    writeFileSync(join(work, 'broken.json'), '{"rubric": ')
    const broken = await runCli('import', '--from', 'autosr', join(work, 'broken.json'), '--out', join(work, 'x.json'))
    expect(broken).toMatchObject({ code: 2, err: expect.stringContaining('not a JSON file') })
    expect((await runCli('import', '--from', 'autosr', file)).code).toBe(2)
  })
})

describe('export --format autosr', () => {
  it('writes what autosr loads: every key, a complete runtime snapshot, both grade scales stated', async () => {
    const out = join(work, 'rm-autosr.json')
    const run = await runCli('export', '--search-output', searchOutput, '--format', 'autosr', '--out', out, ...JUDGE)
    expect(run.err).toBe('')
    expect(run.code).toBe(0)
    const ours = RmArtifact.parse(readJson(rmFile))
    const autosr = StrictAutosrArtifact.parse(readJson(out))
    expect(autosr).toMatchObject({
      artifact_id: ours.artifact_id,
      created_at_utc: ours.created_at_utc,
      source_session_id: ours.provenance.source_session_id,
      source_run_id: ours.provenance.source_run_id,
      dataset_hash: ours.provenance.dataset_sha256,
      config_hash: ours.provenance.config_hash,
    })
    expect(Object.keys(autosr.runtime_snapshot.llm).sort()).toEqual(
      [
        'base_url',
        'timeout',
        'max_retries',
        'retry_backoff_base',
        'retry_backoff_max',
        'retry_jitter',
        'fail_soft',
        'default_model',
        'verifier_model',
        'prompt_language',
      ].sort(),
    )
    expect(autosr.runtime_snapshot).toMatchObject({
      seed: ours.runtime.seed,
      llm: { base_url: JUDGE[1], verifier_model: JUDGE[3], default_model: JUDGE[3], prompt_language: 'en' },
      candidate_extraction: { strategy: ours.runtime.extraction.candidate.kind },
    })
    expect(Object.keys(autosr.rubric).sort()).toEqual(Object.keys(ours.rubrics).sort())
    for (const [promptId, rubric] of Object.entries(autosr.rubric)) {
      const source = ours.rubrics[promptId]!
      expect(rubric.criteria).toEqual(source.criteria)
      expect(rubric.grading_protocol).toMatchObject({
        num_votes: ours.runtime.num_votes,
        allow_na: source.grading_protocol.allow_na,
      })
      expect(rubric.metadata.reward_harness).toMatchObject({
        grade_max: ours.runtime.grade_max,
        autosr_grade_scale_max: 5,
      })
    }
    expect(autosr.scoring_policy.grade_scale).toMatchObject({
      grade_max: ours.runtime.grade_max,
      autosr_grade_scale_max: 5,
    })
    expect(run.out).toContain('__default__')

    // The artifact file gives the same autosr artifact, byte for byte.
    const fromFile = join(work, 'rm-autosr-from-file.json')
    const converted = await runCli('export', '--artifact', rmFile, '--format', 'autosr', '--out', fromFile, ...JUDGE)
    expect(converted.code, converted.err).toBe(0)
    expect(readFileSync(fromFile, 'utf8')).toBe(readFileSync(out, 'utf8'))
  })

  it('refuses with exit 2: a mock artifact without a judge, flags of the other format, an autosr file', async () => {
    const out = join(work, 'refused.json')
    const noJudge = await runCli('export', '--artifact', rmFile, '--format', 'autosr', '--out', out, '--json')
    expect(noJudge.code).toBe(2)
    const error = JSON.parse(noJudge.err).error
    expect(error.issues.join('\n')).toMatch(/--llm-base-url: required/)
    expect(error.issues.join('\n')).toMatch(/--llm-model: required: the artifact was searched on the mock backend/)
    const onlyUrl = await runCli(
      'export',
      '--artifact',
      rmFile,
      '--format',
      'autosr',
      '--out',
      out,
      ...JUDGE.slice(0, 2),
    )
    expect(onlyUrl).toMatchObject({ code: 2, err: expect.stringContaining('--llm-model: required') })
    expect((await runCli('export', '--artifact', rmFile, '--out', out)).code).toBe(2)
    expect((await runCli('export', '--search-output', searchOutput, '--out', out, ...JUDGE)).code).toBe(2)
    expect((await runCli('export', '--search-output', searchOutput, '--format', 'onnx', '--out', out)).code).toBe(2)

    const autosrFile = writeJson(autosrFixture())
    const wrongKind = await runCli('export', '--artifact', autosrFile, '--format', 'autosr', '--out', out)
    expect(wrongKind.code).toBe(2)
    expect(wrongKind.err).toContain(`this is an autosr artifact: run reward-harness import --from autosr ${autosrFile}`)
  })
})

describe('round trips', () => {
  it('import(export(a)) has the same rubrics and runtime and scores like a on the mock model', async () => {
    const a = RmArtifact.parse(readJson(rmFile))
    const autosrOut = join(work, 'trip-autosr.json')
    expect(
      (await runCli('export', '--artifact', rmFile, '--format', 'autosr', '--out', autosrOut, ...JUDGE)).code,
    ).toBe(0)
    const back = join(work, 'trip-back.json')
    const imported = await runCli('import', '--from', 'autosr', autosrOut, '--out', back)
    expect(imported.code, imported.err).toBe(0)
    const b = RmArtifact.parse(readJson(back))
    expect(await verifyArtifactId(b)).toBe(true)

    expect(b.rubrics).toEqual(a.rubrics)
    const { backend: _b, verifier_model: _v, base_url, temperature: _t, max_tokens: _m, ...kept } = b.runtime
    const { backend: _ab, verifier_model: _av, temperature: _at, max_tokens: _am, ...expected } = a.runtime
    expect(kept).toEqual(expected)
    expect(b.runtime).toMatchObject({ backend: 'openai', verifier_model: JUDGE[3], temperature: 0 })
    expect(base_url).toBe(JUDGE[1])
    expect(b.provenance).toMatchObject({
      source_run_id: a.provenance.source_run_id,
      source_session_id: a.provenance.source_session_id,
      dataset_sha256: a.provenance.dataset_sha256,
      config_hash: a.provenance.config_hash,
      imported: { format: 'autosr', artifact_id: a.artifact_id, file_sha256: fileSha256(autosrOut) },
    })

    // The same scorer, the same mock model (noisy, so the vote seeds matter too): the same scores.
    const scorerA = new ArtifactScorer(a, new MockChatModel('mock-heuristic-1', { scoreNoise: 0.2 }))
    const scorerB = new ArtifactScorer(b, new MockChatModel('mock-heuristic-1', { scoreNoise: 0.2 }))
    const scores: number[] = []
    for (const item of dataset.prompts)
      for (const promptId of [item.prompt_id, 'p_never_seen'])
        for (const candidate of item.candidates.slice(0, 3)) {
          const request = { prompt_id: promptId, prompt: item.prompt, candidate }
          const [left, right] = [await scorerA.score(request), await scorerB.score(request)]
          expect(right.score).toBe(left.score)
          expect(right.per_vote_grades).toEqual(left.per_vote_grades)
          expect(right.fallback_rubric).toBe(left.fallback_rubric)
          scores.push(left.score)
        }
    expect(scores).toHaveLength(18)
    expect(new Set(scores).size).toBeGreaterThan(1)
  })

  it('export(import(autosr)) gives back its rubrics and judge without flags', async () => {
    const fixture = autosrFixture()
    fixture.rubric.p_trains.criteria[2].criterion_type = 'reasoning'
    const run = await importDocument(fixture)
    expect(run.code, run.err).toBe(0)
    const out = join(work, 'autosr-again.json')
    const again = await runCli('export', '--artifact', run.out, '--format', 'autosr', '--out', out)
    expect(again.code, again.err).toBe(0)
    const autosr = StrictAutosrArtifact.parse(readJson(out))
    for (const [promptId, rubric] of Object.entries<any>(fixture.rubric))
      expect(autosr.rubric[promptId]!.criteria.map((c) => [c.criterion_id, c.text, c.weight])).toEqual(
        rubric.criteria.map((c: any) => [c.criterion_id, c.text, c.weight]),
      )
    expect(autosr.runtime_snapshot).toMatchObject({
      seed: 11,
      extraction: { strategy: 'tag', tag_name: 'content', join_separator: '\n' },
      llm: { base_url: 'https://openrouter.ai/api/v1', verifier_model: 'qwen/qwen3-8b', prompt_language: 'zh' },
    })
    expect(autosr.source_run_id).toBe(fixture.source_run_id)
    expect(JSON.stringify(autosr)).not.toContain(SECRET)
  })
})

describe('deploy of an autosr file', () => {
  it('converts it with the import code before anything is sent, and refuses it naming the field', async () => {
    const fixture = autosrFixture()
    const file = writeJson(fixture)
    const imported = await importDocument(fixture)
    const deployable = await readDeployableArtifact(file)
    expect(deployable.converted_from).toEqual({ format: 'autosr', artifact_id: fixture.artifact_id })
    expect(deployable.artifact.artifact_id).toBe(RmArtifact.parse(readJson(imported.out)).artifact_id)
    expect((await readDeployableArtifact(rmFile)).converted_from).toBeUndefined()

    vi.stubEnv('REWARD_HARNESS_ADMIN_TOKEN', '')
    // A loopback URL would read this checkout's .dev.vars: name one that does not exist.
    vi.stubEnv('REWARD_HARNESS_DEV_VARS', join(tmpdir(), 'rh-no-such-dir', '.dev.vars'))
    try {
      const deploy = ['deploy', '--target', 'prod', '--url', 'http://127.0.0.1:9', '--artifact']
      const converted = await runCli(...deploy, file)
      // Conversion passed: what stops it is the missing admin token, checked after the file.
      expect(converted).toMatchObject({ code: 2, err: expect.stringContaining('the admin token is missing') })
      fixture.runtime_snapshot.llm.prompt_language = 'fr'
      const refused = await runCli(...deploy, writeJson(fixture))
      expect(refused.code).toBe(2)
      expect(refused.err).toContain('runtime_snapshot.llm.prompt_language: "fr"')
      expect(refused.err).not.toContain('Invalid discriminator')
    } finally {
      vi.unstubAllEnvs()
    }
  })
})
