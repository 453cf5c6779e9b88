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
import type { LibraryChainResult } from '../../src/evolve/views.ts'
import type { ChatModel } from '../../src/llm/types.ts'
import { type EvolveDecision, EvolutionLogEntry, type JudgeOrders } from '../../src/schemas/index.ts'
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
  /**
   * `both` (default): judge A/B and B/A, a verdict only when they agree; `one`: A/B only, with swap-augmented train.
   */
  orders?: JudgeOrders
  /** Train items a new or modified tool prompt is exercised on before validation (default 4; 0 = no check). */
  toolCheckSample?: number
  /** The handle registry the dataset's images go to (path images need one that reads files: see images.ts here). */
  images?: ImageRegistry
  log?: (line: string) => void
  /** Show each evaluation's judged pairs on stderr (the shared progress display). */
  showProgress?: boolean
}

/** How items were judged: verdicts, order disagreements and failures. */
interface JudgingCounts {
  judged: number
  consistent: number
  /** Both orders answered but disagreed (always 0 with one order). */
  inconsistent: number
  failures: number
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
 * @example const summary = await runEvolve({ model: new MockChatModel(), dataset, datasetSha256, outDir: 'runs/a',
 *   iterations: 3 })
 */
export async function runEvolve(options: EvolveOptions): Promise<EvolveSummary> {
  const run = new EvolutionRun(options)
  await mkdir(options.outDir, { recursive: true })
  const previous = await readLog(run.logPath)
  const start = previous.length > 0 ? await run.resume(previous) : await run.baseline()
  for (let iteration = start; iteration <= options.iterations; iteration++) await run.iterate(iteration)
  return run.summary()
}

/** What one iteration's proposed change came to. */
interface ChangeOutcome {
  decision: EvolveDecision
  validation: Evaluation | null
  toolCheck?: ToolCheck[]
  note?: string
}

/**
 * One evolution run: its settings and components, and the state it evolves (the current library, the best one, the
 * changes not to propose again). Each step of the loop is a method.
 */
class EvolutionRun {
  readonly logPath: string
  private readonly checkpoints: string
  private readonly say: (line: string) => void
  private readonly margin: number
  private readonly pruneEvery: number
  private readonly toolCheckSample: number
  private readonly orders: JudgeOrders
  private readonly train: readonly PairItem[]
  private readonly validation: readonly PairItem[]
  private readonly settings: EvolutionLogEntry['settings']
  private readonly meter = new RoleMeter()
  private readonly model: ChatModel
  private readonly judge: JudgeOptions
  private readonly router: LibraryRouter
  private readonly limit: ReturnType<typeof pLimit>
  private readonly judging: JudgingCounts = { judged: 0, consistent: 0, inconsistent: 0, failures: 0 }
  private iterationStart: LibraryUsage
  private current: Library
  private currentVal = 0
  private best = 0
  private bestIteration = 0
  private bestHash = ''
  private readonly rejected: string[] = []
  private resumedFrom: number | null = null

  /** Settles the defaults, splits (and, judging one order, augments) the items and builds the judging components. */
  constructor(private readonly options: EvolveOptions) {
    const seed = options.seed ?? 42
    const valFraction = options.valFraction ?? 0.34
    this.margin = options.exploreMargin ?? 0.075
    this.pruneEvery = options.pruneEvery ?? 0
    this.orders = options.orders ?? 'both'
    this.toolCheckSample = options.toolCheckSample ?? 4
    this.say = options.log ?? (() => {})
    const registry = options.images ?? new ImageRegistry()
    const items = pairItems(options.dataset, registry)
    if (items.length < 2)
      throw new EvolveInputError(
        'the dataset needs at least 2 pairwise items (prompts with exactly 2 ranked candidates)',
      )
    const split = splitItems(items, seed, valFraction)
    this.train = this.orders === 'both' ? split.train : swapAugment(split.train)
    this.validation = split.validation
    this.settings = {
      seed,
      val_fraction: valFraction,
      explore_margin: this.margin,
      prune_every: this.pruneEvery,
      dataset_sha256: options.datasetSha256,
      train: this.train.length,
      validation: this.validation.length,
      orders: this.orders,
      tool_check_sample: this.toolCheckSample,
      images: registry.entries().length,
    }
    this.model = this.meter.wrap(options.model)
    this.judge = { ...options.judge, images: registry }
    this.router = new LibraryRouter(this.model, this.judge)
    this.limit = pLimit(options.concurrency ?? 4)
    this.iterationStart = this.meter.usage()
    this.logPath = join(options.outDir, 'evolution-log.jsonl')
    this.checkpoints = join(options.outDir, 'checkpoints')
    this.current = options.initialLibrary ?? emptyLibrary('evolved')
  }

