/**
 * `npm run check` runs this after Biome and knip: the two house rules those tools do not check. No line over
 * {@link MAX_LINE} characters in a tracked source file (Biome wraps code, not comments or strings), and no function in
 * `src/` or `offline/` over {@link MAX_FUNCTION_LINES} lines. Prints each finding as `file:line` and exits 1 on any.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

export const MAX_LINE = 120
/** README.md and docs/ are read on a screen: prose may run longer than code, tables and commands not much. */
const MAX_DOC_LINE = 160
const DOCS = /^(README\.md|docs\/.*\.md)$/
export const MAX_FUNCTION_LINES = 80

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SOURCE = /\.(ts|tsx|js|mjs|py|sh)$/
/** Generated files and copied third-party data are not ours to wrap. */
const NOT_OURS = [/^worker-configuration\.d\.ts$/, /^prompts\/index\.ts$/, /(^|\/)fixtures\//]
const FUNCTION_ROOTS = ['src/', 'offline/']

/** One broken rule, as `file:line: what`. */
export interface Finding {
  file: string
  line: number
  message: string
}

/**
 * Lines of `text` longer than {@link MAX_LINE} characters.
 * @example longLines('a.ts', 'x'.repeat(121)) // [{ file: 'a.ts', line: 1, message: 'line of 121 characters' }]
 */
export function longLines(file: string, text: string, limit = MAX_LINE): Finding[] {
  return text
    .split('\n')
    .flatMap((line, index) =>
      line.length > limit ? [{ file, line: index + 1, message: `line of ${line.length} characters` }] : [],
    )
}

/**
 * Functions, methods and arrow functions of a TypeScript source longer than {@link MAX_FUNCTION_LINES} lines.
 * @example longFunctions('a.ts', source).map((finding) => finding.message) // ['runEvolve: 257 lines']
 */
export function longFunctions(file: string, text: string): Finding[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const findings: Finding[] = []
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line
      if (end - start + 1 > MAX_FUNCTION_LINES) {
        findings.push({ file, line: start + 1, message: `${functionName(node)}: ${end - start + 1} lines` })
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return findings
}

function functionName(node: ts.SignatureDeclaration): string {
  if (node.name && ts.isIdentifier(node.name)) return node.name.text
  const parent = node.parent
  if (parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text
  if (parent && ts.isPropertyAssignment(parent) && ts.isIdentifier(parent.name)) return parent.name.text
  return 'an anonymous function'
}

/**
 * Every finding in the tracked files of the checkout at `root`.
 * @example houseRuleFindings(process.cwd()).length // 0 on main
 */
export function houseRuleFindings(root: string): Finding[] {
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' })
    .split('\0')
    .filter((file) => (SOURCE.test(file) || DOCS.test(file)) && !NOT_OURS.some((pattern) => pattern.test(file)))
  return files.flatMap((file) => {
    const text = readFileSync(`${root}/${file}`, 'utf8')
    if (DOCS.test(file)) return longLines(file, text, MAX_DOC_LINE)
    const functions =
      /\.tsx?$/.test(file) && FUNCTION_ROOTS.some((prefix) => file.startsWith(prefix)) && !file.endsWith('.d.ts')
        ? longFunctions(file, text)
        : []
    return [...longLines(file, text), ...functions]
  })
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const findings = houseRuleFindings(ROOT)
  for (const { file, line, message } of findings) console.log(`${file}:${line}: ${message}`)
  if (findings.length > 0) {
    console.error(
      `${findings.length} house-rule finding(s): lines ≤ ${MAX_LINE} characters (${MAX_DOC_LINE} in README.md and ` +
        `docs/), functions ≤ ${MAX_FUNCTION_LINES} lines`,
    )
    process.exit(1)
  }
}
