/**
 * The progress of a search: how far it is (ProgressTracker) and its bar (ProgressBar, on the shared display). The CLI
 * shows it only when stderr is a TTY and `--json` is off.
 */
import type { SearchProgress } from '../../src/search/index.ts'
import { startProgress, type Progress, type ProgressOptions } from '../progress/index.ts'

export interface ProgressCounts {
  calls: number
  cache_hits: number
}

/**
 * Overall progress in [0, 1] from the engine's events: initialisation 5 %, the generations (or the prompts'
 * own generations, averaged) 90 %, the final scoring 5 %.
 * @example const tracker = new ProgressTracker(3, 12); tracker.update(event); tracker.fraction
 */
export class ProgressTracker {
  #fraction = 0
  #label = 'starting'
  readonly #perPrompt = new Map<string, number>()

  constructor(
    private readonly prompts: number,
    private readonly generations: number,
  ) {}

  /**
   * Overall progress in [0, 1]; it never goes back.
   * @example tracker.fraction // 0.47
   */
  get fraction(): number {
    return this.#fraction
  }

  /**
   * What the search is doing, for the bar.
   * @example tracker.label // 'generation 5/12'
   */
  get label(): string {
    return this.#label
  }

  /**
   * Takes one engine event.
   * @example tracker.update({ phase: 'generation', prompt_id: null, generation: 3, done: 3, total: 12 })
   */
  update(event: SearchProgress): void {
    const share = event.total > 0 ? Math.min(1, event.done / event.total) : 1
    switch (event.phase) {
      case 'initialize':
        this.#label = `initialize ${event.done}/${event.total}`
        this.#fraction = Math.max(this.#fraction, 0.05 * share)
        break
      case 'generation':
        this.#label = `generation ${event.done}/${event.total}`
        this.#fraction = Math.max(this.#fraction, 0.05 + 0.9 * share)
        break
      case 'prompt':
        if (event.prompt_id !== null) this.#perPrompt.set(event.prompt_id, share)
        this.#label = `${event.prompt_id ?? ''} step ${event.done}/${event.total}`.trim()
        this.#fraction = Math.max(
          this.#fraction,
          0.05 +
            (0.9 * [...this.#perPrompt.values()].reduce((sum, value) => sum + value, 0)) / Math.max(1, this.prompts),
        )
        break
      case 'finalize':
        if (event.prompt_id !== null) this.#perPrompt.set(event.prompt_id, 1)
        this.#label = `finalize ${event.done}/${event.total}`
        this.#fraction = Math.max(
          this.#fraction,
          this.#perPrompt.size > 0 && this.generations > 0
            ? 0.05 + (0.9 * this.#perPrompt.size) / Math.max(1, this.prompts)
            : 0.95 + 0.05 * share,
        )
        break
    }
  }
}

/**
 * The search's bar, drawn by the one progress display every long command uses (offline/progress): overall progress
 * in per mille, with what the search is doing and its calls: `search [####----] 48% … generation 6/12 · 312 calls · 40
 * cached`.
 * @example const bar = new ProgressBar(tracker, () => counts); bar.draw(); bar.finish()
 */
export class ProgressBar {
  readonly #display: Progress

  constructor(
    private readonly tracker: ProgressTracker,
    private readonly counts: () => ProgressCounts,
    stream?: ProgressOptions['stream'],
  ) {
    this.#display = startProgress({ label: 'search', total: 1_000, ...(stream ? { stream } : {}) })
  }

  /**
   * Shows the tracker's progress now (the display itself redraws at most 10 times a second).
   * @example tracker.update(event); bar.draw()
   */
  draw(): void {
    const { calls, cache_hits } = this.counts()
    this.#display.update(
      Math.round(this.tracker.fraction * 1_000),
      `${this.tracker.label} · ${calls} calls · ${cache_hits} cached`,
    )
  }

  /**
   * Ends the display (the final summary is printed by the caller).
   * @example bar.finish()
   */
  finish(): void {
    this.#display.stop()
  }
}