  /**
   * Picks up after the last logged iteration: checks the settings match, reloads its state, restores a best
   * checkpoint a crash left behind the log, and remembers every change already refused. Returns the next iteration.
   */
  async resume(previous: readonly EvolutionLogEntry[]): Promise<number> {
    const last = previous[previous.length - 1]!
    for (const key of ['seed', 'val_fraction', 'dataset_sha256', 'orders'] as const) {
      if (last.settings[key] !== this.settings[key])
        throw new EvolveInputError(
          `cannot resume ${this.options.outDir}: ${key} was ${JSON.stringify(last.settings[key])}, ` +
            `now ${JSON.stringify(this.settings[key])}`,
        )
    }
    this.current = await loadLibrary(join(this.checkpoints, `iter-${last.iteration}`))
    this.currentVal = last.state_val_accuracy
    this.best = last.best_val_accuracy
    this.bestIteration = last.best_iteration
    this.bestHash = last.best_library_sha256
    await this.restoreBest()
    for (const entry of previous)
      if ((entry.decision === 'rolled_back' || entry.decision === 'rejected') && entry.change)
        this.rejected.push(entry.change.key)
    this.resumedFrom = last.iteration
    this.say(
      `resuming after iteration ${last.iteration} ` +
        `(best val ${this.best.toFixed(3)} at iteration ${this.bestIteration})`,
    )
    return last.iteration + 1
  }

  /** A crash between writing checkpoints/best and the log line leaves a best dir the log does not know: restore it. */
  private async restoreBest(): Promise<void> {
    const onDisk = await loadLibrary(join(this.checkpoints, 'best')).then(libraryHash, () => '')
    if (onDisk === this.bestHash) return
    const source = await loadLibrary(join(this.checkpoints, `iter-${this.bestIteration}`))
    if ((await libraryHash(source)) !== this.bestHash)
      throw new EvolveInputError(
        `cannot resume ${this.options.outDir}: checkpoints/best does not match the log ` +
          `and iter-${this.bestIteration} cannot restore it`,
      )
    await this.saveBest(source)
    this.say(`restored checkpoints/best from iter-${this.bestIteration}`)
  }

  /** Iteration 0: judges the starting library on both sets, checkpoints it as iter-0 and best. Returns 1. */
  async baseline(): Promise<number> {
    const trainEval = await this.evaluate(this.current, this.train)
    const valEval = await this.evaluate(this.current, this.validation)
    await this.writeResults(0, 'train', trainEval)
    await this.writeResults(0, 'val', valEval)
    this.currentVal = this.best = valEval.accuracy
    this.bestIteration = 0
    await checkpoint(this.current, join(this.checkpoints, 'iter-0'))
    await this.saveBest(this.current)
    await this.append(
      await this.logEntry(0, null, 'baseline', trainEval, valEval, {
        inconsistent: { train: trainEval.inconsistent, val: valEval.inconsistent },
        tool_calls: { train: trainEval.toolCalls, val: valEval.toolCalls },
      }),
    )
    this.say(
      `iteration 0: baseline train ${trainEval.accuracy.toFixed(3)} val ${valEval.accuracy.toFixed(3)} ` +
        `(failures ${trainEval.failures}/${valEval.failures}, ` +
        `inconsistent ${trainEval.inconsistent}/${valEval.inconsistent})`,
    )
    return 1
  }

