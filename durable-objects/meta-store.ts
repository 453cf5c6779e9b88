import { applySchema } from './schema.ts'

/**
 * A key/value table inside a Durable Object's SQLite storage, for the handful of scalars each object keeps.
 * Values are remembered in memory after the first read: the object is the only writer of its storage.
 * @example const meta = new MetaStore(ctx.storage.sql); meta.set('step', '3'); meta.get('step') // '3'
 */
export class MetaStore {
  private readonly remembered = new Map<string, string | undefined>()

  constructor(private readonly sql: SqlStorage) {
    applySchema(sql, { meta: { columns: { key: 'TEXT PRIMARY KEY', value: 'TEXT NOT NULL' } } })
  }

  get(key: string): string | undefined {
    if (!this.remembered.has(key))
      this.remembered.set(
        key,
        this.sql.exec<{ value: string }>('SELECT value FROM meta WHERE key = ?', key).toArray()[0]?.value,
      )
    return this.remembered.get(key)
  }

  /** The value as a number, or `fallback` when unset. */
  number(key: string, fallback: number): number {
    const value = this.get(key)
    return value === undefined ? fallback : Number(value)
  }

  set(key: string, value: string | number): void {
    this.sql.exec(
      'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
      key,
      String(value),
    )
    this.remembered.set(key, String(value))
  }

  delete(key: string): void {
    this.sql.exec('DELETE FROM meta WHERE key = ?', key)
    this.remembered.set(key, undefined)
  }

  /** Drops what is remembered: call it when a transaction that may have set values rolled back. */
  forget(): void {
    this.remembered.clear()
  }
}
