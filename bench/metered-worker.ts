/**
 * The Worker with a meter around every billed operation, for `npm run bench:cost` only (never deployed). It wraps
 * what the Worker and its Durable Objects are handed, by shape rather than by name, so it meters any revision of the
 * project as it is: each call on a Durable Object stub (one billed request, counted per object), each alarm, the
 * SQLite rows every `sql.exec` and `setAlarm` writes (workerd's own cursor counters), D1's `meta.rows_written`,
 * queue messages, Analytics Engine data points, and the Worker's own invocations. Each invocation (a request, a queue
 * job, a Durable Object call or alarm) also counts its own subrequests: the total, and the most in flight at once,
 * overall and for the kinds that hold one of the 6 connections a Worker may open (fetch, D1, R2, queue sends).
 * `GET /__meter` answers the counts.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import * as project from '../workers/index.ts'

interface ObjectUsage {
  requests: number
  alarms: number
  rowsWritten: number
  rowsRead: number
}

const usage = {
  workerInvocations: 0,
  objects: {} as Record<string, ObjectUsage>,
  d1: { rowsWritten: 0, rowsRead: 0, queries: 0 },
  queueMessages: 0,
  analyticsPoints: 0,
  r2Writes: 0,
  /** Rows written per statement: `<binding>|<SQL, whitespace folded>` (a setAlarm is `<binding>|setAlarm`). */
  statements: {} as Record<string, { calls: number; rowsWritten: number }>,
  /** Durable Object requests by `<binding>.<method>` (an alarm is `<binding>.alarm`). */
  methods: {} as Record<string, number>,
}

/** The statement's entry in `usage.statements`, keyed by the object's binding and its SQL text. */
function statementUsage(binding: string, query: string): { calls: number; rowsWritten: number } {
  const key = `${binding}|${query.replace(/\s+/g, ' ').trim()}`
  return (usage.statements[key] ??= { calls: 0, rowsWritten: 0 })
}

/** The subrequests of one invocation as it runs. */
interface Invocation {
  kind: string
  /** The Durable Object it runs in, if any: its calls to its own methods are part of it. */
  owner?: object
  total: number
  inFlight: number
  maxInFlight: number
  connections: number
  maxConnections: number
  /** Subrequests waiting for one of the invocation's connections (only with a connection limit). */
  waiting: (() => void)[]
}

/**
 * Connections an invocation may hold at once; more wait, as on Cloudflare (6). 0: unlimited, as workerd runs locally.
 * Set by the `BENCH_CONNECTION_LIMIT` var.
 */
let connectionLimit = 0
/**
 * Whether a service-binding call holds one of its caller's connections (`BENCH_SERVICE_HOLDS_CONNECTION`, default yes).
 */
let serviceHoldsConnection = true

/** The largest counts seen, per kind of invocation (`fetch /score`, `queue job`, `RUN_COORDINATOR.alarm`…). */
const invocationUsage: Record<
  string,
  { invocations: number; maxSubrequests: number; maxInFlight: number; maxConnections: number }
> = {}
const current = new AsyncLocalStorage<Invocation>()

/**
 * Runs `work` as one invocation of `kind`, folding its counts into `invocationUsage` when it settles (at once for a
 * method that answers synchronously, which stays synchronous). A Durable Object's call to its own method is not one.
 */
function asInvocation<T>(kind: string, work: () => T, owner?: object): T {
  if (owner && current.getStore()?.owner === owner) return work()
  const invocation: Invocation = {
    kind,
    owner,
    total: 0,
    inFlight: 0,
    maxInFlight: 0,
    connections: 0,
    maxConnections: 0,
    waiting: [],
  }
  const fold = () => {
    const usage = (invocationUsage[kind] ??= { invocations: 0, maxSubrequests: 0, maxInFlight: 0, maxConnections: 0 })
    usage.invocations++
    usage.maxSubrequests = Math.max(usage.maxSubrequests, invocation.total)
    usage.maxInFlight = Math.max(usage.maxInFlight, invocation.maxInFlight)
    usage.maxConnections = Math.max(usage.maxConnections, invocation.maxConnections)
  }
  return thenSettled(() => current.run(invocation, work), fold)
}

/** Runs `start` and calls `settled` once its result has settled: at once when it is not a promise, which stays so. */
function thenSettled<T>(start: () => T, settled: () => void): T {
  let result: T
  try {
    result = start()
  } catch (error) {
    settled()
    throw error
  }
  if (result && typeof (result as { then?: unknown }).then === 'function')
    (result as unknown as PromiseLike<unknown>).then(settled, settled)
  else settled()
  return result
}

