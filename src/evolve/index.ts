/**
 * Judge library evolution: router + sub-agent judge in one or both orders (judge.ts), images as handles
 * (images.ts), analyzer, evolver, tool-prompt check and data helpers (evolver.ts), per-role call accounting
 * (usage.ts), the views of the library its roles read (views.ts) and their offline mock replies (mock.ts).
 */
export * from './evolver.ts'
export * from './images.ts'
export * from './judge.ts'
export * from './usage.ts'
export type * from './views.ts'