  /** One iteration: judge train, analyze and propose, try the change, prune when due, checkpoint and log. */
  async iterate(iteration: number): Promise<void> {
    const trainEval = await this.evaluate(this.current, this.train)
    await this.writeResults(iteration, 'train', trainEval)
    const proposal = await this.propose(trainEval)
    const change = proposal.change
    let outcome: ChangeOutcome = { decision: 'skipped', validation: null }
    if (change && change.op !== 'none') outcome = await this.tryChange(iteration, change)
    else if (change) outcome.note = `no change proposed: ${change.rationale}`
    const note = proposal.note ?? outcome.note
    const pruned =
      this.pruneEvery > 0 && iteration % this.pruneEvery === 0 && Object.keys(this.current.entries).length > 0
        ? await this.prune(iteration)
        : null
    await checkpoint(this.current, join(this.checkpoints, `iter-${iteration}`))
    const valEval = outcome.validation
    await this.append(
      await this.logEntry(iteration, change, outcome.decision, trainEval, valEval, {
        inconsistent: { train: trainEval.inconsistent, val: valEval?.inconsistent ?? 0 },
        tool_calls: { train: trainEval.toolCalls, val: valEval?.toolCalls ?? 0 },
        ...(outcome.toolCheck ? { tool_check: outcome.toolCheck } : {}),
        ...(proposal.summary !== undefined ? { analysis_summary: proposal.summary } : {}),
        ...(note ? { note } : {}),
        pruned,
      }),
    )
    const valText = valEval === null ? '' : ` (val ${valEval.accuracy.toFixed(3)}, best ${this.best.toFixed(3)})`
    const changed = change ? changeKey(change) : 'no change'
    this.say(`iteration ${iteration}: ${changed} → ${outcome.decision}${valText}${note ? `; ${note}` : ''}`)
  }

  /** The Chain Analyzer's reading of the train results and the Evolver's change; a failure of either is a note. */
  private async propose(
    trainEval: Evaluation,
  ): Promise<{ change: LibraryChange | null; summary?: string; note?: string }> {
    let summary: string | undefined
    try {
      const analysis = await analyzeChains(this.model, this.current, trainEval.results, this.judge)
      summary = analysis.summary
      const change = await proposeChange(this.model, this.current, analysis.signals, this.rejected, this.judge)
      return { change, summary }
    } catch (error) {
      const note = `analyzer/evolver failed: ${error instanceof Error ? error.message : String(error)}`
      return { change: null, ...(summary === undefined ? {} : { summary }), note }
    }
  }

  /** Applies a change, runs the tool-prompt check it needs, then validates it and keeps it or rolls it back. */
  private async tryChange(iteration: number, change: LibraryChange): Promise<ChangeOutcome> {
    let candidate: Library
    try {
      candidate = applyChange(this.current, change)
    } catch (error) {
      this.rejected.push(changeKey(change))
      return {
        decision: 'skipped',
        validation: null,
        note: `invalid change ${changeKey(change)}: ${(error as Error).message}`,
      }
    }
    const toolCheck = await this.checkTools(candidate, change)
    const failed = toolCheck?.filter((check) => !check.passed) ?? []
    if (failed.length > 0) {
      this.rejected.push(changeKey(change))
      const why = failed.map((check) => `${check.tool} replied JSON on ${check.json} of ${check.sampled} sample calls`)
      return {
        decision: 'rejected',
        validation: null,
        toolCheck,
        note: `rejected by the tool-prompt check: ${why.join('; ')}`,
      }
    }
    const validation = await this.evaluate(candidate, this.validation)
    await this.writeResults(iteration, 'val', validation)
    const checked = toolCheck ? { toolCheck } : {}
    if (await this.accept(candidate, validation.accuracy, iteration))
      return { decision: 'kept', validation, ...checked }
    this.rejected.push(changeKey(change))
    const val = validation.accuracy.toFixed(3)
    const note = `rolled back: val ${val} < best ${this.best.toFixed(3)} - margin ${this.margin}`
    return { decision: 'rolled_back', validation, ...checked, note }
  }