/**
 * Counts one subrequest of the invocation it runs in, for as long as its promise is pending. With a connection limit,
 * one that would hold a connection past it waits for one to close first.
 */
function subrequest<T>(start: () => T, holdsConnection: boolean): T {
  const invocation = current.getStore()
  if (!invocation) return start()
  if (holdsConnection && connectionLimit > 0 && invocation.connections >= connectionLimit) {
    return new Promise<void>((resolve) => invocation.waiting.push(resolve)).then(() =>
      subrequest(start, holdsConnection),
    ) as T
  }
  invocation.total++
  invocation.inFlight++
  invocation.maxInFlight = Math.max(invocation.maxInFlight, invocation.inFlight)
  if (holdsConnection) invocation.maxConnections = Math.max(invocation.maxConnections, ++invocation.connections)
  return thenSettled(start, () => {
    invocation.inFlight--
    if (holdsConnection) {
      invocation.connections--
      invocation.waiting.shift()?.()
    }
  })
}

const realFetch = globalThis.fetch
globalThis.fetch = ((...args: Parameters<typeof fetch>) => subrequest(() => realFetch(...args), true)) as typeof fetch

const objectUsage = (key: string): ObjectUsage =>
  (usage.objects[key] ??= { requests: 0, alarms: 0, rowsWritten: 0, rowsRead: 0 })

type Any = Record<string | symbol, any>

/** A binding's methods called with the binding as `this` (native bindings refuse a proxy as `this`). */
function bound(target: Any, property: string | symbol): unknown {
  const value = target[property]
  return typeof value === 'function' ? (...args: unknown[]) => Reflect.apply(value, target, args) : value
}

function meteredStub(stub: Any, key: string): Any {
  return new Proxy(stub, {
    get(target, property) {
      const value = target[property]
      if (typeof value !== 'function' || typeof property === 'symbol' || property === 'then')
        return bound(target, property)
      return (...args: unknown[]) => {
        objectUsage(key).requests++
        const method = `${key.slice(0, key.indexOf(':'))}.${property}`
        usage.methods[method] = (usage.methods[method] ?? 0) + 1
        // Not value.apply(): on an RPC stub every property, `apply` included, is a remote method.
        return subrequest(() => target[property](...args), false)
      }
    },
  })
}

function meteredNamespace(namespace: Any, binding: string): Any {
  return new Proxy(namespace, {
    get(target, property) {
      if (property === 'getByName') return (name: string) => meteredStub(target.getByName(name), `${binding}:${name}`)
      if (property === 'get') return (id: Any) => meteredStub(target.get(id), `${binding}:${String(id?.name ?? id)}`)
      return bound(target, property)
    },
  })
}

function meteredResult<T>(result: T, query: string): T {
  const meta = (result as { meta?: { rows_written?: number; rows_read?: number } } | null)?.meta
  usage.d1.queries++
  usage.d1.rowsWritten += meta?.rows_written ?? 0
  usage.d1.rowsRead += meta?.rows_read ?? 0
  const statement = statementUsage('D1', query)
  statement.calls++
  statement.rowsWritten += meta?.rows_written ?? 0
  return result
}

function meteredStatement(statement: Any, query: string): Any {
  return new Proxy(statement, {
    get(target, property) {
      if (property === '__target') return target
      if (property === '__query') return query
      if (property === 'bind') return (...args: unknown[]) => meteredStatement(target.bind(...args), query)
      if (property === 'run' || property === 'all')
        return async (...args: unknown[]) =>
          meteredResult(await subrequest(() => target[property](...args), true), query)
      if (property === 'first' || property === 'raw')
        return (...args: unknown[]) => subrequest(() => target[property](...args), true)
      return bound(target, property)
    },
  })
}

function meteredD1(db: Any): Any {
  return new Proxy(db, {
    get(target, property) {
      if (property === 'prepare') return (sql: string) => meteredStatement(target.prepare(sql), sql)
      // Statements in a batch are the proxies above: unwrap them for the native call.
      if (property === 'batch')
        return async (statements: Any[]) =>
          (await subrequest(() => target.batch(statements.map((s) => s.__target ?? s)), true)).map(
            (result: unknown, index: number) => meteredResult(result, statements[index]?.__query ?? '(unknown)'),
          )
      return bound(target, property)
    },
  })
}

function meteredQueue(queue: Any): Any {
  return new Proxy(queue, {
    get(target, property) {
      if (property === 'send') {
        return (...args: unknown[]) => {
          usage.queueMessages += 1
          return subrequest(() => target.send(...args), true)
        }
      }
      if (property === 'sendBatch') {
        return (messages: unknown[], ...rest: unknown[]) => {
          usage.queueMessages += messages.length
          return subrequest(() => target.sendBatch(messages, ...rest), true)
        }
      }
      return bound(target, property)
    },
  })
}

