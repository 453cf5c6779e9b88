/**
 * `npm run judge:local`'s pure parts: the install stamp's key, the digest of pip's verbose output a person waiting
 * sees, and where it keeps its files. (The install and the server themselves take minutes and a compiler: probed by
 * hand, docs/local-judge.md.)
 */
import { mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { BuildProgress, installKey, judgeHome, pruneServerLogs } from '../../offline/judge-local/index.ts'

describe('judge:local', () => {
  it('reinstalls when the requirements or the CMake arguments change, not otherwise', () => {
    const key = installKey('llama-cpp-python[server]==0.3.36\n', '-DLLAVA_BUILD=OFF')
    expect(installKey('llama-cpp-python[server]==0.3.36\n', '-DLLAVA_BUILD=OFF')).toBe(key)
    expect(installKey('llama-cpp-python[server]==0.3.37\n', '-DLLAVA_BUILD=OFF')).not.toBe(key)
    expect(installKey('llama-cpp-python[server]==0.3.36\n', '-DLLAVA_BUILD=OFF -DGGML_BLAS=ON')).not.toBe(key)
  })

  it("says the compile's progress once a tenth or once in 30 s, never once per compiler command", () => {
    let now = 0
    const progress = new BuildProgress(() => now)
    const said = (line: string) => progress.digest(line)
    expect(said('[1/140] /usr/bin/c++ -O3 -c ggml.c')).toBe('judge:local: compiling llama.cpp [1/140]')
    expect(said('[2/140] /usr/bin/c++ -O3 -c ggml-cpu.c')).toBeUndefined()
    expect(said('[14/140] /usr/bin/c++ …')).toBe('judge:local: compiling llama.cpp [14/140]')
    now = 31_000
    expect(said('[15/140] /usr/bin/c++ …')).toBe('judge:local: compiling llama.cpp [15/140]')
    expect(said('-- Configuring done')).toBeUndefined()
    expect(said('Collecting numpy==2.4.6 (from -r requirements.txt (line 15))')).toBe(
      'judge:local: Collecting numpy==2.4.6 …',
    )
    expect(said('Successfully installed llama-cpp-python-0.3.36 numpy-2.4.6')).toBe(
      'judge:local: Successfully installed',
    )
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