  /** The tool-prompt check of the tools a change adds or re-prompts, on the first train items; none when off. */
  private async checkTools(candidate: Library, change: LibraryChange): Promise<ToolCheck[] | undefined> {
    const tools = this.toolCheckSample > 0 ? toolsToCheck(this.current, change) : []
    if (tools.length === 0) return undefined
    const sample = this.train.slice(0, this.toolCheckSample)
    return Promise.all(tools.map((tool) => checkToolPrompt(this.model, candidate, tool, sample, this.judge)))
  }

  /** Keeps `candidate` when its validation accuracy is within the margin of the best (a new best is saved). */
  private async accept(candidate: Library, accuracy: number, iteration: number): Promise<boolean> {
    if (accuracy < this.best - this.margin) return false
    this.current = candidate
    this.currentVal = accuracy
    if (accuracy > this.best) {
      this.best = accuracy
      this.bestIteration = iteration
      await this.saveBest(candidate)
    }
    return true
  }

  /** Leave-one-out: entries whose removal keeps validation accuracy are removed together, gated like a change. */
  private async prune(iteration: number): Promise<NonNullable<EvolutionLogEntry['pruned']>> {
    const removable: string[] = []
    for (const entry of entryList(this.current)) {
      const ablated = await this.evaluate(deleteEntry(this.current, entry.name), this.validation)
      if (ablated.accuracy >= this.currentVal) removable.push(entry.name)
    }
    if (removable.length === 0) return { removed: [], decision: 'kept', val_accuracy: this.currentVal }
    const candidate = removable.reduce((library, name) => deleteEntry(library, name), this.current)
    const valEval = await this.evaluate(candidate, this.validation)
    const decision = (await this.accept(candidate, valEval.accuracy, iteration)) ? 'kept' : 'rolled_back'
    return { removed: removable, decision, val_accuracy: valEval.accuracy }
  }

  /** Judges every item of `set` with `library` (at most `concurrency` at once) and counts the verdicts. */
  private async evaluate(library: Library, set: readonly PairItem[]): Promise<Evaluation> {
    const progress = this.options.showProgress
      ? startProgress({ label: 'judging pairs', total: set.length })
      : undefined
    let judged = 0
    const judgeCounted = async (item: PairItem) => {
      try {
        return await this.judgeItem(library, item)
      } finally {
        progress?.update(++judged)
      }
    }
    const outcomes = await Promise.all(set.map((item) => this.limit(() => judgeCounted(item)))).finally(() =>
      progress?.stop(),
    )
    const results = set.map((item, index) => this.resultOf(item, outcomes[index]!))
    const count = (verdict: BothOrdersOutcome['verdict']) =>
      results.filter((result) => result.verdict === verdict).length
    this.judging.judged += results.length
    this.judging.consistent += count('consistent')
    this.judging.inconsistent += count('inconsistent')
    this.judging.failures += count('failure')
    return {
      accuracy: set.length ? results.filter((result) => result.correct).length / set.length : 0,
      failures: count('failure'),
      inconsistent: count('inconsistent'),
      toolCalls: outcomes.reduce((sum, outcome) => sum + outcome.tool_calls, 0),
      results,
    }
  }

  /** One item's result line: the prediction, whether it is right, and how the orders agreed. */
  private resultOf(item: PairItem, outcome: BothOrdersOutcome): Evaluation['results'][number] {
    const prediction = outcome.verdict === 'inconsistent' ? 'inconsistent' : outcome.preference
    return {
      id: item.id,
      instruction: item.instruction,
      label: item.label,
      prediction,
      correct: outcome.verdict === 'consistent' && prediction === item.label,
      chain: outcome.chain,
      verdict: outcome.verdict,
      ...(this.orders === 'both' ? { orders: outcome.orders } : {}),
      ...(outcome.failure === undefined ? {} : { failure: outcome.failure }),
    }
  }

