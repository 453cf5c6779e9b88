/**
 * The house rules of `npm run check` reach the Worker and its objects: a JSX component is measured from its first line
 * to its closing brace, and a long function in `workers/` or `durable-objects/` is a finding like one in `src/`.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import {
  houseRuleFindings,
  longFile,
  longFunctions,
  MAX_FUNCTION_LINES,
  MAX_OBJECT_FILE_LINES,
} from '../../offline/dev/house-rules.ts'

/**
 * A Hono JSX component of exactly `lines` lines: its list items hold `=>` and `{'…'}` in text, which a parser that
 * reads the file as plain TypeScript takes for arrow functions and type assertions, and so miscounts.
 */
function component(lines: number): string {
  const items = Array.from({ length: lines - 7 }, (_, i) => `      <li class="row">{items[${i}]} =&gt; {'x'}</li>`)
  return [
    'export const List: FC<{ items: string[] }> = ({ items }) => {',
    '  const first = items[0]',
    '  return (',
    '    <ul title={first}>',
    ...items,
    '    </ul>',
    '  )',
    '}',
    '',
  ].join('\n')
}

const scratch = mkdtempSync(join(tmpdir(), 'rh-house-rules-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('the file-length rule', () => {
  it(`holds files in durable-objects/ to ${MAX_OBJECT_FILE_LINES} lines`, () => {
    const lines = (n: number) => Array.from({ length: n }, (_, i) => `const v${i} = ${i}`).join('\n')
    expect(longFile('durable-objects/run-coordinator/a.ts', lines(MAX_OBJECT_FILE_LINES))).toEqual([])
    expect(longFile('durable-objects/run-coordinator/a.ts', lines(MAX_OBJECT_FILE_LINES + 1))).toEqual([
      {
        file: 'durable-objects/run-coordinator/a.ts',
        line: 301,
        message: '301 lines (at most 300 in durable-objects/)',
      },
    ])
    expect(houseRuleFindings(process.cwd(), ['durable-objects/'])).toEqual([])
    // Parsing the objects' sources takes seconds on a loaded 2-core machine.
  }, 30_000)
})

describe('the function-length rule', () => {
  it('counts a .tsx component from its first line to its closing brace', () => {
    expect(longFunctions('workers/dashboard/views/list.tsx', component(MAX_FUNCTION_LINES))).toEqual([])
    expect(longFunctions('workers/dashboard/views/list.tsx', component(MAX_FUNCTION_LINES + 1))).toEqual([
      { file: 'workers/dashboard/views/list.tsx', line: 1, message: `List: ${MAX_FUNCTION_LINES + 1} lines` },
    ])
  })

  it('holds in workers/ and durable-objects/ as in src/, for .ts and .tsx files', () => {
    const longBody = Array.from({ length: MAX_FUNCTION_LINES }, (_, i) => `  const v${i} = ${i}`).join('\n')
    const files: Record<string, string> = {
      'workers/dashboard/views/list.tsx': component(MAX_FUNCTION_LINES + 1),
      'durable-objects/run-coordinator/long.ts': `export function long() {\n${longBody}\n}\n`,
      'src/long.ts': `export function long() {\n${longBody}\n}\n`,
      'tests/long.ts': `export function long() {\n${longBody}\n}\n`,
    }
    execFileSync('git', ['init', '-q'], { cwd: scratch })
    for (const [file, text] of Object.entries(files)) {
      mkdirSync(dirname(join(scratch, file)), { recursive: true })
      writeFileSync(join(scratch, file), text)
    }
    execFileSync('git', ['add', '.'], { cwd: scratch })
    expect(houseRuleFindings(scratch).map(({ file, message }) => `${file}: ${message}`)).toEqual([
      'durable-objects/run-coordinator/long.ts: long: 82 lines',
      'src/long.ts: long: 82 lines',
      'workers/dashboard/views/list.tsx: List: 81 lines',
    ])
  })
})
