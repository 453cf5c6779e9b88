/**
 * Finds out what the report was pointed at, from content rather than names: a search output (JSON with
 * `best_rubrics`), an evolution log (JSONL lines with `iteration` and `decision`; or a run directory holding
 * `evolution-log.jsonl`), or bench results (`reward-harness bench --json`: one file, or a directory of them,
 * one subset each). Anything else is a UsageError saying what was looked for.
 */
import { readdir, readFile, stat } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { type Library, libraryHash } from '../../src/library/index.ts'
import { loadLibrary } from '../library/index.ts'
import { BenchReport, DistillSummary, EvolutionLogEntry, SearchOutputFile } from '../../src/schemas/index.ts'
import { firstIssue } from './schemas.ts'
import { UsageError } from '../../src/usage-error/index.ts'

/** A library read from a checkpoint directory next to an evolution log. */
export interface LoadedLibrary {
  dir: string
  library: Library
}

/** What `detectReportInput` found. */
export type ReportInput =
  | { kind: 'search'; path: string; output: SearchOutputFile }
  | {
      kind: 'evolve'
      path: string
      log: EvolutionLogEntry[]
      finalLibrary: LoadedLibrary | null
      bestLibrary: LoadedLibrary | null
    }
  | { kind: 'bench'; path: string; results: Array<{ file: string; result: BenchReport }> }
  | { kind: 'distill'; path: string; summary: DistillSummary }

export type ReportKind = ReportInput['kind']

/** How each kind is named in messages and on the page. */
export const KIND_LABELS: Record<ReportKind, string> = {
  search: 'search output',
  evolve: 'evolution log',
  bench: 'bench result',
  distill: 'distill summary',
}

const EXPECTED =
  'expected a search output (reward-harness search --output, JSON with "best_rubrics"), an evolution log ' +
  '(evolution-log.jsonl of reward-harness evolve, or its run directory), a bench result (reward-harness bench ' +
  '--json) ' +
  'or a distill summary (summary.json of reward-harness distill), or a directory holding one of them'

const EVOLUTION_LOG = 'evolution-log.jsonl'

type Classified =
  | { kind: 'search'; output: SearchOutputFile }
  | { kind: 'bench'; result: BenchReport }
  | { kind: 'evolve'; log: EvolutionLogEntry[] }
  | { kind: 'distill'; summary: DistillSummary }
  | { kind: null; why: string }

/**
 * Reads `path` (a file or a directory) and says which input it is, with the parsed content.
 * @example const input = await detectReportInput('out/best.json'); input.kind // 'search'
 */
export async function detectReportInput(path: string): Promise<ReportInput> {
  const absolute = resolve(path)
  const info = await stat(absolute).catch((error: NodeJS.ErrnoException) => {
    throw new UsageError(
      error.code === 'ENOENT'
        ? `${path}: no such file or directory`
        : `${path}: cannot read (${error.code ?? error.message})`,
    )
  })
  if (info.isDirectory()) return detectDirectory(absolute, path)
  const classified = classify(await readText(absolute, path), path)
  switch (classified.kind) {
    case 'search':
      return { kind: 'search', path: absolute, output: classified.output }
    case 'bench':
      return { kind: 'bench', path: absolute, results: [{ file: absolute, result: classified.result }] }
    case 'evolve':
      return evolveInput(absolute, classified.log)
    case 'distill':
      return { kind: 'distill', path: absolute, summary: classified.summary }
    default:
      throw new UsageError(`${path}: not a recognised input (${classified.why}); ${EXPECTED}`)
  }
}

async function detectDirectory(directory: string, shown: string): Promise<ReportInput> {
  const names = (await readdir(directory, { withFileTypes: true }))
    .filter((entry) => entry.isFile())
    .map((entry) => entry.name)
    .sort()
  if (names.includes(EVOLUTION_LOG)) {
    const file = join(directory, EVOLUTION_LOG)
    const classified = classify(await readText(file, join(shown, EVOLUTION_LOG)), join(shown, EVOLUTION_LOG))
    if (classified.kind !== 'evolve')
      throw new UsageError(
        `${join(shown, EVOLUTION_LOG)}: not an evolution log ` +
          `(${classified.kind === null ? classified.why : `it is a ${KIND_LABELS[classified.kind]}`})`,
      )
    return evolveInput(file, classified.log)
  }
  const searches: Array<{ file: string; output: SearchOutputFile }> = []
  const benches: Array<{ file: string; result: BenchReport }> = []
  for (const name of names.filter((name) => name.toLowerCase().endsWith('.json'))) {
    const file = join(directory, name)
    const classified = classify(await readText(file, join(shown, name)), join(shown, name))
    if (classified.kind === 'search') searches.push({ file, output: classified.output })
    else if (classified.kind === 'bench') benches.push({ file, result: classified.result })
    else if (classified.kind === 'distill') return { kind: 'distill', path: file, summary: classified.summary }
  }
  if (searches.length > 0 && benches.length > 0) {
    throw new UsageError(
      `${shown}: holds both search outputs (${searches.map((entry) => basename(entry.file)).join(', ')}) and bench ` +
        `results (${benches.map((entry) => basename(entry.file)).join(', ')}); pass one file`,
    )
  }
  if (searches.length > 1)
    throw new UsageError(
      `${shown}: holds ${searches.length} search outputs ` +
        `(${searches.map((entry) => basename(entry.file)).join(', ')}); pass one of them`,
    )
  if (searches.length === 1) return { kind: 'search', path: searches[0]!.file, output: searches[0]!.output }
  if (benches.length > 0) return { kind: 'bench', path: directory, results: benches }
  throw new UsageError(`${shown}: no search output, ${EVOLUTION_LOG} or bench result in this directory; ${EXPECTED}`)
}

