/**
 * CPU profiles of workerd isolates over the V8 inspector (Miniflare `inspectorPort`), summarised by the
 * bundle module each sample falls in (wrangler's bundle marks every module with a `// path` comment).
 */
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { fetch as miniflareFetch, type WebSocket as MiniflareWebSocket } from 'miniflare'

interface CallFrame {
  functionName: string
  url: string
  lineNumber: number
  columnNumber: number
}

interface ProfileNode {
  id: number
  callFrame: CallFrame
  children?: number[]
}

/** A V8 CPU profile as `Profiler.stop` returns it. */
export interface CpuProfile {
  nodes: ProfileNode[]
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

export interface InspectorSession {
  send<T = unknown>(method: string, params?: Record<string, unknown>): Promise<T>
  close(): void
}

/**
 * A free TCP port on 127.0.0.1 (for Miniflare's inspector).
 * @example const port = await freePort()
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      )
    })
  })
}

/**
 * Opens a Chrome DevTools Protocol session on one workerd isolate, e.g. `core:user:app`.
 * @example const session = await connectInspector(9229, 'core:user:app'); await session.send('Profiler.enable')
 */
export async function connectInspector(port: number, target: string): Promise<InspectorSession> {
  const response = await miniflareFetch(`http://127.0.0.1:${port}/${target}`, { headers: { upgrade: 'websocket' } })
  const socket: MiniflareWebSocket | null = response.webSocket
  if (!socket) throw new Error(`no inspector websocket for ${target} (HTTP ${response.status})`)
  socket.accept()
  let nextId = 1
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>()
  socket.addEventListener('message', (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: { message: string } }
    const waiter = message.id === undefined ? undefined : pending.get(message.id)
    if (!waiter) return
    pending.delete(message.id!)
    if (message.error) waiter.reject(new Error(`${target}: ${message.error.message}`))
    else waiter.resolve(message.result)
  })
  return {
    send: <T>(method: string, params: Record<string, unknown> = {}) =>
      new Promise<T>((resolve, reject) => {
        const id = nextId++
        pending.set(id, { resolve: resolve as (value: unknown) => void, reject })
        socket.send(JSON.stringify({ id, method, params }))
      }),
    close: () => socket.close(),
  }
}

/**
 * Maps a line of a wrangler bundle to the module it came from, using the `// path/to/module.ts` markers.
 * @example const moduleOf = bundleModuleMap('/tmp/build/worker/index.js'); moduleOf(10372) // 'src/hash/index.ts'
 */
export function bundleModuleMap(bundlePath: string): (line: number) => string {
  const markers: { line: number; module: string }[] = []
  readFileSync(bundlePath, 'utf8')
    .split('\n')
    .forEach((text, index) => {
      const match = text.match(/^\/\/ ((?:[\w@.-]+\/)*[\w@.-]+\.(?:ts|js|mjs|cjs|json))$/)
      if (match) markers.push({ line: index, module: match[1]! })
    })
  return (line: number) => {
    let low = 0
    let high = markers.length - 1
    let found = '(bundle prelude)'
    while (low <= high) {
      const mid = (low + high) >> 1
      if (markers[mid]!.line <= line) {
        found = markers[mid]!.module
        low = mid + 1
      } else high = mid - 1
    }
    return found
  }
}

/**
 * Groups a bundle module path: a dependency becomes its package (`zod`, `hono`), own code stays a file.
 * @example moduleGroup('node_modules/zod/v4/core/schemas.js') // 'zod'
 */
export function moduleGroup(module: string): string {
  const match = module.match(/node_modules\/((?:@[\w.-]+\/)?[\w.-]+)/)
  return match ? match[1]! : module
}

export interface ProfileSummary {
  /** Sampled wall time of the profile, ms. */
  totalMs: number
  /** Sampled time not idle, ms (what the isolate's thread spent on JS, GC and runtime calls). */
  busyMs: number
  byGroup: { name: string; selfMs: number }[]
  byFunction: { name: string; selfMs: number }[]
  /** Inclusive (self + callees) time of named functions, ms; only their synchronous parts. */
  inclusive: { name: string; totalMs: number }[]
}

/**
 * Self time per module group and per function, and inclusive time of the named functions.
 * @example summarizeProfile(profile, moduleOf, ['scoreRollout', 'judgementKey'])
 */
export function summarizeProfile(
  profile: CpuProfile,
  moduleOf: ((line: number) => string) | undefined,
  inclusiveOf: readonly string[] = [],
): ProfileSummary {
  const selfUs = new Map<number, number>()
  profile.samples.forEach((nodeId, index) =>
    selfUs.set(nodeId, (selfUs.get(nodeId) ?? 0) + (profile.timeDeltas[index] ?? 0)),
  )
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const parentOf = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id)
  const groupOf = (frame: CallFrame) => {
    if (!frame.url) return frame.functionName.startsWith('(') ? frame.functionName : '(runtime builtins)'
    if (!moduleOf || /^node:|^cloudflare:|internal/.test(frame.url)) return `(${frame.url.replace(/^.*\//, '')})`
    return moduleGroup(moduleOf(frame.lineNumber))
  }
  const add = (map: Map<string, number>, key: string, us: number) => map.set(key, (map.get(key) ?? 0) + us)
  const groups = new Map<string, number>()
  const functions = new Map<string, number>()
  const inclusive = new Map<string, number>()
  let totalUs = 0
  let idleUs = 0
  for (const [nodeId, us] of selfUs) {
    const node = byId.get(nodeId)
    if (!node) continue
    totalUs += us
    if (node.callFrame.functionName === '(idle)') {
      idleUs += us
      continue
    }
    const group = groupOf(node.callFrame)
    add(groups, group, us)
    add(
      functions,
      `${node.callFrame.functionName || '(anonymous)'} [${group}${moduleOf && node.callFrame.url ? `:${node.callFrame.lineNumber + 1}` : ''}]`,
      us,
    )
    // Inclusive: charge each named ancestor once per sample stack.
    const seen = new Set<string>()
    for (let cursor: number | undefined = nodeId; cursor !== undefined; cursor = parentOf.get(cursor)) {
      const name = byId.get(cursor)?.callFrame.functionName ?? ''
      if (inclusiveOf.includes(name) && !seen.has(name)) {
        seen.add(name)
        add(inclusive, name, us)
      }
    }
  }
  const sorted = (map: Map<string, number>) => [...map].sort((a, b) => b[1] - a[1])
  return {
    totalMs: totalUs / 1_000,
    busyMs: (totalUs - idleUs) / 1_000,
    byGroup: sorted(groups).map(([name, us]) => ({ name, selfMs: us / 1_000 })),
    byFunction: sorted(functions).map(([name, us]) => ({ name, selfMs: us / 1_000 })),
    inclusive: inclusiveOf.map((name) => ({ name, totalMs: (inclusive.get(name) ?? 0) / 1_000 })),
  }
}
