export * from './compare.ts'
export * from './schemas.ts'
export * from './store.ts'
