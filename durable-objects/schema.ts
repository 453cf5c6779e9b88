/** A table: each column's SQL definition by name, then table constraints (`PRIMARY KEY (a, b)`). */
export interface TableSchema {
  columns: Record<string, string>
  constraints?: string[]
  /**
   * Store rows in the primary key's b-tree: one row written per insert or delete instead of two (table + key
   * index). For tables whose every query goes by a prefix of the primary key.
   */
  withoutRowid?: boolean
}

/**
 * Creates each table, then adds the columns that storage written by an earlier deploy lacks, so a Durable Object
 * keeps its rows across an upgrade instead of failing on its first INSERT (`table ledger has no column named …`).
 * Additive only: a column added after a table's first release needs a DEFAULT (or to be nullable) for the old rows.
 * @example applySchema(ctx.storage.sql, { meta: { columns: { key: 'TEXT PRIMARY KEY', value: 'TEXT NOT NULL' } } })
 */
export function applySchema(sql: SqlStorage, tables: Record<string, TableSchema>): void {
  for (const [table, { columns, constraints = [], withoutRowid = false }] of Object.entries(tables)) {
    const definitions = Object.entries(columns).map(([column, definition]) => `${column} ${definition}`)
    const body = [...definitions, ...constraints].join(', ')
    sql.exec(`CREATE TABLE IF NOT EXISTS ${table} (${body})${withoutRowid ? ' WITHOUT ROWID' : ''}`)
    const existing = new Set(
      sql
        .exec<{ name: string }>('SELECT name FROM pragma_table_info(?)', table)
        .toArray()
        .map((row) => row.name),
    )
    for (const [column, definition] of Object.entries(columns)) {
      if (!existing.has(column)) sql.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${definition}`)
    }
  }
}
