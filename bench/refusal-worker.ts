/**
 * The Worker with a meter on request bodies, for `bench/refusal.ts` only (never deployed): every body the Worker is
 * handed is a stream that counts the bytes pulled from it (nothing is pulled before the Worker asks), and
 * `GET /__read` answers the total. Everything else is the project's Worker as it is.
 */
import * as project from '../workers/index.ts'

export * from '../workers/index.ts'

let bytesRead = 0

/** `body` as a stream that counts what is pulled from it and pulls nothing ahead. */
function counted(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = body.getReader()
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const { done, value } = await reader.read()
        if (done) return controller.close()
        bytesRead += value.byteLength
        controller.enqueue(value)
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  )
}

const worker = project.default as unknown as {
  fetch: (request: Request, env: unknown, ctx: ExecutionContext) => Promise<Response>
  queue: (...args: unknown[]) => Promise<void>
}

export default {
  async fetch(request: Request, env: unknown, ctx: ExecutionContext): Promise<Response> {
    if (new URL(request.url).pathname === '/__read') return Response.json({ bytes_read: bytesRead })
    const metered = request.body ? new Request(request, { body: counted(request.body) }) : request
    return worker.fetch(metered, env, ctx)
  },
  queue: (...args: unknown[]) => worker.queue(...args),
}
