/**
 * A configuration file a person writes is read strictly: a misspelt key exits 2 naming it and the key it most likely
 * meant. What was stored by another version is read leniently (parseStored): unknown keys are dropped at any depth,
 * every other check still applies.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { parseStored, unknownKeysMessage } from '../../src/schemas/strict.ts'
import { RunConfig } from '../../src/schemas/run-config.ts'
import { nearestName } from '../../src/text/index.ts'
import { runCli } from '../support/cli.ts'

const work = mkdtempSync(join(tmpdir(), 'unknown-keys-'))
afterAll(() => rmSync(work, { recursive: true, force: true }))

const DEMO = join(import.meta.dirname, '../../examples/demo.json')

function file(name: string, value: unknown): string {
  const path = join(work, name)
  writeFileSync(path, JSON.stringify(value))
  return path
}

describe('the nearest known key', () => {
  it('is named for a typo and not for an unrelated key, which lists the keys instead', () => {
    expect(nearestName('rollout_per_step', ['mode', 'rollouts_per_step'])).toBe('rollouts_per_step')
    expect(nearestName('rubric_mode', ['rubrics_mode', 'mode'])).toBe('rubrics_mode')
    expect(nearestName('colour', ['mode', 'rollouts_per_step'])).toBeUndefined()
    expect(unknownKeysMessage(['modle', 'colour'], ['mode', 'model'])).toBe(
      'unknown keys "modle" (did you mean mode?), "colour"; the keys are mode, model',
    )
  })
})

describe('an endpoints file, --endpoint and search --config with a misspelt key', () => {
  const search = (...extra: string[]) =>
    runCli('search', '--dataset', DEMO, '--output', join(work, 'out/best.json'), ...extra)

  it('exit 2 naming the key, where it is and the key it meant', async () => {
    const endpoints = file('endpoints.json', { endpoints: [{ base_url: 'http://127.0.0.1:9/v1', max_concurency: 4 }] })
    const refused = await search('--endpoints-file', endpoints)
    expect(refused.code).toBe(2)
    expect(refused.err).toContain(`${endpoints}: `)
    expect(refused.err).toContain('endpoints[0]: unknown key "max_concurency" (did you mean max_concurrency?)')

    const document = file('document.json', { endpoint: [{ base_url: 'http://127.0.0.1:9/v1', max_concurrency: 4 }] })
    expect((await search('--endpoints-file', document)).err).toContain(
      'unknown key "endpoint" (did you mean endpoints?)',
    )

    const flag = await search('--endpoint', 'http://127.0.0.1:9/v1,max_concurency=4')
    expect(flag.code).toBe(2)
    expect(flag.err).toContain('unknown key "max_concurency" (did you mean max_concurrency?)')

    const config = file('search.json', { populaton_size: 4 })
    const knob = await search('--config', config)
    expect(knob.code).toBe(2)
    expect(knob.err).toContain(`--config ${config}: unknown key "populaton_size" (did you mean population_size?)`)
  })
})

describe('a run config read back from storage', () => {
  it('drops keys this version does not know at every depth and keeps every other check', () => {
    const stored = {
      anchor_rubrics: [{ text: 'Correct.', obsolete_note: 'x' }],
      obsolete_knob: 1,
      agents: { default: { obsolete_pool: 3 }, scorer: { model: 'judge', obsolete: true } },
      analysis: { max_per_step: 4, obsolete_budget: 9 },
      audit: { sample: 0.5, obsolete_rate: 1 },
    }
    expect(RunConfig.safeParse(stored).success).toBe(false)
    const config = parseStored(RunConfig, stored)
    expect(config).toMatchObject({ analysis: { max_per_step: 4 }, audit: { sample: 0.5 } })
    expect(config.agents.scorer).toEqual({ model: 'judge' })
    expect(JSON.stringify(config)).not.toContain('obsolete')
    expect(stored.obsolete_knob).toBe(1)
    expect(() => parseStored(RunConfig, { ...stored, mode: 'fast' })).toThrow(/mode/)
  })
})