function meteredR2(bucket: Any): Any {
  return new Proxy(bucket, {
    get(target, property) {
      if (property === 'put') {
        return (...args: unknown[]) => {
          usage.r2Writes += 1
          return subrequest(() => target.put(...args), true)
        }
      }
      const value = target[property]
      return typeof value === 'function'
        ? (...args: unknown[]) => subrequest(() => Reflect.apply(value, target, args), true)
        : value
    },
  })
}

/**
 * A service binding: each call is a subrequest, counted as holding one of the caller's connections unless
 * `BENCH_SERVICE_HOLDS_CONNECTION` is `false` (Cloudflare does not say such a call is exempt: the worst case is the
 * default).
 */
function meteredService(service: Any): Any {
  return new Proxy(service, {
    get(target, property) {
      const value = target[property]
      if (typeof value !== 'function' || typeof property === 'symbol' || property === 'then')
        return bound(target, property)
      return (...args: unknown[]) => subrequest(() => target[property](...args), serviceHoldsConnection)
    },
  })
}

/**
 * The environment, every binding wrapped by its shape; an Analytics Engine dataset that only counts when none is bound.
 */
function meteredEnv(env: Any): Any {
  const wrapped: Any = {}
  for (const [name, value] of Object.entries(env)) {
    // A service binding first: one with an entrypoint is an RPC stub, on which every name (getByName too) is a method.
    if (value && typeof value === 'object' && typeof value.fetch === 'function' && typeof value.connect === 'function')
      wrapped[name] = meteredService(value)
    else if (value && typeof value === 'object' && typeof value.getByName === 'function')
      wrapped[name] = meteredNamespace(value, name)
    else if (
      value &&
      typeof value === 'object' &&
      typeof value.prepare === 'function' &&
      typeof value.batch === 'function'
    )
      wrapped[name] = meteredD1(value)
    else if (value && typeof value === 'object' && typeof value.sendBatch === 'function')
      wrapped[name] = meteredQueue(value)
    else if (value && typeof value === 'object' && typeof value.put === 'function' && typeof value.list === 'function')
      wrapped[name] = meteredR2(value)
    else wrapped[name] = value
  }
  wrapped.TELEMETRY ??= { writeDataPoint: () => void usage.analyticsPoints++ }
  return wrapped
}

/**
 * Counts, on the object's own storage, what each statement writes and reads and each setAlarm (billed as a row
 * written). Patched in place: the runtime accepts only its own state object in a Durable Object's constructor.
 */
function meterState(state: Any, key: string): void {
  const sql = state.storage.sql
  const exec = sql.exec
  const binding = key.slice(0, key.indexOf(':'))
  sql.exec = (query: string, ...bindings: unknown[]) => {
    const cursor: Any = Reflect.apply(exec, sql, [query, ...bindings])
    const counted = objectUsage(key)
    // A key/value table's writes are told apart by key (the first binding): each key is its own reason to write.
    const statement = statementUsage(
      binding,
      /^\s*INSERT INTO meta\b/.test(query) ? `${query} [key ${String(bindings[0])}]` : query,
    )
    // Writes run when exec returns; a SELECT's rows are read as they are iterated, and counted as they are.
    const seen = { written: cursor.rowsWritten, read: cursor.rowsRead }
    counted.rowsWritten += seen.written
    counted.rowsRead += seen.read
    statement.calls++
    statement.rowsWritten += seen.written
    return new Proxy(cursor, {
      get(inner, name) {
        const value = inner[name]
        if (typeof value !== 'function') return value
        return (...args: unknown[]) => {
          const result = Reflect.apply(value, inner, args)
          counted.rowsRead += inner.rowsRead - seen.read
          counted.rowsWritten += inner.rowsWritten - seen.written
          statement.rowsWritten += inner.rowsWritten - seen.written
          seen.read = inner.rowsRead
          seen.written = inner.rowsWritten
          return result
        }
      },
    })
  }
  const storage = state.storage
  const setAlarm = storage.setAlarm
  storage.setAlarm = (...args: unknown[]) => {
    objectUsage(key).rowsWritten += 1
    const statement = statementUsage(binding, 'setAlarm')
    statement.calls++
    statement.rowsWritten++
    return Reflect.apply(setAlarm, storage, args)
  }
}

/**
 * A Durable Object class whose instances get the metered state and environment, whose alarms are counted, and each
 * of whose calls and alarms is an invocation with its own subrequest counts.
 */
