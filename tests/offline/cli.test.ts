import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Command } from 'commander'
import { afterAll, describe, expect, it } from 'vitest'
import { loadCommands, VERSION } from '../../offline/cli/index.ts'
import { buildProgram } from '../../offline/cli/program.ts'
import { parseDataset } from '../../src/datasets/parse.ts'
import { runCli } from '../support/cli.ts'

const ROOT = join(import.meta.dirname, '../..')
const FIXTURES = 'tests/offline/fixtures/datasets'

/** Runs the CLI in this process, capturing what it prints. */
const run = runCli

/** Runs a script with node (and the tsx hooks when asked), as a user's shell would. */
function spawnNode(args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd: ROOT, env: { ...process.env, NO_COLOR: '1' } }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, out: stdout, err: stderr })
    })
  })
}

/** Every command path of the program: ['datasets'], ['datasets', 'validate'], … */
function commandPaths(command: Command, prefix: string[] = []): string[][] {
  return command.commands
    .filter((sub) => sub.name() !== 'help')
    .flatMap((sub) => [[...prefix, sub.name()], ...commandPaths(sub, [...prefix, sub.name()])])
}

describe('reward-harness (in process)', () => {
  const directory = mkdtempSync(join(tmpdir(), 'cli-test-'))
  afterAll(() => rmSync(directory, { recursive: true, force: true }))

  it('prints help for the program and for every command, with exit code 0', async () => {
    const root = await run('--help')
    expect(root.code).toBe(0)
    expect(root.out).toContain('Usage: reward-harness [options] [command]')
    const program = await buildProgram(
      await loadCommands(),
      { out: () => undefined, err: () => undefined },
      { version: VERSION },
    )
    const paths = commandPaths(program)
    expect(paths).toEqual(expect.arrayContaining([['datasets'], ['datasets', 'validate'], ['datasets', 'convert']]))
    for (const path of paths) {
      const help = await run(...path, '--help')
      expect(help, path.join(' ')).toMatchObject({ code: 0, err: '' })
      expect(help.out).toContain(`Usage: reward-harness ${path.join(' ')}`)
    }
    expect((await run('help', 'datasets')).out).toContain('Usage: reward-harness datasets')
    // Which way the labels go, where a data person looks first.
    expect((await run('datasets', '--help')).out).toContain(
      'Labels: rank 1 is the best candidate of its prompt (2 the next best, and so on); a higher quality is better.',
    )
    expect(await run('--version')).toMatchObject({ code: 0, out: `${VERSION}\n` })
  })

  it('validates a dataset: a summary on stdout and exit code 0', async () => {
    const result = await run('datasets', 'validate', `${FIXTURES}/autosr-small.json`)
    expect(result).toMatchObject({ code: 0, err: '' })
    expect(result.out).toContain(`${FIXTURES}/autosr-small.json: valid (autosr prompts, JSON)`)
    expect(result.out).toMatch(/prompts +2\n/)
    expect(result.out).toMatch(/candidates +5 \(2–3 per prompt, mean 2\.5\)/)
  })

  it('prints JSON under --json, placed anywhere on the command line', async () => {
    for (const argv of [
      ['--json', 'datasets', 'validate', `${FIXTURES}/judgebench-small.jsonl`],
      ['datasets', 'validate', `${FIXTURES}/judgebench-small.jsonl`, '--json'],
    ]) {
      const result = await run(...argv)
      expect(result.code).toBe(0)
      expect(JSON.parse(result.out)).toMatchObject({
        path: join(ROOT, FIXTURES, 'judgebench-small.jsonl'),
        format: 'jsonl',
        shape: 'judgebench',
        summary: { prompts: 2, candidates: 4 },
      })
    }
  })

  it('converts a dataset to autosr JSON that parses back to the same dataset', async () => {
    const out = join(directory, 'converted/pairs.json')
    const result = await run('datasets', 'convert', `${FIXTURES}/judgebench-small.jsonl`, '--out', out, '--json')
    expect(result.code).toBe(0)
    expect(JSON.parse(result.out)).toMatchObject({
      input: { shape: 'judgebench' },
      output: { path: out },
      summary: { prompts: 2 },
    })
    const written = JSON.parse(readFileSync(out, 'utf8')) as { prompts: { candidates: { metadata: unknown }[] }[] }
    expect(written.prompts[0]?.candidates[0]?.metadata).toEqual({ rank: 2 })
    expect(parseDataset(readFileSync(out, 'utf8'))).toEqual(
      parseDataset(readFileSync(join(ROOT, FIXTURES, 'judgebench-small.jsonl'), 'utf8')),
    )
  })

  it('exits with 2 and names the place for an invalid dataset; with --json the error is JSON on stderr', async () => {
    const text = await run('datasets', 'validate', `${FIXTURES}/one-candidate.json`)
    expect(text).toMatchObject({ code: 2, out: '' })
    expect(text.err).toBe(
      `error: ${FIXTURES}/one-candidate.json: prompts[1] (prompt_id "p_lonely").candidates: needs at least 2 ` +
        `candidates, got 1\n`,
    )
    const json = await run('datasets', 'validate', `${FIXTURES}/broken-line.jsonl`, '--json')
    expect(json.code).toBe(2)
    expect(JSON.parse(json.err)).toEqual({
      error: {
        kind: 'bad_input',
        code: 'invalid_dataset',
        message: expect.stringContaining('line 3: not valid JSON'),
        issues: [{ place: 'line 3', reason: expect.any(String) }],
      },
    })
    expect((await run('datasets', 'validate', join(directory, 'missing.json'))).err).toContain(
      'missing.json: no such file',
    )
  })

  it('exits with 2 for bad flags and arguments, and with 1 for other failures', async () => {
    expect(await run('datasets', 'validate', `${FIXTURES}/autosr-small.json`, '--bogus')).toMatchObject({
      code: 2,
      err: expect.stringContaining("unknown option '--bogus'"),
    })
    expect(await run('datasets', 'validate')).toMatchObject({
      code: 2,
      err: expect.stringContaining("missing required argument 'file'"),
    })
    expect(await run('datasets', 'convert', `${FIXTURES}/autosr-small.json`)).toMatchObject({
      code: 2,
      err: expect.stringContaining("required option '-o, --out <file.json>' not specified"),
    })
    expect(await run('datasets', 'convert', `${FIXTURES}/autosr-small.json`, '--out', 'x.jsonl')).toMatchObject({
      code: 2,
      err: expect.stringContaining('--out: convert writes autosr JSON'),
    })
    expect(await run('datasets', 'validate', `${FIXTURES}/autosr-small.json`, '--format', 'yaml')).toMatchObject({
      code: 2,
    })
    expect(await run('nonsense')).toMatchObject({ code: 2, err: expect.stringContaining("unknown command 'nonsense'") })
    // A misspelt required option is named with the one meant, not only reported as missing.
    expect(await run('search', '--datset', 'examples/demo.json', '--output', 'x.json')).toMatchObject({
      code: 2,
      err: expect.stringContaining('(Did you mean --dataset? "--datset" is not an option of search)'),
    })
    expect(await run()).toMatchObject({ code: 2, err: expect.stringContaining('Usage: reward-harness') })
    expect(JSON.parse((await run('--json', 'datasets', 'validate', 'x.json', '--bogus')).err)).toMatchObject({
      error: { kind: 'bad_input', code: 'commander.unknownOption' },
    })
    expect(JSON.parse((await run('--json')).err)).toEqual({
      error: { kind: 'bad_input', code: 'commander.help', message: 'no command given; see --help' },
    })

    const file = join(directory, 'plain-file')
    writeFileSync(file, 'not a directory')
    const failure = await run('datasets', 'convert', `${FIXTURES}/autosr-small.json`, '--out', join(file, 'out.json'))
    expect(failure).toMatchObject({ code: 1, err: expect.stringMatching(/^error: .*(ENOTDIR|EEXIST)/) })
  })
})

describe('reward-harness (child process)', () => {
  it('runs through tsx: exit code 2 and the broken line named on stderr', async () => {
    const result = await spawnNode([
      '--import',
      'tsx',
      'offline/cli/index.ts',
      'datasets',
      'validate',
      `${FIXTURES}/broken-line.jsonl`,
    ])
    expect(result).toMatchObject({ code: 2, out: '' })
    expect(result.err).toContain(
      `${FIXTURES}/broken-line.jsonl: line 3: not valid JSON: expected ',' or '}' after a property value`,
    )
  }, 30_000)

  it('runs through the package bin (`reward-harness`): help, and a valid example', async () => {
    const help = await spawnNode(['reward-harness', '--help'])
    expect(help).toMatchObject({ code: 0, out: expect.stringContaining('datasets') })
    const valid = await spawnNode(['reward-harness', 'datasets', 'validate', 'examples/demo.json', '--json'])
    expect(valid.code).toBe(0)
    expect(JSON.parse(valid.out)).toMatchObject({
      shape: 'autosr',
      summary: { prompts: 3, candidates: 18, fully_ranked: true },
    })
  }, 30_000)
})