async function readText(file: string, shown: string): Promise<string> {
  try {
    return await readFile(file, 'utf8')
  } catch (error) {
    throw new UsageError(`${shown}: cannot read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
  }
}

/**
 * Which input a file's text is; a file that is clearly meant as one kind but malformed is refused with the field named.
 */
function classify(text: string, shown: string): Classified {
  if (!text.trim()) return { kind: null, why: 'the file is empty' }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return classifyLines(text, shown)
  }
  if (!value || typeof value !== 'object' || Array.isArray(value))
    return { kind: null, why: `it is JSON but not an object` }
  const record = value as Record<string, unknown>
  if ('best_rubrics' in record) {
    const parsed = SearchOutputFile.safeParse(record)
    if (!parsed.success)
      throw new UsageError(
        `${shown}: looks like a search output (it has "best_rubrics") but ${firstIssue(parsed.error)}`,
      )
    return { kind: 'search', output: parsed.data }
  }
  if (record.kind === 'distill_summary') {
    const parsed = DistillSummary.safeParse(record)
    if (!parsed.success)
      throw new UsageError(
        `${shown}: looks like a distill summary (its kind is "distill_summary") but ${firstIssue(parsed.error)}`,
      )
    return { kind: 'distill', summary: parsed.data }
  }
  if ('overall' in record && 'scorer' in record) {
    const parsed = BenchReport.safeParse(record)
    if (!parsed.success)
      throw new UsageError(
        `${shown}: looks like a bench result (it has "overall" and "scorer") but ${firstIssue(parsed.error)}`,
      )
    return { kind: 'bench', result: parsed.data }
  }
  // A single-line evolution log is valid JSON too.
  if ('iteration' in record && 'decision' in record) return classifyLines(text, shown)
  return {
    kind: null,
    why: `a JSON object with keys ${
      Object.keys(record)
        .slice(0, 6)
        .map((key) => JSON.stringify(key))
        .join(', ') || '(none)'
    }`,
  }
}

/**
 * JSONL: an evolution log when its first line has `iteration` and `decision`. A torn last line is ignored, as `evolve`
 * does.
 */
function classifyLines(text: string, shown: string): Classified {
  const lines = text.split('\n')
  const log: EvolutionLogEntry[] = []
  for (const [index, line] of lines.entries()) {
    if (!line.trim()) continue
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch {
      if (log.length === 0) return { kind: null, why: `line ${index + 1} is not JSON` }
      if (lines.slice(index + 1).some((rest) => rest.trim()))
        throw new UsageError(`${shown}: line ${index + 1} of the evolution log is not JSON`)
      break
    }
    const record = value && typeof value === 'object' ? (value as Record<string, unknown>) : {}
    if (log.length === 0 && !('iteration' in record && 'decision' in record))
      return { kind: null, why: 'JSON lines without "iteration" and "decision"' }
    const parsed = EvolutionLogEntry.safeParse(record)
    if (!parsed.success)
      throw new UsageError(`${shown}: line ${index + 1} of the evolution log: ${firstIssue(parsed.error)}`)
    log.push(parsed.data)
  }
  return log.length ? { kind: 'evolve', log } : { kind: null, why: 'no JSON lines' }
}

/**
 * An evolution log plus the libraries `evolve` checkpointed next to it, each only when its content hash is the
 * one the log's last line recorded (a missing, stale or foreign checkpoint is left out rather than shown as final).
 */
async function evolveInput(file: string, log: EvolutionLogEntry[]): Promise<ReportInput> {
  const checkpoints = join(dirname(file), 'checkpoints')
  const load = async (
    name: string,
    sha256: string | undefined,
    names: string[] | null,
  ): Promise<LoadedLibrary | null> => {
    const dir = join(checkpoints, name)
    const library = await loadLibrary(dir).catch(() => null)
    if (!library) return null
    const matches = sha256
      ? (await libraryHash(library)) === sha256
      : names !== null && Object.keys(library.entries).sort().join() === [...names].sort().join()
    return matches ? { dir, library } : null
  }
  const last = log.at(-1)!
  return {
    kind: 'evolve',
    path: file,
    log,
    finalLibrary: await load(`iter-${last.iteration}`, last.library_sha256, last.entries),
    bestLibrary: await load('best', last.best_library_sha256, null),
  }
}
