/** The one progress display of the long commands: plain lines, rate-limited, when stderr is not a terminal. */
import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { startProgress } from '../../offline/progress/index.ts'

function capture() {
  const lines: string[] = []
  const stream = new Writable({ write(chunk, _encoding, done) { lines.push(String(chunk)); done() } })
  return { stream, lines }
}

describe('startProgress off a terminal', () => {
  it('writes a first line at once, then at most one per interval, and the last one on stop', () => {
    const { stream, lines } = capture()
    const progress = startProgress({ label: 'judging', total: 120, stream, intervalMs: 60_000 })
    for (let done = 1; done <= 120; done++) progress.update(done, done > 100 ? '1 failed' : '')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^judging: 1\/120 \(0%\) · \d+\.\d s\n$/)
    progress.stop()
    expect(lines).toHaveLength(2)
    expect(lines[1]).toMatch(/^judging: 120\/120 \(100%\) 1 failed · \d+\.\d s\n$/)
  })

  it('writes every update when the interval is 0', () => {
    const { stream, lines } = capture()
    const progress = startProgress({ label: 'x', total: 3, stream, intervalMs: 0 })
    for (let done = 1; done <= 3; done++) progress.update(done)
    expect(lines.map((line) => line.split(' ·')[0])).toEqual(['x: 1/3 (33%)', 'x: 2/3 (66%)', 'x: 3/3 (100%)'])
  })
})
