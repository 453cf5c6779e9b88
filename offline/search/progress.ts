/**
 * The progress bar of a search on a terminal: one line on stderr, redrawn at most 10 times a second, cleared at
 * the end. The CLI uses it only when stderr is a TTY and `--json` is off.
 */
import type { SearchProgress } from '../../src/search/index.ts'

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
        this.#fraction = Math.max(this.#fraction, 0.05 + (0.9 * [...this.#perPrompt.values()].reduce((sum, value) => sum + value, 0)) / Math.max(1, this.prompts))
        break
      case 'finalize':
        if (event.prompt_id !== null) this.#perPrompt.set(event.prompt_id, 1)
        this.#label = `finalize ${event.done}/${event.total}`
        this.#fraction = Math.max(this.#fraction, this.#perPrompt.size > 0 && this.generations > 0 ? 0.05 + (0.9 * this.#perPrompt.size) / Math.max(1, this.prompts) : 0.95 + 0.05 * share)
        break
    }
  }
}

/**
 * Draws the bar: `[######------]  48%  generation 6/12 · 312 calls · 40 cached · 3.1s`.
 * @example const bar = new ProgressBar((text) => process.stderr.write(text), tracker, () => counts); bar.draw(); bar.finish()
 */
export class ProgressBar {
  readonly #started = Date.now()
  #lastDraw = 0
  #timer: ReturnType<typeof setTimeout> | undefined
  #visible = false

  constructor(
    private readonly write: (text: string) => void,
    private readonly tracker: ProgressTracker,
    private readonly counts: () => ProgressCounts,
    private readonly width = 24,
  ) {}

  /**
   * Redraws now if the last draw is 100 ms old, else schedules one.
   * @example tracker.update(event); bar.draw()
   */
  draw(): void {
    const now = Date.now()
    if (now - this.#lastDraw >= 100) return this.#render(now)
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined
      this.#render(Date.now())
    }, 100)
  }

  /**
   * Clears the line (the final summary is printed by the caller).
   * @example bar.finish()
   */
  finish(): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
    if (this.#visible) this.write('\r\x1b[2K')
    this.#visible = false
  }

  #render(now: number): void {
    this.#lastDraw = now
    const fraction = this.tracker.fraction
    const filled = Math.round(fraction * this.width)
    const { calls, cache_hits } = this.counts()
    const seconds = ((now - this.#started) / 1000).toFixed(1)
    const line = `[${'#'.repeat(filled)}${'-'.repeat(this.width - filled)}] ${String(Math.floor(fraction * 100)).padStart(3)}%  ${this.tracker.label} · ${calls} calls · ${cache_hits} cached · ${seconds}s`
    this.write(`\r\x1b[2K${line}`)
    this.#visible = true
  }
}
