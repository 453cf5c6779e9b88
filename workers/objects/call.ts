import type { InstanceAddress, ShardAddress } from '../../durable-objects/contracts.ts'
import { coordinatorName, instanceName, ledgerName } from '../../durable-objects/names.ts'
import { AppError } from '../../src/errors/index.ts'
import type { Env } from '../env.ts'

/** Seconds a caller is told to wait after an overload: long enough for a queue of requests to drain. */
const OVERLOAD_RETRY_AFTER_S = 1

/**
 * Whether a Durable Object or D1 call failed because the object or database had more requests than it could queue.
 * The runtime marks a Durable Object's own `overloaded`; D1 and older runtimes say so in the message.
 * @example if (isOverloaded(error)) throw new AppError('overloaded', …)
 */
export function isOverloaded(error: unknown): boolean {
  const marked = error as { overloaded?: unknown; message?: unknown } | null | undefined
  if (marked?.overloaded === true) return true
  return (
    typeof marked?.message === 'string' &&
    /\boverloaded\b|too many requests queued|D1_ERROR.*(?:overloaded|too many requests)/i.test(marked.message)
  )
}

/**
 * Whether a Durable Object call failed because the object was reset under it (a deploy, an eviction, an `abort()`):
 * the runtime marks such errors `durableObjectReset` (or `retryable`), and the stub that saw one must not be reused.
 * @example if (isObjectReset(error)) stub = env.RUBRIC_INSTANCE.getByName(name)
 */
export function isObjectReset(error: unknown): boolean {
  const marks = error as { durableObjectReset?: unknown; retryable?: unknown } | null | undefined
  return marks?.durableObjectReset === true || marks?.retryable === true
}

/**
 * The one way the Worker calls a Durable Object. The call gets a fresh stub each time; when the object was reset
 * under it, it is made once more on a fresh stub (every call the Worker makes is idempotent: records are keyed by
 * rollout id, closes and commits by step, reads change nothing). An overload, or a second reset, is a 503
 * `overloaded` with `Retry-After`, which every client retries: neither is a fault of the caller's request.
 * @example const status = await callObject(env.RUN_COORDINATOR, coordinatorName(run.id), (run) => run.status(id))
 */
async function callObject<T extends Rpc.DurableObjectBranded | undefined, R>(
  namespace: DurableObjectNamespace<T>,
  name: string,
  call: (stub: DurableObjectStub<T>) => PromiseLike<R>,
): Promise<R> {
  try {
    try {
      return await call(namespace.getByName(name))
    } catch (error) {
      if (!isObjectReset(error)) throw error
      return await call(namespace.getByName(name))
    }
  } catch (error) {
    if (isOverloaded(error) || isObjectReset(error)) throw overloaded()
    throw error
  }
}

/**
 * The 503 a caller gets when storage could not take its request now.
 * @example if (isOverloaded(error)) throw overloaded()
 */
export function overloaded(): AppError {
  return new AppError(
    'overloaded',
    'the run is taking more requests than it can queue right now; retry after the delay',
    { retryAfterSeconds: OVERLOAD_RETRY_AFTER_S },
  )
}

type Stub<N> = N extends DurableObjectNamespace<infer T> ? DurableObjectStub<T> : never

/**
 * The run's objects by what they are, each reached through `callObject` under the name `durable-objects/names.ts`
 * gives it.
 * @example const status = await objects.coordinator(env, run.id, (coordinator) => coordinator.status(run.id))
 * @example await objects.ledger(env, address, (shard) => shard.record(address, submissions, 3))
 */
export const objects = {
  coordinator<R>(env: Env, runId: string, call: (stub: Stub<Env['RUN_COORDINATOR']>) => PromiseLike<R>) {
    return callObject(env.RUN_COORDINATOR, coordinatorName(runId), call)
  },
  instance<R>(env: Env, address: InstanceAddress, call: (stub: Stub<Env['RUBRIC_INSTANCE']>) => PromiseLike<R>) {
    return callObject(env.RUBRIC_INSTANCE, instanceName(address.runId, address.instanceId), call)
  },
  ledger<R>(env: Env, address: ShardAddress, call: (stub: Stub<Env['LEDGER']>) => PromiseLike<R>) {
    return callObject(env.LEDGER, ledgerName(address.runId, address.instanceId, address.shard), call)
  },
}
