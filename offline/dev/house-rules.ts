/**
 * `npm run check` runs this after Biome and knip: the house rules those tools do not check. No line over
 * {@link MAX_LINE} characters in a tracked source file (Biome wraps code, not comments or strings), no function in
 * {@link FUNCTION_ROOTS} over {@link MAX_FUNCTION_LINES} lines, and no import from a lower layer into a higher one
 * ({@link LAYERS}). Prints each finding as `file:line` and exits 1 on any.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

export const MAX_LINE = 120
/** README.md and docs/ are read on a screen: prose may run longer than code, tables and commands not much. */
const MAX_DOC_LINE = 160
const DOCS = /^(README\.md|docs\/.*\.md)$/
export const MAX_FUNCTION_LINES = 80
/**
 * A Durable Object's file is held in one's head whole (STYLE.md: each concern of an object a module of its folder):
 * none in durable-objects/ is longer.
 */
export const MAX_OBJECT_FILE_LINES = 300
const OBJECT_FILES = /^durable-objects\/.*\.ts$/

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SOURCE = /\.(ts|tsx|js|mjs|py|sh)$/
/** Generated files and copied third-party data are not ours to wrap. */
const NOT_OURS = [/^worker-configuration\.d\.ts$/, /^prompts\/index\.ts$/, /(^|\/)fixtures\//]
/** Where the function-length rule holds: every tree of the service's own code, the dashboard's JSX included. */
const FUNCTION_ROOTS = ['src/', 'durable-objects/', 'workers/', 'offline/']
/**
 * The layers, lowest first, each one or more path prefixes: a file may import from its own layer and the ones below
 * it (the longest prefix that matches names a file's layer). The core at the bottom — inside it the leaf helpers
 * (hash, text: they import nothing from src/), then the schemas (one schema per shape, imported everywhere, so they
 * import no domain module), then the rest of src/ — the Durable Objects above it, the Worker above its objects, and
 * the CLI and the benches on top.
 */
export const LAYERS: readonly (readonly string[])[] = [
  ['src/hash/', 'src/text/'],
  ['src/schemas/'],
  ['src/'],
  ['durable-objects/'],
  ['workers/'],
  ['offline/'],
  ['bench/'],
]

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
  // A .tsx file parsed as .ts reads `<div>` as a type assertion and a component's extent goes wrong: say which.
  const kind = file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind)
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

/**
 * Imports of a TypeScript source that reach into a higher layer than the file's own, by the path they name.
 * @example layerViolations('src/schemas/a.ts', "import { x } from '../scoring/x.ts'") // one finding
 */
export function layerViolations(file: string, text: string): Finding[] {
  const own = layerOf(file)
  if (own === undefined) return []
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const findings: Finding[] = []
  for (const statement of source.statements) {
    const specifier =
      (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) &&
      statement.moduleSpecifier &&
      ts.isStringLiteral(statement.moduleSpecifier)
        ? statement.moduleSpecifier.text
        : undefined
    if (!specifier?.startsWith('.')) continue
    const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier))
    const layer = layerOf(target)
    if (layer !== undefined && layer > own) {
      const line = source.getLineAndCharacterOfPosition(statement.getStart(source)).line + 1
      findings.push({ file, line, message: `imports ${target}, above its own layer` })
    }
  }
  return findings
}

function layerOf(file: string): number | undefined {
  // The longest prefix names the layer; anything else (tests, config) has none.
  const matching = LAYERS.flatMap((prefixes, layer) =>
    prefixes.filter((prefix) => file.startsWith(prefix)).map((prefix) => ({ prefix, layer })),
  ).sort((a, b) => b.prefix.length - a.prefix.length)[0]
  return matching?.layer
}

function functionName(node: ts.SignatureDeclaration): string {
  if (node.name && ts.isIdentifier(node.name)) return node.name.text
  const parent = node.parent
  if (parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text
  if (parent && ts.isPropertyAssignment(parent) && ts.isIdentifier(parent.name)) return parent.name.text
  return 'an anonymous function'
}

/**
 * A file longer than `limit` lines, as one finding at its first line past it.
 * @example longFile('durable-objects/a.ts', 'x\n'.repeat(301), 300) // [{ file, line: 301, message: '302 lines' }]
 */
export function longFile(file: string, text: string, limit = MAX_OBJECT_FILE_LINES): Finding[] {
  const lines = text.split('\n').length
  if (lines <= limit) return []
  return [{ file, line: limit + 1, message: `${lines} lines (at most ${limit} in durable-objects/)` }]
}

/**
 * Every finding in the tracked files of the checkout at `root`, or in those under the folders `paths` names.
 * @example houseRuleFindings(process.cwd()).length // 0 on main
 * @example houseRuleFindings(process.cwd(), ['durable-objects/']) // the objects' findings only
 */
export function houseRuleFindings(root: string, paths: readonly string[] = []): Finding[] {
  const files = execFileSync('git', ['ls-files', '-z', '--', ...paths], { cwd: root, encoding: 'utf8' })
    .split('\0')
    .filter((file) => (SOURCE.test(file) || DOCS.test(file)) && !NOT_OURS.some((pattern) => pattern.test(file)))
  return files.flatMap((file) => {
    const text = readFileSync(`${root}/${file}`, 'utf8')
    if (DOCS.test(file)) return longLines(file, text, MAX_DOC_LINE)
    const typescript = /\.tsx?$/.test(file) && !file.endsWith('.d.ts')
    const functions =
      typescript && FUNCTION_ROOTS.some((prefix) => file.startsWith(prefix)) ? longFunctions(file, text) : []
    const length = OBJECT_FILES.test(file) ? longFile(file, text) : []
    return [...longLines(file, text), ...functions, ...length, ...(typescript ? layerViolations(file, text) : [])]
  })
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const findings = houseRuleFindings(ROOT)
  for (const { file, line, message } of findings) console.log(`${file}:${line}: ${message}`)
  if (findings.length > 0) {
    console.error(
      `${findings.length} house-rule finding(s): lines ≤ ${MAX_LINE} characters (${MAX_DOC_LINE} in README.md and ` +
        `docs/), functions ≤ ${MAX_FUNCTION_LINES} lines, files in durable-objects/ ≤ ${MAX_OBJECT_FILE_LINES} ` +
        'lines, ' +
        'imports only from the same or a lower layer ' +
        `(${LAYERS.map((prefixes) => prefixes.join(' ')).join(' < ')})`,
    )
    process.exit(1)
  }
}
