/**
 * `reward-harness lineage …` on a local SQLite file (better-sqlite3): the round trip (manifest, result, eval → `show`
 * prints artifact → deployment → run → evals), check-regression's exit codes (planted regression → 1, none → 0,
 * zero baselines, "latest" = latest in time), bad input → 2, and the pure comparison helpers.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeEach, describe, expect, it } from 'vitest'
import { main } from '../../offline/cli/index.ts'
import { parseMetricSpec } from '../../src/lineage/compare.ts'

const dir = mkdtempSync(join(tmpdir(), 'lineage-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let db = ''
let fileCounter = 0
beforeEach(() => {
  db = join(dir, `l-${++fileCounter}.sqlite`)
})

async function run(args: string[]) {
  let out = ''
  let err = ''
  const code = await main(['lineage', ...args, '--db', db], {
    out: (t) => void (out += t),
    err: (t) => void (err += t),
  })
  return { code, out, err }
}

function file(value: unknown): string {
  const path = join(dir, `f-${++fileCounter}.json`)
  writeFileSync(path, JSON.stringify(value))
  return path
}

const ARTIFACT = `rm_${'a'.repeat(64)}`

function manifest(runId: string, startedAt: string, extra: Record<string, unknown> = {}) {
  return {
    schema_version: '1.0',
    run_id: runId,
    trainer: { name: 'verl', code_version: 'abc123' },
    model: { name: 'qwen-7b' },
    dataset: { id: 'math', version: 'v3' },
    artifact_id: ARTIFACT,
    deploy_id: 'dep_1',
    target: 'prod',
    config: { lr: 1e-6 },
    started_at: startedAt,
    ...extra,
  }
}
const result = (runId: string) => ({
  schema_version: '1.0',
  run_id: runId,
  status: 'succeeded',
  metrics: { reward: 0.7 },
  finished_at: '2026-02-01T00:00:00Z',
})
const evalReport = (
  runId: string,
  metrics: Record<string, number>,
  benchmark = 'gsm8k',
  createdAt = '2026-02-02T00:00:00Z',
) => ({
  schema_version: '1.0',
  eval_id: `${runId}-${benchmark}-${createdAt.slice(0, 13)}`,
  run_id: runId,
  benchmark,
  metrics,
  created_at: createdAt,
})

async function seed(runId: string, startedAt: string, metrics: Record<string, number>) {
  expect((await run(['record-manifest', file(manifest(runId, startedAt))])).code).toBe(0)
  expect((await run(['record-result', file(result(runId))])).code).toBe(0)
  expect((await run(['record-eval', file(evalReport(runId, metrics))])).code).toBe(0)
}

describe('lineage round trip', () => {
  it('records a manifest, a result and an eval, and show prints the chain', async () => {
    await seed('grpo-1', '2026-01-01T00:00:00Z', { accuracy: 0.81 })
    const shown = await run(['show', 'grpo-1'])
    expect(shown.code).toBe(0)
    const lines = shown.out.split('\n')
    expect(lines[0]).toContain(`artifact    ${ARTIFACT}`)
    expect(lines[1]).toContain('deployment  dep_1 on target prod')
    expect(lines[2]).toContain('training    grpo-1: verl · model qwen-7b · dataset math@v3')
    expect(lines[3]).toContain('succeeded')
    expect(shown.out).toMatch(/gsm8k\s+accuracy=0\.8100/)

    const json = JSON.parse((await run(['show', 'grpo-1', '--json'])).out)
    expect(json).toMatchObject({
      run_id: 'grpo-1',
      artifact_id: ARTIFACT,
      deploy_id: 'dep_1',
      result: { status: 'succeeded' },
      evals: [{ benchmark: 'gsm8k' }],
    })
  })

  it(
    'is idempotent for identical records and refuses conflicting ones, results without a manifest and bad ' +
      'schema_version (exit 2)',
    async () => {
      const path = file(manifest('grpo-2', '2026-01-01T00:00:00Z'))
      expect((await run(['record-manifest', path])).code).toBe(0)
      const again = await run(['record-manifest', path])
      expect(again.code).toBe(0)
      expect(again.out).toContain('already recorded')
      const conflicting = await run(['record-manifest', file(manifest('grpo-2', '2026-01-05T00:00:00Z'))])
      expect(conflicting.code).toBe(2)
      expect(conflicting.err).toContain('different manifest')
      const orphan = await run(['record-result', file(result('nobody'))])
      expect(orphan.code).toBe(2)
      expect(orphan.err).toContain('no manifest')
      const badVersion = await run(['record-eval', file({ ...evalReport('grpo-2', { a: 1 }), schema_version: '2.0' })])
      expect(badVersion.code).toBe(2)
      expect(badVersion.err).toContain('schema_version')
    },
  )
})

describe('check-regression', () => {
  it('exits 1 on a planted regression and 0 otherwise', async () => {
    await seed('base', '2026-01-01T00:00:00Z', { accuracy: 0.8, loss: 1.0 })
    await seed('good', '2026-01-02T00:00:00Z', { accuracy: 0.82, loss: 0.9 })
    await seed('bad', '2026-01-03T00:00:00Z', { accuracy: 0.7, loss: 0.9 })
    const ok = await run([
      'check-regression',
      '--baseline',
      'base',
      '--candidate',
      'good',
      '--metric',
      'accuracy:higher',
      '--metric',
      'loss:lower',
    ])
    expect(ok.code).toBe(0)
    expect(ok.out).toContain('no regression')
    const bad = await run([
      'check-regression',
      '--baseline',
      'base',
      '--candidate',
      'bad',
      '--metric',
      'accuracy:higher:0.01',
      '--metric',
      'loss:lower',
    ])
    expect(bad.code).toBe(1)
    expect(bad.out).toContain('[REGRESSION] gsm8k/accuracy')
    // Within tolerance: a 12.5% drop is allowed by a 15% tolerance.
    expect(
      (await run(['check-regression', '--baseline', 'base', '--candidate', 'bad', '--metric', 'accuracy:higher:15%']))
        .code,
    ).toBe(0)
    // A loss going up is a regression (explicit direction, no name heuristics).
    expect(
      (await run(['check-regression', '--baseline', 'good', '--candidate', 'base', '--metric', 'loss:lower'])).code,
    ).toBe(1)
    // A metric no shared benchmark reports is bad input, never a silent pass.
    expect(
      (await run(['check-regression', '--baseline', 'base', '--candidate', 'bad', '--metric', 'nope:higher'])).code,
    ).toBe(2)
    expect(
      (await run(['check-regression', '--baseline', 'base', '--candidate', 'bad', '--metric', 'accuracy:up'])).code,
    ).toBe(2)
  })

  it('handles zero baselines: no percentage, and any worsening beyond an absolute tolerance regresses', async () => {
    await seed('z0', '2026-01-01T00:00:00Z', { errors: 0, solved: 0 })
    await seed('z1', '2026-01-02T00:00:00Z', { errors: 2, solved: 3 })
    const worse = await run([
      'check-regression',
      '--baseline',
      'z0',
      '--candidate',
      'z1',
      '--metric',
      'errors:lower:5%',
      '--json',
    ])
    expect(worse.code).toBe(1)
    const report = JSON.parse(worse.out)
    expect(report.findings[0]).toMatchObject({
      metric: 'errors',
      baseline: 0,
      candidate: 2,
      pct: null,
      regression: true,
    })
    expect(
      (await run(['check-regression', '--baseline', 'z0', '--candidate', 'z1', '--metric', 'errors:lower:2'])).code,
    ).toBe(0)
    expect(
      (await run(['check-regression', '--baseline', 'z0', '--candidate', 'z1', '--metric', 'solved:higher'])).code,
    ).toBe(0)
  })

  it('"latest" is the run started last in time, not the last id in string order', async () => {
    // "run-9" sorts after "run-10" as a string, but run-10 started later (and with a different offset notation).
    await seed('run-9', '2026-01-05T00:00:00Z', { accuracy: 0.9 })
    await seed('run-10', '2026-01-05T03:00:00+02:00', { accuracy: 0.5 })
    const shown = JSON.parse((await run(['show', 'latest', '--json'])).out)
    expect(shown.run_id).toBe('run-10')
    const gate = await run([
      'check-regression',
      '--baseline',
      'run-9',
      '--candidate',
      'latest',
      '--metric',
      'accuracy:higher',
      '--json',
    ])
    expect(gate.code).toBe(1)
    expect(JSON.parse(gate.out)).toMatchObject({
      baseline_run_id: 'run-9',
      candidate_run_id: 'run-10',
      regressed: true,
    })
  })
})

describe('comparisons', () => {
  it(
    'compare-runs lists shared metrics with deltas (pct null at a zero base) and compare-artifacts uses each ' +
      "artifact's latest succeeded run",
    async () => {
      await seed('a', '2026-01-01T00:00:00Z', { accuracy: 0.5, zero: 0 })
      await seed('b', '2026-01-02T00:00:00Z', { accuracy: 0.6, zero: 1 })
      const compared = JSON.parse((await run(['compare-runs', 'a', 'b', '--json'])).out)
      expect(compared.metrics).toHaveLength(2)
      expect(compared.metrics[0]).toMatchObject({ benchmark: 'gsm8k', metric: 'accuracy', a: 0.5, b: 0.6 })
      expect(compared.metrics[0].pct).toBeCloseTo(20)
      expect(compared.metrics[1]).toMatchObject({ metric: 'zero', pct: null })
      const artifacts = await run(['compare-artifacts', ARTIFACT, 'rm_other', '--json'])
      expect(artifacts.code).toBe(0)
      const rows = JSON.parse(artifacts.out).metrics
      expect(rows[0].values[ARTIFACT]).toMatchObject({ run_id: 'b', value: 0.6 })
      expect(rows[0].values.rm_other).toBeNull()
    },
  )

  it('parses metric specs', () => {
    expect(parseMetricSpec('loss:lower:2%')).toEqual({ name: 'loss', direction: 'lower', tolerance: 2, percent: true })
    expect(parseMetricSpec('pass@1:higher')).toEqual({
      name: 'pass@1',
      direction: 'higher',
      tolerance: 0,
      percent: false,
    })
    expect(() => parseMetricSpec('loss')).toThrow(/name:higher\|lower/)
  })
})