  /** One item, in one or both orders, as a both-orders outcome (one order: its verdict is the A/B answer). */
  private async judgeItem(library: Library, item: PairItem): Promise<BothOrdersOutcome> {
    const routed = await this.router.route(library, item.instruction)
    if (this.orders === 'both') return judgeBothOrders(this.model, library, routed, item, this.judge)
    const outcome = await judgeWithLibrary(this.model, library, routed, item, this.judge)
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

  /** The log line of an iteration, with the state it ends in and the model usage since the previous line. */
  private async logEntry(
    iteration: number,
    change: LibraryChange | null,
    decision: EvolveDecision,
    trainEval: Evaluation,
    valEval: Evaluation | null,
    extra: Partial<EvolutionLogEntry> = {},
  ): Promise<EvolutionLogEntry> {
    const now = this.meter.usage()
    const usage = usageSince(now, this.iterationStart)
    this.iterationStart = now
    return {
      iteration,
      change: change ? { key: changeKey(change), op: change.op, rationale: change.rationale } : null,
      decision,
      train_accuracy: trainEval.accuracy,
      val_accuracy: valEval?.accuracy ?? null,
      state_val_accuracy: this.currentVal,
      best_val_accuracy: this.best,
      best_iteration: this.bestIteration,
      best_library_sha256: this.bestHash,
      failures: { train: trainEval.failures, val: valEval?.failures ?? 0 },
      inconsistent: { train: 0, val: 0 },
      tool_calls: { train: 0, val: 0 },
      ...extra,
      usage,
      entries: entryList(this.current).map((entry) => entry.name),
      library_sha256: await libraryHash(this.current),
      settings: this.settings,
      timestamp: new Date().toISOString(),
    }
  }

  private async saveBest(library: Library): Promise<void> {
    await checkpoint(library, join(this.checkpoints, 'best'))
    this.bestHash = await libraryHash(library)
  }

  private writeResults(iteration: number, name: string, evaluation: Evaluation): Promise<void> {
    return writeFileAtomic(
      join(this.options.outDir, 'results', `iter-${iteration}.${name}.jsonl`),
      `${evaluation.results.map((result) => JSON.stringify(result)).join('\n')}\n`,
    )
  }

  private async append(entry: EvolutionLogEntry): Promise<void> {
    await appendFile(this.logPath, `${JSON.stringify(entry)}\n`, 'utf8')
  }

  /** What this invocation did: where the best state is, and the judgments and model calls it made. */
  summary(): EvolveSummary {
    return {
      out_dir: this.options.outDir,
      iterations_done: this.options.iterations,
      resumed_from: this.resumedFrom,
      best_iteration: this.bestIteration,
      best_val_accuracy: this.best,
      best_dir: join(this.checkpoints, 'best'),
      log: this.logPath,
      entries: entryList(this.current).map((entry) => entry.name),
      router: { calls: this.router.calls, failures: this.router.failures },
      orders: this.orders,
      judging: this.judging,
      usage: this.meter.usage(),
    }
  }
}

/**
 * The entries of an evolution log; a torn last line (a crash mid-write) is ignored, a line of another shape is an
 * EvolveInputError naming the line and field.
 * @example (await readLog('runs/a/evolution-log.jsonl')).at(-1)?.best_val_accuracy
 * @internal
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
  for (const [index, line] of text.split('\n').entries()) {
    if (!line.trim()) continue
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch {
      break
    }
    const parsed = EvolutionLogEntry.safeParse(value)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw new EvolveInputError(`${path}: line ${index + 1}: ${issue?.path.join('.') || '(root)'}: ${issue?.message}`)
    }
    entries.push(parsed.data)
  }
  return entries
}
