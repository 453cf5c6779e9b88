/**
 * The evolution pipeline (RewardHarness §3, defects of §7 fixed): a seeded shuffled train/validation split, A/B
 * swap augmentation of the training items, then per iteration: judge the training set → Chain Analyzer → Evolver
 * (one add / modify / delete) → validate; the change is kept only when validation accuracy ≥ best − margin, else
 * rolled back (and the Evolver is told not to repeat it). `checkpoints/iter-<n>/` is the state after iteration n,
 * `checkpoints/best/` the best validated state. Leave-one-out pruning every `pruneEvery` iterations is gated the
 * same way. `evolution-log.jsonl` gets one line per iteration; per-item results go to `results/iter-<n>.jsonl`.
 * A run resumes from its log and checkpoints.
 *
 * Judging is in both orders by default (`orders: 'both'`): every item is judged as A/B and as B/A, and only agreeing
 * orders give a verdict; disagreement is counted as inconsistent (wrong for accuracy, never a tie). The B/A order is
 * what swap augmentation would add, so train is augmented only with `orders: 'one'`. A change that adds a tool or
 * changes a tool's prompt first passes the tool-prompt check (`checkToolPrompt` on `toolCheckSample` train items).
 * Every model call is counted per role (router, sub_agent, tool, chain_analyzer, evolver) in each log line and the
 * summary. Items may carry images (handles in `images`, resolved at call time).
 */
