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
 * Storage remembers the definition it was last brought up to, so a wake whose code declares the same tables costs one
 * read instead of a `CREATE` and a column listing per table. `upgrade` runs once per change of the definition, after
 * the tables are up to it: the one place where rows kept in an older format are rewritten into the new one.
 * @example applySchema(ctx.storage.sql, { meta: { columns: { key: 'TEXT PRIMARY KEY', value: 'TEXT NOT NULL' } } })
 */
export function applySchema(sql: SqlStorage, tables: Record<string, TableSchema>, upgrade?: () => void): void {
  const names = Object.keys(tables).sort().join(',')
  const definition = JSON.stringify(tables)
  sql.exec('CREATE TABLE IF NOT EXISTS applied_schemas (tables TEXT PRIMARY KEY, definition TEXT NOT NULL)')
  const applied = sql.exec<{ definition: string }>('SELECT definition FROM applied_schemas WHERE tables = ?', names)
  if (applied.toArray()[0]?.definition === definition) return
  for (const [table, schema] of Object.entries(tables)) createOrExtend(sql, table, schema)
  upgrade?.()
  sql.exec('INSERT OR REPLACE INTO applied_schemas (tables, definition) VALUES (?, ?)', names, definition)
}

function createOrExtend(
  sql: SqlStorage,
  table: string,
  { columns, constraints = [], withoutRowid = false }: TableSchema,
) {
  const definitions = Object.entries(columns).map(([column, definition]) => `${column} ${definition}`)
  const rowid = withoutRowid ? ' WITHOUT ROWID' : ''
  sql.exec(`CREATE TABLE IF NOT EXISTS ${table} (${[...definitions, ...constraints].join(', ')})${rowid}`)
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
