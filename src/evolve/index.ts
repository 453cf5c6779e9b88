/**
 * Judge library evolution: router + sub-agent judge in one or both orders (judge.ts), images as handles
 * (images.ts), analyzer, evolver, tool-prompt check and data helpers (evolver.ts), per-role call accounting (usage.ts).
 */
export * from './evolver.ts'
export * from './images.ts'
export * from './judge.ts'
export * from './usage.ts'
