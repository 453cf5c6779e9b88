/**
 * A key/value table inside a Durable Object's SQLite storage, for the handful of scalars each object keeps.
 * @example const meta = new MetaStore(ctx.storage.sql); meta.set('step', '3'); meta.get('step') // '3'
 */
export class MetaStore {
  constructor(private readonly sql: SqlStorage) {
    sql.exec('CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)')
  }

  get(key: string): string | undefined {
    return this.sql.exec<{ value: string }>('SELECT value FROM meta WHERE key = ?', key).toArray()[0]?.value
  }

  /** The value as a number, or `fallback` when unset. */
  number(key: string, fallback: number): number {
    const value = this.get(key)
    return value === undefined ? fallback : Number(value)
  }

  set(key: string, value: string | number): void {
    this.sql.exec('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value', key, String(value))
  }
}
