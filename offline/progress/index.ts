/**
 * Progress of a long command, one way for every command: on a terminal a bar redrawn in place (cli-progress) on
 * stderr; otherwise plain lines, one every `intervalMs` and one at the end, so a log or CI shows a long run moving
 * (a run shorter than one interval prints none).
 */
import { createRequire } from 'node:module'

/** cli-progress, loaded only when a bar is drawn: a run whose stderr is no terminal never pays for it. */
const loadCliProgress = () => createRequire(import.meta.url)('cli-progress') as typeof import('cli-progress')

/** A running progress display. */
export interface Progress {
  /** Sets how much is done (of `total`), with a short note of what is happening. */
  update(done: number, detail?: string): void
  /** Ends the display: the bar is cleared, plain output gets its last line. */
  stop(): void
}

export interface ProgressOptions {
  label: string
  total: number
  /** Where it goes; default process.stderr. Redrawn in place only when it is a TTY. */
  stream?: NodeJS.WritableStream & { isTTY?: boolean }
  /** Shortest time between two plain lines (not a TTY); default 10 s. */
  intervalMs?: number
}

/**
 * Starts a progress display.
 * @example const progress = startProgress({ label: 'judging', total: 120 }); progress.update(60, '3 cached');
 *   progress.stop()
 */
export function startProgress(options: ProgressOptions): Progress {
  const stream = options.stream ?? process.stderr
  if (stream.isTTY) {
    const { Presets, SingleBar } = loadCliProgress()
    const bar = new SingleBar(
      {
        format: `${options.label} [{bar}] {percentage}% {value}/{total} {detail} · {duration_formatted}`,
        stream,
        hideCursor: true,
        clearOnComplete: true,
        fps: 10,
      },
      Presets.shades_classic,
    )
    bar.start(options.total, 0, { detail: '' })
    return { update: (done, detail = '') => bar.update(done, { detail }), stop: () => bar.stop() }
  }
  // A command that ends within the first interval prints nothing: plain lines are for runs long enough to wonder about.
  const interval = options.intervalMs ?? 10_000
  const started = Date.now()
  let last = started
  let printed = false
  let state = { done: 0, detail: '' }
  const line = () => {
    const percent = options.total > 0 ? Math.floor((100 * state.done) / options.total) : 100
    stream.write(
      `${options.label}: ${state.done}/${options.total} (${percent}%)${state.detail ? ` ${state.detail}` : ''} · ` +
        `${((Date.now() - started) / 1_000).toFixed(1)} s\n`,
    )
    printed = true
  }
  return {
    update(done, detail = '') {
      state = { done, detail }
      if (Date.now() - last >= interval) {
        last = Date.now()
        line()
      }
    },
    stop: () => void (printed && line()),
  }
}
