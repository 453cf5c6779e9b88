/** The one progress display of the long commands: plain lines, rate-limited, when stderr is not a terminal. */
import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { startProgress } from '../../offline/progress/index.ts'

function capture() {
  const lines: string[] = []
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk))
      done()
    },
  })
  return { stream, lines }
}

describe('startProgress off a terminal', () => {
  it('prints nothing for a run shorter than one interval', () => {
    const { stream, lines } = capture()
    const progress = startProgress({ label: 'judging', total: 120, stream, intervalMs: 60_000 })
    for (let done = 1; done <= 120; done++) progress.update(done)
    progress.stop()
    expect(lines).toEqual([])
  })

  it('writes a line per interval and the last one on stop', () => {
    const { stream, lines } = capture()
    const progress = startProgress({ label: 'x', total: 3, stream, intervalMs: 0 })
    for (let done = 1; done <= 3; done++) progress.update(done, done === 3 ? '1 failed' : '')
    progress.stop()
    expect(lines.map((line) => line.split(' ·')[0])).toEqual([
      'x: 1/3 (33%)',
      'x: 2/3 (66%)',
      'x: 3/3 (100%) 1 failed',
      'x: 3/3 (100%) 1 failed',
    ])
    expect(lines[0]).toMatch(/ · \d+\.\d s\n$/)
  })
})

describe('startProgress on a terminal', () => {
  it('draws a bar with the label and the count', () => {
    const { stream, lines } = capture()
    Object.assign(stream, { isTTY: true, columns: 100, cursorTo: () => true, clearLine: () => true })
    const progress = startProgress({ label: 'judging', total: 4, stream })
    progress.update(2, 'half')
    progress.stop()
    expect(lines.join('')).toMatch(/judging \[.*\] 50% 2\/4 half/)
  })
})
