/** The slice of autocannon 9's programmatic API the bench uses (the package ships no types). */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events'

  export interface AutocannonRequest {
    method?: string
    path?: string
    headers?: Record<string, string>
    body?: string | Buffer
    setupRequest?: (
      request: AutocannonRequest,
      context: Record<string, unknown>,
    ) => AutocannonRequest | null | undefined
    onResponse?: (status: number, body: string, context: Record<string, unknown>) => void
  }

  export interface AutocannonOptions {
    url: string
    connections?: number
    pipelining?: number
    duration?: number
    amount?: number
    timeout?: number
    method?: string
    headers?: Record<string, string>
    body?: string
    requests?: AutocannonRequest[]
    bailout?: number
    expectBody?: string
  }

  export interface Histogram {
    average: number
    mean: number
    stddev: number
    min: number
    max: number
    total: number
    p50: number
    p90: number
    p99: number
    p99_9?: number
  }

  export interface AutocannonResult {
    duration: number
    start: Date
    finish: Date
    errors: number
    timeouts: number
    non2xx: number
    resets: number
    '1xx': number
    '2xx': number
    '3xx': number
    '4xx': number
    '5xx': number
    statusCodeStats: Record<string, { count: number }>
    requests: Histogram & { sent: number }
    latency: Histogram
    throughput: Histogram
  }

  export interface AutocannonInstance extends EventEmitter, PromiseLike<AutocannonResult> {
    stop(): void
  }

  function autocannon(options: AutocannonOptions): AutocannonInstance
  export default autocannon
}
