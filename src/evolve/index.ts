/** Judge library evolution: router + sub-agent judge (judge.ts), analyzer, evolver and data helpers (evolver.ts). */
export * from './evolver.ts'
export * from './judge.ts'