import { startProgress } from '../progress/index.ts'
import { appendFile, mkdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import pLimit from 'p-limit'
import { deleteEntry, emptyLibrary, entryList, type Library, libraryHash } from '../../src/library/index.ts'
import {
  analyzeChains,
  applyChange,
  changeKey,
  checkToolPrompt,
  ImageRegistry,
  type LibraryChange,
  type LibraryUsage,
  pairItems,
  proposeChange,
  RoleMeter,
  splitItems,
  swapAugment,
  type ToolCheck,
  toolsToCheck,
  usageSince,
} from '../../src/evolve/index.ts'
import {
  type BothOrdersOutcome,
  judgeBothOrders,
  judgeWithLibrary,
  type JudgeOptions,
  LibraryRouter,
  type PairItem,
} from '../../src/evolve/judge.ts'
import type { ChatModel, LibraryChainResult } from '../../src/llm/types.ts'
import type { PreferenceDataset } from '../../src/search/types.ts'
import { checkpoint, loadLibrary } from '../library/index.ts'
import { writeFileAtomic } from '../search/atomic.ts'
import { UsageError } from '../../src/usage-error/index.ts'

export interface EvolveOptions {
  model: ChatModel
  dataset: PreferenceDataset
  /** SHA-256 of the dataset file: a resumed run must use the same data. */
  datasetSha256: string
  outDir: string
  /** Evolution iterations after the baseline (iteration 0). */
  iterations: number
  seed?: number
  valFraction?: number
  exploreMargin?: number
  /** Leave-one-out pruning every K iterations; 0 = never. */
  pruneEvery?: number
  /** Library to start from (a directory); empty by default. */
  initialLibrary?: Library
  concurrency?: number
  judge?: JudgeOptions
  /** `both` (default): judge A/B and B/A, a verdict only when they agree; `one`: A/B only, with swap-augmented train. */
  orders?: JudgeOrders
  /** Train items a new or modified tool prompt is exercised on before validation (default 4; 0 = no check). */
  toolCheckSample?: number
  /** The handle registry the dataset's images go to (path images need one that reads files: see images.ts here). */
  images?: ImageRegistry
  log?: (line: string) => void
  /** Show each evaluation's judged pairs on stderr (the shared progress display). */
  showProgress?: boolean
}

export type JudgeOrders = 'both' | 'one'

/** `rejected`: the change failed the tool-prompt check and was never validated. */
export type Decision = 'baseline' | 'kept' | 'rolled_back' | 'skipped' | 'rejected'

/** How items were judged: verdicts, order disagreements and failures. */
export interface JudgingCounts {
  judged: number
  consistent: number
  /** Both orders answered but disagreed (always 0 with one order). */
  inconsistent: number
  failures: number
}

export interface EvolutionLogEntry {
  iteration: number
  change: { key: string; op: string; rationale: string } | null
  decision: Decision
  train_accuracy: number | null
  val_accuracy: number | null
  /** Validation accuracy of the state the iteration ends with. */
  state_val_accuracy: number
  best_val_accuracy: number
  best_iteration: number
  /** Content hash of checkpoints/best when this line was written; resume repairs a best dir that disagrees. */
  best_library_sha256: string
  failures: { train: number; val: number }
  /** Items whose two orders disagreed (train, val); counted wrong, never ties. */
  inconsistent: { train: number; val: number }
  /** Tool sub-calls made while judging (train, val). */
  tool_calls: { train: number; val: number }
  /** The tool-prompt check of a change that adds a tool or changes a tool's prompt. */
  tool_check?: ToolCheck[]
  /** Model calls and tokens of this iteration, per role. */
  usage: LibraryUsage
  analysis_summary?: string
  note?: string
  pruned?: { removed: string[]; decision: 'kept' | 'rolled_back'; val_accuracy: number } | null
  entries: string[]
  library_sha256: string
  settings: {
    seed: number
    val_fraction: number
    explore_margin: number
    prune_every: number
    dataset_sha256: string
    train: number
    validation: number
    orders: JudgeOrders
    tool_check_sample: number
    images: number
  }
  timestamp: string
}

export interface EvolveSummary {
  out_dir: string
  iterations_done: number
  resumed_from: number | null
  best_iteration: number
  best_val_accuracy: number
  best_dir: string
  log: string
  entries: string[]
  /** Router calls (cache misses) and the ones that failed after retries (their judgments used no entries). */
  router: { calls: number; failures: number }
  orders: JudgeOrders
  /** Judgments made by this invocation (train and validation, pruning included). */
  judging: JudgingCounts
  /** Model calls and tokens of this invocation per role: router, sub_agent, tool, chain_analyzer, evolver, total. */
  usage: LibraryUsage
}

export class EvolveInputError extends UsageError {}

interface Evaluation {
  accuracy: number
  failures: number
  inconsistent: number
  toolCalls: number
  results: (LibraryChainResult & {
    failure?: string
    verdict: BothOrdersOutcome['verdict']
    orders?: BothOrdersOutcome['orders']
  })[]
}

/**
 * Runs (or resumes) an evolution into `outDir`.
 * @example const summary = await runEvolve({ model: new MockChatModel(), dataset, datasetSha256, outDir: 'runs/a', iterations: 3 })
 */
export async function runEvolve(options: EvolveOptions): Promise<EvolveSummary> {
  const seed = options.seed ?? 42
  const valFraction = options.valFraction ?? 0.34
  const margin = options.exploreMargin ?? 0.075
  const pruneEvery = options.pruneEvery ?? 0
  const orders = options.orders ?? 'both'
  const toolCheckSample = options.toolCheckSample ?? 4
  const say = options.log ?? (() => {})
  const registry = options.images ?? new ImageRegistry()
  const items = pairItems(options.dataset, registry)
  if (items.length < 2)
    throw new EvolveInputError('the dataset needs at least 2 pairwise items (prompts with exactly 2 ranked candidates)')
  const split = splitItems(items, seed, valFraction)
  const train = orders === 'both' ? split.train : swapAugment(split.train)
  const validation = split.validation
  const settings = {
    seed,
    val_fraction: valFraction,
    explore_margin: margin,
    prune_every: pruneEvery,
    dataset_sha256: options.datasetSha256,
    train: train.length,
    validation: validation.length,
    orders,
    tool_check_sample: toolCheckSample,
    images: registry.entries().length,
  }
  const meter = new RoleMeter()
  const model = meter.wrap(options.model)
  const judge: JudgeOptions = { ...options.judge, images: registry }
  const router = new LibraryRouter(model, judge)
  const limit = pLimit(options.concurrency ?? 4)
  const judging: JudgingCounts = { judged: 0, consistent: 0, inconsistent: 0, failures: 0 }
  let iterationStart = meter.usage()
  /** Usage since the last call: one iteration's cost. */
  const iterationUsage = () => {
    const now = meter.usage()
    const spent = usageSince(now, iterationStart)
    iterationStart = now
    return spent
  }
  const logPath = join(options.outDir, 'evolution-log.jsonl')
  const checkpoints = join(options.outDir, 'checkpoints')
  await mkdir(options.outDir, { recursive: true })

  /** One item, in one or both orders, as a both-orders outcome (one order: its verdict is the A/B answer). */
  const judgeItem = async (library: Library, item: PairItem): Promise<BothOrdersOutcome> => {
    const routed = await router.route(library, item.instruction)
    if (orders === 'both') return judgeBothOrders(model, library, routed, item, judge)
    const outcome = await judgeWithLibrary(model, library, routed, item, judge)
    const common = { chain: outcome.chain, tool_calls: outcome.tool_calls, entries: outcome.entries }
    return outcome.ok
      ? {
          verdict: 'consistent',
          preference: outcome.preference,
          orders: { ab: outcome.preference, ba: null },
          ...common,
        }
      : { verdict: 'failure', preference: null, failure: outcome.failure, orders: { ab: null, ba: null }, ...common }
  }
  const evaluate = async (library: Library, set: readonly PairItem[]): Promise<Evaluation> => {
    const progress = options.showProgress ? startProgress({ label: 'judging pairs', total: set.length }) : undefined
    let judged = 0
    const outcomes = await Promise.all(
      set.map((item) =>
        limit(async () => {
          try {
            return await judgeItem(library, item)
          } finally {
            progress?.update(++judged)
          }
        }),
      ),
    ).finally(() => progress?.stop())
    const results = set.map((item, index) => {
      const outcome = outcomes[index]!
      const prediction = outcome.verdict === 'inconsistent' ? 'inconsistent' : outcome.preference
      return {
        id: item.id,
        instruction: item.instruction,
        label: item.label,
        prediction,
        correct: outcome.verdict === 'consistent' && prediction === item.label,
        chain: outcome.chain,
        verdict: outcome.verdict,
        ...(orders === 'both' ? { orders: outcome.orders } : {}),
        ...(outcome.failure === undefined ? {} : { failure: outcome.failure }),
      }
    })
    const correct = results.filter((result) => result.correct).length
    const toolCalls = outcomes.reduce((sum, outcome) => sum + outcome.tool_calls, 0)
    const count = (verdict: BothOrdersOutcome['verdict']) =>
      results.filter((result) => result.verdict === verdict).length
    judging.judged += results.length
    judging.consistent += count('consistent')
    judging.inconsistent += count('inconsistent')
    judging.failures += count('failure')
    return {
      accuracy: set.length ? correct / set.length : 0,
      failures: count('failure'),
      inconsistent: count('inconsistent'),
      toolCalls,
      results,
    }
  }
  const writeResults = (iteration: number, name: string, evaluation: Evaluation) =>
    writeFileAtomic(
      join(options.outDir, 'results', `iter-${iteration}.${name}.jsonl`),
      evaluation.results.map((result) => JSON.stringify(result)).join('\n') + '\n',
    )
  const append = async (entry: EvolutionLogEntry) => appendFile(logPath, JSON.stringify(entry) + '\n', 'utf8')

  // Resume or baseline.
  const previous = await readLog(logPath)
  let current: Library
  let currentVal: number
  let best: number
  let bestIteration: number
  let start: number
  const rejected: string[] = []
  let resumedFrom: number | null = null
  let bestHash = ''
  const saveBest = async (library: Library) => {
    await checkpoint(library, join(checkpoints, 'best'))
    bestHash = await libraryHash(library)
  }
  if (previous.length > 0) {
    const last = previous[previous.length - 1]!
    // Logs written before judging in both orders existed judged one order.
    const was = { ...last.settings, orders: last.settings.orders ?? 'one' }
    for (const key of ['seed', 'val_fraction', 'dataset_sha256', 'orders'] as const) {
      if (was[key] !== settings[key])
        throw new EvolveInputError(
          `cannot resume ${options.outDir}: ${key} was ${JSON.stringify(was[key])}, now ${JSON.stringify(settings[key])}`,
        )
    }
    current = await loadLibrary(join(checkpoints, `iter-${last.iteration}`))
    currentVal = last.state_val_accuracy
    best = last.best_val_accuracy
    bestIteration = last.best_iteration
    bestHash = last.best_library_sha256
    // A crash between writing checkpoints/best and the log line leaves a best dir the log does not know: restore it.
    const onDisk = await loadLibrary(join(checkpoints, 'best')).then(libraryHash, () => '')
    if (onDisk !== bestHash) {
      const source = await loadLibrary(join(checkpoints, `iter-${bestIteration}`))
      if ((await libraryHash(source)) !== bestHash)
        throw new EvolveInputError(
          `cannot resume ${options.outDir}: checkpoints/best does not match the log and iter-${bestIteration} cannot restore it`,
        )
      await saveBest(source)
      say(`restored checkpoints/best from iter-${bestIteration}`)
    }
    for (const entry of previous)
      if ((entry.decision === 'rolled_back' || entry.decision === 'rejected') && entry.change)
        rejected.push(entry.change.key)
    start = last.iteration + 1
    resumedFrom = last.iteration
    say(`resuming after iteration ${last.iteration} (best val ${best.toFixed(3)} at iteration ${bestIteration})`)
  } else {
    current = options.initialLibrary ?? emptyLibrary('evolved')
    const trainEval = await evaluate(current, train)
    const valEval = await evaluate(current, validation)
    await writeResults(0, 'train', trainEval)
    await writeResults(0, 'val', valEval)
    currentVal = best = valEval.accuracy
    bestIteration = 0
    await checkpoint(current, join(checkpoints, 'iter-0'))
    await saveBest(current)
    await append(
      await logEntry(
        0,
        null,
        'baseline',
        trainEval.accuracy,
        valEval.accuracy,
        { train: trainEval.failures, val: valEval.failures },
        {
          inconsistent: { train: trainEval.inconsistent, val: valEval.inconsistent },
          tool_calls: { train: trainEval.toolCalls, val: valEval.toolCalls },
        },
      ),
    )
    say(
      `iteration 0: baseline train ${trainEval.accuracy.toFixed(3)} val ${valEval.accuracy.toFixed(3)} (failures ${trainEval.failures}/${valEval.failures}, inconsistent ${trainEval.inconsistent}/${valEval.inconsistent})`,
    )
    start = 1
  }

  async function logEntry(
    iteration: number,
    change: LibraryChange | null,
    decision: Decision,
    trainAcc: number | null,
    valAcc: number | null,
    failures: { train: number; val: number },
    extra: Partial<EvolutionLogEntry> = {},
  ): Promise<EvolutionLogEntry> {
    return {
      iteration,
      change: change ? { key: changeKey(change), op: change.op, rationale: change.rationale } : null,
      decision,
      train_accuracy: trainAcc,
      val_accuracy: valAcc,
      state_val_accuracy: currentVal,
      best_val_accuracy: best,
      best_iteration: bestIteration,
      best_library_sha256: bestHash,
      failures,
      inconsistent: { train: 0, val: 0 },
      tool_calls: { train: 0, val: 0 },
      ...extra,
      usage: iterationUsage(),
      entries: entryList(current).map((entry) => entry.name),
      library_sha256: await libraryHash(current),
      settings,
      timestamp: new Date().toISOString(),
    }
  }

  for (let iteration = start; iteration <= options.iterations; iteration++) {
    const trainEval = await evaluate(current, train)
    await writeResults(iteration, 'train', trainEval)
    let change: LibraryChange | null = null
    let decision: Decision = 'skipped'
    let valAcc: number | null = null
    let valFailures = 0
    let valInconsistent = 0
    let valToolCalls = 0
    let toolCheck: ToolCheck[] | undefined
    let note: string | undefined
    let summary: string | undefined
    try {
      const analysis = await analyzeChains(model, current, trainEval.results, judge)
      summary = analysis.summary
      change = await proposeChange(model, current, analysis.signals, rejected, judge)
    } catch (error) {
      note = `analyzer/evolver failed: ${error instanceof Error ? error.message : String(error)}`
    }
    if (change && change.op !== 'none') {
      let candidate: Library | undefined
      try {
        candidate = applyChange(current, change)
      } catch (error) {
        note = `invalid change ${changeKey(change)}: ${(error as Error).message}`
        rejected.push(changeKey(change))
      }
      const checked = candidate && toolCheckSample > 0 ? toolsToCheck(current, change) : []
      if (candidate && checked.length > 0) {
        const sample = train.slice(0, toolCheckSample)
        toolCheck = await Promise.all(checked.map((tool) => checkToolPrompt(model, candidate!, tool, sample, judge)))
        const failed = toolCheck.filter((check) => !check.passed)
        if (failed.length > 0) {
          decision = 'rejected'
          rejected.push(changeKey(change))
          note = `rejected by the tool-prompt check: ${failed.map((check) => `${check.tool} replied JSON on ${check.json} of ${check.sampled} sample calls`).join('; ')}`
          candidate = undefined
        }
      }
      if (candidate) {
        const valEval = await evaluate(candidate, validation)
        await writeResults(iteration, 'val', valEval)
        valAcc = valEval.accuracy
        valFailures = valEval.failures
        valInconsistent = valEval.inconsistent
        valToolCalls = valEval.toolCalls
        if (valAcc >= best - margin) {
          decision = 'kept'
          current = candidate
          currentVal = valAcc
          if (valAcc > best) {
            best = valAcc
            bestIteration = iteration
            await saveBest(current)
          }
        } else {
          decision = 'rolled_back'
          rejected.push(changeKey(change))
          note = `rolled back: val ${valAcc.toFixed(3)} < best ${best.toFixed(3)} - margin ${margin}`
        }
      }
    } else if (change) note = note ?? `no change proposed: ${change.rationale}`

    let pruned: EvolutionLogEntry['pruned'] = null
    if (pruneEvery > 0 && iteration % pruneEvery === 0 && Object.keys(current.entries).length > 0)
      pruned = await prune(iteration)
    await checkpoint(current, join(checkpoints, `iter-${iteration}`))
    await append(
      await logEntry(
        iteration,
        change,
        decision,
        trainEval.accuracy,
        valAcc,
        { train: trainEval.failures, val: valFailures },
        {
          inconsistent: { train: trainEval.inconsistent, val: valInconsistent },
          tool_calls: { train: trainEval.toolCalls, val: valToolCalls },
          ...(toolCheck ? { tool_check: toolCheck } : {}),
          ...(summary !== undefined ? { analysis_summary: summary } : {}),
          ...(note ? { note } : {}),
          pruned,
        },
      ),
    )
    say(
      `iteration ${iteration}: ${change ? changeKey(change) : 'no change'} → ${decision}${valAcc === null ? '' : ` (val ${valAcc.toFixed(3)}, best ${best.toFixed(3)})`}${note ? `; ${note}` : ''}`,
    )
  }

  /** Leave-one-out: entries whose removal does not lower validation accuracy are removed together, gated like a change. */
  async function prune(iteration: number): Promise<NonNullable<EvolutionLogEntry['pruned']>> {
    const removable: string[] = []
    for (const entry of entryList(current)) {
      const ablated = await evaluate(deleteEntry(current, entry.name), validation)
      if (ablated.accuracy >= currentVal) removable.push(entry.name)
    }
    if (removable.length === 0) return { removed: [], decision: 'kept', val_accuracy: currentVal }
    const candidate = removable.reduce((library, name) => deleteEntry(library, name), current)
    const valEval = await evaluate(candidate, validation)
    if (valEval.accuracy >= best - margin) {
      current = candidate
      currentVal = valEval.accuracy
      if (valEval.accuracy > best) {
        best = valEval.accuracy
        bestIteration = iteration
        await saveBest(current)
      }
      return { removed: removable, decision: 'kept', val_accuracy: valEval.accuracy }
    }
    return { removed: removable, decision: 'rolled_back', val_accuracy: valEval.accuracy }
  }

  return {
    out_dir: options.outDir,
    iterations_done: options.iterations,
    resumed_from: resumedFrom,
    best_iteration: bestIteration,
    best_val_accuracy: best,
    best_dir: join(checkpoints, 'best'),
    log: logPath,
    entries: entryList(current).map((entry) => entry.name),
    router: { calls: router.calls, failures: router.failures },
    orders,
    judging,
    usage: meter.usage(),
  }
}

/**
 * The entries of an evolution log; a torn last line (a crash mid-write) is ignored.
 * @example (await readLog('runs/a/evolution-log.jsonl')).at(-1)?.best_val_accuracy
 */
export async function readLog(path: string): Promise<EvolutionLogEntry[]> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw error
  }
  const entries: EvolutionLogEntry[] = []
  for (const line of text.split('\n')) {
    if (!line.trim()) continue
    try {
      entries.push(JSON.parse(line) as EvolutionLogEntry)
    } catch {
      break
    }
  }
  return entries
}
