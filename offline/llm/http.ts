/**
 * The offline CLI's HTTP client for LLM servers: node:http(s) on Node's keep-alive global agents, shaped as the part
 * of `fetch` that OpenAIChatModel and the endpoint pool's probe use (see HttpFetch). Node's own `fetch` (undici)
 * costs about 1.2 ms of CPU per loopback chat request and ~140 ms to load on first use; this about 0.3 ms, and
 * nothing to load (bench/search-cpu.ts).
 */
import http, { type IncomingMessage } from 'node:http'
import https from 'node:https'
import type { HttpFetch, HttpReply } from '../../src/llm/openai.ts'

/**
 * One request, its body read whole; rejects with `init.signal`'s reason when it aborts (as `fetch` does), or with
 * the socket's error.
 * @example const reply = await nodeHttpFetch('http://127.0.0.1:8000/v1/models', { signal: AbortSignal.timeout(5000) })
 */
export const nodeHttpFetch: HttpFetch = (url, init = {}) =>
  new Promise<HttpReply>((resolve, reject) => {
    const { signal, body } = init
    if (signal?.aborted) return reject(signal.reason)
    const target = new URL(url)
    const headers = body === undefined ? init.headers : { ...init.headers, 'content-length': Buffer.byteLength(body) }
    const client = target.protocol === 'https:' ? https : http
    const settle = (outcome: () => void) => {
      signal?.removeEventListener('abort', abort)
      outcome()
    }
    const request = client.request(target, { method: init.method ?? 'GET', headers }, (response) => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('error', (error) => settle(() => reject(error)))
      response.on('end', () => settle(() => resolve(replyOf(response, Buffer.concat(chunks).toString('utf8')))))
    })
    const abort = () => request.destroy(signal!.reason as Error)
    signal?.addEventListener('abort', abort, { once: true })
    request.on('error', (error) => settle(() => reject(signal?.aborted ? signal.reason : error)))
    request.end(body)
  })

function replyOf(response: IncomingMessage, text: string): HttpReply {
  const status = response.statusCode ?? 0
  return {
    ok: status >= 200 && status < 300,
    status,
    headers: {
      get: (name) => {
        const value = response.headers[name.toLowerCase()]
        return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value
      },
    },
    text: async () => text,
    json: async () => JSON.parse(text) as unknown,
  }
}