function metered<T extends new (...args: any[]) => any>(Base: T, binding: string): T {
  const Metered = class extends Base {
    constructor(...args: any[]) {
      const [state, env] = args
      meterState(state, `${binding}:${state.id.name ?? state.id.toString()}`)
      super(state, meteredEnv(env))
    }
  }
  for (const name of Object.getOwnPropertyNames(Base.prototype)) {
    // Methods only: reading an accessor (an object's `address`) off the prototype would run it with no object.
    const method = Object.getOwnPropertyDescriptor(Base.prototype, name)?.value
    if (name === 'constructor' || name === 'alarm' || typeof method !== 'function') continue
    Object.defineProperty(Metered.prototype, name, {
      value(this: object, ...args: unknown[]) {
        return asInvocation(`${binding}.${name}`, () => method.apply(this, args), this)
      },
    })
  }
  if (typeof Base.prototype.alarm === 'function') {
    Object.defineProperty(Metered.prototype, 'alarm', {
      value(this: { ctx: Any }, ...args: unknown[]) {
        const usageOf = objectUsage(`${binding}:${this.ctx.id.name ?? this.ctx.id.toString()}`)
        usageOf.alarms++
        usageOf.requests++
        usage.methods[`${binding}.alarm`] = (usage.methods[`${binding}.alarm`] ?? 0) + 1
        return asInvocation(`${binding}.alarm`, () => Base.prototype.alarm.apply(this, args), this)
      },
    })
  }
  return Metered
}

/** A WorkerEntrypoint whose instances get the metered environment and each of whose calls is an invocation. */
function meteredEntrypoint<T extends new (...args: any[]) => any>(Base: T, binding: string): T {
  const Metered = class extends Base {
    constructor(...args: any[]) {
      const [ctx, env] = args
      super(ctx, meteredEnv(env))
    }
  }
  for (const name of Object.getOwnPropertyNames(Base.prototype)) {
    // Methods only: reading an accessor (an object's `address`) off the prototype would run it with no object.
    const method = Object.getOwnPropertyDescriptor(Base.prototype, name)?.value
    if (name === 'constructor' || typeof method !== 'function') continue
    Object.defineProperty(Metered.prototype, name, {
      value(this: object, ...args: unknown[]) {
        usage.workerInvocations++
        return asInvocation(`${binding}.${name}`, () => method.apply(this, args))
      },
    })
  }
  return Metered
}

const classes = project as unknown as Record<string, new (...args: any[]) => any>

// The Durable Object classes of the tree being metered, each under its binding's name (bench/cost.ts writes these
// lines for the revision it builds; these are this tree's).
// METERED-EXPORTS-START
export const RunCoordinator = metered(classes.RunCoordinator!, 'RUN_COORDINATOR')
export const RubricInstance = metered(classes.RubricInstance!, 'RUBRIC_INSTANCE')
export const LedgerShard = metered(classes.LedgerShard!, 'LEDGER')
export const MemoryIndex = metered(classes.MemoryIndex!, 'MEMORY_INDEX')
export const JudgeEntrypoint = meteredEntrypoint(classes.JudgeEntrypoint!, 'JUDGE')
// METERED-EXPORTS-END

const worker = project.default as unknown as {
  fetch: (...args: any[]) => Promise<Response>
  queue?: (...args: any[]) => Promise<void>
}

export default {
  async fetch(request: Request, env: Any, ctx: ExecutionContext): Promise<Response> {
    connectionLimit = Number(env.BENCH_CONNECTION_LIMIT ?? 0)
    serviceHoldsConnection = env.BENCH_SERVICE_HOLDS_CONNECTION !== 'false'
    const path = new URL(request.url).pathname
    if (path === '/__meter') return Response.json({ ...usage, invocations: invocationUsage })
    usage.workerInvocations++
    const route = path.replace(/^\/runs\/[^/]+/, '')
    return asInvocation(`fetch ${route}`, () => worker.fetch(request, meteredEnv(env), ctx))
  },
  async queue(batch: Any, env: Any, ctx: ExecutionContext): Promise<void> {
    usage.workerInvocations++
    // Each message is metered as the invocation it is on Cloudflare with max_batch_size = 1, however many
    // messages the local broker hands over at once (bench:step asks for more: it delivers one batch at a time).
    await Promise.all(
      batch.messages.map((message: Any) =>
        asInvocation(`queue ${batch.queue}`, () =>
          worker.queue!(
            {
              ...batch,
              queue: batch.queue,
              messages: [message],
              ackAll: () => message.ack(),
              retryAll: (o: unknown) => message.retry(o),
            },
            meteredEnv(env),
            ctx,
          ),
        ),
      ),
    )
  },
}
