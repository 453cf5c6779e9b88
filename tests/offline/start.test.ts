/**
 * `npm start` says one line for the migrations instead of wrangler's tables: the count comes from wrangler's own
 * output of the one `d1 migrations apply` call. Its debugger port is the system's pick unless given. (That the whole
 * start stays within ten lines before "Serving on" is checked by `npm run docs:check`, which starts it.)
 */
import { describe, expect, it } from 'vitest'
import { appliedMigrations, judgeFlag, wranglerDevArgs } from '../../offline/dev/start.ts'

describe('npm start', () => {
  it('reads how many migrations wrangler applied: all of them on a fresh state, none after', () => {
    const fresh = ['Migrations to be applied:', '│ 0000_init.sql │', '? About to apply 7 migration(s)', '🚣 8 commands']
    expect(appliedMigrations(fresh.join('\n'))).toBe(7)
    expect(appliedMigrations('✅ No migrations to apply!')).toBe(0)
  })

  it('takes --judge out of the arguments it hands wrangler dev, in either spelling', () => {
    expect(judgeFlag(['--judge', 'local', '--inspector-port', '9230'])).toEqual({
      judge: 'local',
      rest: ['--inspector-port', '9230'],
    })
    expect(judgeFlag(['--judge=local'])).toEqual({ judge: 'local', rest: [] })
    expect(judgeFlag(['--port', '1'])).toEqual({ judge: undefined, rest: ['--port', '1'] })
    expect(judgeFlag(['--judge'])).toEqual({ judge: '', rest: [] })
  })

  it("puts wrangler's debugger on a port the system picks, unless the command line names one", () => {
    const inspector = (args: string[]) => args.slice(args.indexOf('--inspector-port')).slice(0, 2)
    expect(inspector(wranglerDevArgs('8787', []))).toEqual(['--inspector-port', '0'])
    for (const extra of [['--inspector-port', '9229'], ['--inspector-port=9229']]) {
      const args = wranglerDevArgs('8787', extra)
      expect(args.filter((arg) => arg.startsWith('--inspector-port'))).toHaveLength(1)
      expect(args.slice(-extra.length)).toEqual(extra)
    }
  })
})
