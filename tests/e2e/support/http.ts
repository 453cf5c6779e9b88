/**
 * What `callJson` returns: the status, headers and parsed JSON body (undefined when the body is not JSON).
 * @example const answer: JsonAnswer<{ score: number }> = await callJson(url)
 */
export interface JsonAnswer<T = any> {
  status: number
  headers: Headers
  body: T
}

/**
 * One real HTTP request to the Worker with an optional bearer token and JSON body; never throws on non-2xx.
 * @example const { status, body } = await callJson(`${dev.baseUrl}/score`, { method: 'POST', token, body: request })
 */
export async function callJson<T = any>(
  url: string,
  init: { method?: string; token?: string; body?: unknown; timeoutMs?: number } = {},
): Promise<JsonAnswer<T>> {
  const response = await fetch(url, {
    method: methodOf(init),
    headers: {
      accept: 'application/json',
      ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
    },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    signal: AbortSignal.timeout(init.timeoutMs ?? 30_000),
  })
  const text = await response.text()
  let body: T
  try {
    body = JSON.parse(text) as T
  } catch {
    body = undefined as T
  }
  return { status: response.status, headers: response.headers, body }
}

/**
 * `callJson` as every trainer's client sends a request, up to `attempts` times: a 503 is sent again after its
 * Retry-After (wrangler dev's proxy answers one for a write it lost under load, an overloaded object one of its own),
 * and a read (GET or HEAD) left unanswered past its timeout is sent again at once, with a warning on stderr (the
 * proxy has held a read unanswered on a loaded machine; a client's timeout and retry of an idempotent read ends it).
 * @example const answer = await callJsonRetrying(`${base}/score`, { token, body })
 */
export async function callJsonRetrying<T = any>(
  url: string,
  init: Parameters<typeof callJson>[1] = {},
  attempts = 5,
): Promise<JsonAnswer<T>> {
  const method = methodOf(init)
  for (let attempt = 1; ; attempt++) {
    let answer: JsonAnswer<T>
    try {
      answer = await callJson<T>(url, init)
    } catch (error) {
      const read = method === 'GET' || method === 'HEAD'
      const unansweredRead = read && error instanceof DOMException && error.name === 'TimeoutError'
      if (!unansweredRead || attempt === attempts) throw error
      console.warn(`${method} ${url}: no answer within its timeout (try ${attempt}); sent again`)
      continue
    }
    if (answer.status !== 503 || attempt === attempts) return answer
    await new Promise((resolve) => setTimeout(resolve, Number(answer.headers.get('retry-after') ?? 0) * 1_000 + 100))
  }
}

/** The method a request goes out with: the one given, else GET without a body and POST with one. */
function methodOf(init: { method?: string; body?: unknown }): string {
  return init.method ?? (init.body === undefined ? 'GET' : 'POST')
}

/**
 * Training metadata the e2e tests send with every rollout.
 * @example await callJson(`${base}/score`, { body: { rollout, metadata: METADATA } })
 */
export const METADATA = { high_level_goal: 'math', model_size: '7B', current_step: 0, total_steps: 10 } as const
