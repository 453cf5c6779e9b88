/**
 * `tsx offline/dev/long-functions.ts [dir…]`: lists every function, arrow function, method and accessor in src/
 * and offline/ (or the directories given) longer than 80 lines, as `file:line name (n lines)`, and exits 1 when
 * one is not on the allow-list below. A function a reader cannot hold at once should be split into named steps;
 * an entry here says why this one is not.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const MAX_LINES = 80

/** Functions allowed to stay long, by `file:name` (as printed), each with the reason. */
const ALLOWED: ReadonlyArray<{ at: string; reason: string }> = []

/** One function over the limit. */
export interface LongFunction {
  file: string
  line: number
  name: string
  lines: number
}

function nameOf(node: ts.Node, source: ts.SourceFile): string {
  if ((ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isAccessor(node)) && node.name)
    return node.name.getText(source)
  if (ts.isConstructorDeclaration(node)) return 'constructor'
  const parent = node.parent
  if (parent && ts.isVariableDeclaration(parent)) return parent.name.getText(source)
  if (parent && ts.isPropertyAssignment(parent)) return parent.name.getText(source)
  return '(anonymous)'
}

/**
 * The functions of one TypeScript file longer than `max` lines.
 * @example longFunctionsIn('offline/evolve/run.ts', readFileSync('offline/evolve/run.ts', 'utf8')) // []
 */
export function longFunctionsIn(file: string, text: string, max = MAX_LINES): LongFunction[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const found: LongFunction[] = []
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line
      const lines = end - start + 1
      if (lines > max) found.push({ file, line: start + 1, name: nameOf(node, source), lines })
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

function* typeScriptFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue
    const path = join(dir, entry.name)
    if (entry.isDirectory()) yield* typeScriptFiles(path)
    else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) yield path
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dirs = process.argv.length > 2 ? process.argv.slice(2) : ['src', 'offline']
  const allowed = new Set(ALLOWED.map((entry) => entry.at))
  let failing = 0
  for (const dir of dirs)
    for (const path of typeScriptFiles(join(ROOT, dir)))
      for (const found of longFunctionsIn(relative(ROOT, path), readFileSync(path, 'utf8'))) {
        const isAllowed = allowed.has(`${found.file}:${found.name}`)
        if (!isAllowed) failing++
        console.log(`${found.file}:${found.line} ${found.name} (${found.lines} lines)${isAllowed ? ' allowed' : ''}`)
      }
  process.exit(failing > 0 ? 1 : 0)
}
