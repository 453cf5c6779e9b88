/**
 * How RL trainers call a remote reward server, re-implemented from their published source so end-to-end tests can
 * drive the Worker exactly as each trainer does: how the batch is split, the body, timeouts and retries, and what
 * the trainer then does with the answer (that last step is where a slightly-off answer crashes a training job).
 * Failures are thrown as {@link TrainerError}, named after the Python exception the trainer would raise.
 *
 * Sources read (bare mirrors, `git show <rev>:<path>`):
 * - OpenRLHF/OpenRLHF v0.8.3 (d86779b) … v0.9.0 (06ab51e): `openrlhf/utils/remote_rm_utils.py` (identical in
 *   every tag of that range) and `update_samples_with_rewards` in `openrlhf/trainer/ppo_utils/experience_maker.py`.
 * - OpenRLHF/OpenRLHF HEAD 3c3be62 (2026-08-13; same logic since v0.9.1): `openrlhf/utils/agent.py`
 *   (`SingleTurnAgentExecutor.execute`, `_fetch_rewards_via_http`), `openrlhf/trainer/ppo_utils/samples_generator.py`.
 * - THUDM/slime HEAD 624b824 (2026-08-21): `slime/rollout/rm_hub/__init__.py` (`remote_rm`, `_get_shared_session`,
 *   `batched_async_rm`), `slime/utils/types.py` (`Sample.get_reward_value`), `slime/ray/rollout.py`
 *   (`_post_process_rewards`), `slime/utils/arguments.py` (`--reward-key`).
 * - aiohttp 3.14.3 `aiohttp/client_reqrep.py` (`ClientResponse.json`), which both aiohttp-based clients call.
 */

/** OpenRLHF's request timeout, seconds 180 (requests' `timeout=` and aiohttp's `ClientTimeout(total=)`). */
const OPENRLHF_TIMEOUT_MS = 180_000
/** OpenRLHF's `try_max_times`. */
const OPENRLHF_TRIES = 5
/** OpenRLHF's `sleep(1)` after every failed try, the last one included. */
const OPENRLHF_RETRY_WAIT_MS = 1_000
/** slime's `ClientTimeout(total=120)`, per attempt, time queued for a pooled connection included. */
const SLIME_TIMEOUT_MS = 120_000
/** slime's `remote_rm(..., max_retries=10)`: attempts in all, not retries after the first. */
const SLIME_MAX_ATTEMPTS = 10
/** slime's `TCPConnector(limit=64)`, shared by every `remote_rm` call in the process. */
const SLIME_CONNECTION_LIMIT = 64
/** slime's backoff ceiling before jitter: `min(2**attempt, 30)`. */
const SLIME_MAX_BACKOFF_S = 30
/** aiohttp's test for `ClientResponse.json()`: the lower-cased Content-Type must match this. */
const AIOHTTP_JSON_CONTENT_TYPE = /^application\/(?:[\w.+-]+?\+)?json/

/**
 * An exception as the trainer's Python raises it: `type` is the Python class (`KeyError`, `TypeError`,
 * `ClientResponseError`, …) and `status` the HTTP status when an answer came.
 * @example try { await openRlhfLegacy(urls, q, p, l) } catch (error) { if (error instanceof TrainerError) error.type }
 */
export class TrainerError extends Error {
  readonly type: string
  readonly status: number | undefined

  constructor(type: string, message: string, options: { status?: number; cause?: unknown } = {}) {
    super(`${type}: ${message}`, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'TrainerError'
    this.type = type
    this.status = options.status
  }
}

/** What a trainer logs (`logger.info` / `logger.warning` lines); tests count retries with it. */
type TrainerLog = (line: string) => void

/** A chat message as slime passes a dataset prompt through (`content` text or a list of parts). */
interface ChatMessage {
  role: string
  content: string | Array<{ type: string; text?: string; [key: string]: unknown }> | null
}

/**
 * The releases whose `update_samples_with_rewards` differ: `v0.8.3` is v0.8.3 to v0.8.9.post1, `v0.8.10` is
 * v0.8.10 and v0.8.11, `v0.9.0` is v0.9.0 (v0.9.1 moved to per-sample requests: {@link openRlhfSample}).
 */
type OpenRlhfLegacyRelease = 'v0.8.3' | 'v0.8.10' | 'v0.9.0'

/**
 * Options of {@link openRlhfLegacy}; each defaults to the trainer's own value, shorten them only to speed a test.
 * @example const options: OpenRlhfLegacyOptions = { retryWaitMs: 10 }
 */
export interface OpenRlhfLegacyOptions {
  /** requests' `timeout=180`: for the answer's headers, then again for its body (requests times each read). */
  timeoutMs?: number
  /** `try_max_times`, 5. */
  tries?: number
  /** The wait after each failed try (the last one too), 1 s. */
  retryWaitMs?: number
  /** Which merge to apply to the answers; default `v0.9.0`. */
  release?: OpenRlhfLegacyRelease
  log?: TrainerLog
}

/**
 * What OpenRLHF ≤ v0.9.0 holds after the rewards call: rewards and scores concatenated over the servers in server
 * order, and `extra_logs` merged by the first server's keys (null when the first answer has none).
 * @example const { rewards, extraLogs } = await openRlhfLegacy(urls, queries, prompts, labels)
 */
export interface OpenRlhfLegacyResult {
  rewards: number[]
  scores: number[]
  extraLogs: Record<string, number[]> | null
  /** Each server's parsed answer, in server order. */
  answers: unknown[]
}

/**
 * OpenRLHF v0.8.3 to v0.9.0 with `--remote_rm_url a,b,…`: the whole rollout batch goes to the reward servers in one
 * round. `RemoteRewardModel.get_rewards` cuts it into `ceil(n / servers)`-sized slices, server i getting slice i
 * (trailing servers get empty lists when there are fewer samples than that), one Ray task per server, all at once.
 * Each task (`request_api_wrapper`) POSTs `{query, prompts, labels}` with requests, `timeout=180`, no auth header,
 * then `raise_for_status()` and `.json()`; any failure (4xx included, and a body that is not JSON) is logged and
 * retried after 1 s, 5 tries in all, then `Exception("Request error for 5 times, …")`, which kills the job.
 * The answers are then merged as `update_samples_with_rewards` does: `rewards` from every answer (KeyError if one
 * lacks it); `scores` from every answer when the first has them, else the rewards; `extra_logs` by the first
 * answer's keys (KeyError when another answer lacks one); each list through `torch.as_tensor` (numbers or booleans
 * only), and the total must equal the number of queries (torch's `split` fails otherwise). Before v0.8.10 the
 * lists were concatenated without `as_tensor`, so any JSON answer failed (OpenRLHF#1118); v0.8.10 and v0.8.11 still
 * did so for `extra_logs` (fixed in 67302219, first in v0.9.0).
 * Source: `openrlhf/utils/remote_rm_utils.py` at v0.8.3…v0.9.0, `experience_maker.py` at v0.8.3, v0.8.10, v0.9.0.
 * @example const { rewards } = await openRlhfLegacy([`${base}/t/${token}/compat/openrlhf`], [p + r], [p], ['4'])
 */
export async function openRlhfLegacy(
  urls: string[],
  queries: string[],
  prompts: string[],
  labels: string[],
  options: OpenRlhfLegacyOptions = {},
): Promise<OpenRlhfLegacyResult> {
  if (urls.length === 0) throw new TrainerError('ZeroDivisionError', 'integer division or modulo by zero')
  const sliceSize = Math.ceil(queries.length / urls.length)
  const answers = await Promise.all(
    urls.map((url, index) => {
      const start = index * sliceSize
      const end = Math.min((index + 1) * sliceSize, queries.length)
      const body = {
        query: queries.slice(start, end),
        prompts: prompts.slice(start, end),
        labels: labels.slice(start, end),
      }
      return requestApiWrapper(url, body, options)
    }),
  )
  return mergeLegacyAnswers(answers, queries.length, options.release ?? 'v0.9.0')
}

function requestApiWrapper(url: string, data: unknown, options: OpenRlhfLegacyOptions): Promise<unknown> {
  return withFlatRetries(
    () => requestsPostJson(url, pythonJson(data), options.timeoutMs ?? OPENRLHF_TIMEOUT_MS),
    'Exception',
    options,
  )
}

/**
 * OpenRLHF's retry loop (both shapes): any failure is logged, then 1 s of sleep, the last try too; after the last,
 * `errorType` ("Exception" up to v0.9.0, "RuntimeError" since).
 */
async function withFlatRetries(
  post: () => Promise<unknown>,
  errorType: string,
  options: OpenRlhfSampleOptions,
): Promise<unknown> {
  const tries = options.tries ?? OPENRLHF_TRIES
  const log = options.log ?? (() => {})
  for (let attempt = 0; attempt < tries; attempt++) {
    try {
      return await post()
    } catch (error) {
      log(`Request error, please check: ${describe(error)}`)
    }
    await sleep(options.retryWaitMs ?? OPENRLHF_RETRY_WAIT_MS)
  }
  throw new TrainerError(errorType, `Request error for ${tries} times, returning None. Please check the API server.`)
}

/**
 * `requests.post(url, json=…, headers={"Content-Type": "application/json"}, timeout=…)`, `raise_for_status()`,
 * `.json()`.
 */
async function requestsPostJson(url: string, body: string, timeoutMs: number): Promise<unknown> {
  const controller = new AbortController()
  const arm = (phase: string) =>
    setTimeout(
      () =>
        controller.abort(
          new TrainerError('ReadTimeout', `${phase}: read timed out. (read timeout=${timeoutMs / 1000})`),
        ),
      timeoutMs,
    )
  let timer = arm('waiting for the answer')
  try {
    const response = await send(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: '*/*', 'user-agent': 'python-requests' },
      body,
      signal: controller.signal,
    })
    clearTimeout(timer)
    // requests reads the whole body before raise_for_status (stream=False).
    timer = arm('reading the answer')
    const text = await readText(response, controller.signal)
    if (response.status >= 400) {
      const kind = response.status < 500 ? 'Client Error' : 'Server Error'
      throw new TrainerError('HTTPError', `${response.status} ${kind}: ${response.statusText} for url: ${url}`, {
        status: response.status,
      })
    }
    return parseAnswer(text, response.status)
  } finally {
    clearTimeout(timer)
  }
}

/** `.json()` of requests and aiohttp alike: the body parsed, or a JSONDecodeError. */
function parseAnswer(text: string, status: number): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch (error) {
    throw new TrainerError('JSONDecodeError', `the answer is not JSON (${describe(error)})`, { status })
  }
}

function mergeLegacyAnswers(answers: unknown[], total: number, release: OpenRlhfLegacyRelease): OpenRlhfLegacyResult {
  const first = answers[0]
  const rewards = concatenate(
    answers.map((answer) => pyGetItem(answer, 'rewards')),
    release !== 'v0.8.3',
    total,
  )
  const scores = pyContains(first, 'scores')
    ? concatenate(
        answers.map((answer) => pyGetItem(answer, 'scores')),
        release !== 'v0.8.3',
        total,
      )
    : rewards
  let extraLogs: Record<string, number[]> | null = null
  if (pyContains(first, 'extra_logs')) {
    extraLogs = {}
    for (const key of pyKeys(pyGetItem(first, 'extra_logs'))) {
      const logs = answers.map((answer) => pyGetItem(answer, 'extra_logs'))
      extraLogs[key] = concatenate(
        logs.map((log) => pyGetItem(log, key)),
        release === 'v0.9.0',
        total,
      )
    }
  }
  return { rewards, scores, extraLogs, answers }
}

/**
 * `torch.cat([torch.as_tensor(part) …]).split(samples_len)` over the servers' lists, or `torch.cat(parts)` without
 * `as_tensor` (`converted` false), which refuses any plain list.
 */
function concatenate(parts: unknown[], converted: boolean, total: number): number[] {
  const values: number[] = []
  parts.forEach((part, index) => {
    if (!converted)
      throw new TrainerError(
        'TypeError',
        `expected Tensor as element ${index} in argument 0, but got ${pyTypeName(part)}`,
      )
    values.push(...asTensor1d(part))
  })
  if (values.length !== total) {
    throw new TrainerError(
      'RuntimeError',
      `split_with_sizes expects split_sizes to sum exactly to ${values.length} ` +
        `(input tensor's size at dimension 0), but got split_sizes=[${total}]`,
    )
  }
  return values
}

/** `torch.as_tensor` of what a server sent, as far as a one-dimensional list of numbers goes. */
function asTensor1d(value: unknown): number[] {
  if (!Array.isArray(value)) {
    if (typeof value === 'number' || typeof value === 'boolean')
      throw new TrainerError('RuntimeError', 'zero-dimensional tensor (at position 0) cannot be concatenated')
    throw new TrainerError('TypeError', `Could not infer dtype of ${pyTypeName(value)}`)
  }
  return value.map((item) => {
    if (typeof item === 'number') return item
    if (typeof item === 'boolean') return item ? 1 : 0
    if (typeof item === 'string') throw new TrainerError('ValueError', "too many dimensions 'str'")
    throw new TrainerError('TypeError', `Could not infer dtype of ${pyTypeName(item)}`)
  })
}

/**
 * Options of {@link openRlhfSample}; each defaults to the trainer's own value.
 * @example const options: OpenRlhfSampleOptions = { retryWaitMs: 10 }
 */
export interface OpenRlhfSampleOptions {
  /** aiohttp `ClientTimeout(total=180)`, per try: connecting, sending and reading the answer. */
  timeoutMs?: number
  /** `try_max_times`, 5. */
  tries?: number
  /** The wait after each failed try (the last one too), 1 s. */
  retryWaitMs?: number
  log?: TrainerLog
}

/**
 * What the executor's output carries when a reward came: `reward` is the answer's `rewards` as sent (a one-item
 * list from a conforming server), `scores` its `scores` or else `rewards`, `extraLogs` its `extra_logs` or `{}`.
 * @example const result = await openRlhfSample(urls, q, p, l); const reward = (result?.reward as number[])[0]
 */
export interface OpenRlhfSampleResult {
  reward: unknown
  scores: unknown
  extraLogs: Record<string, unknown>
  /** Each server's parsed answer, in server order. */
  answers: unknown[]
}

/**
 * OpenRLHF ≥ v0.9.1 (HEAD): one request per generated sample. `_fetch_rewards_via_http` still shards the one-item
 * lists over the servers with `ceil(1 / servers) = 1`: server 0 gets the item, every other server
 * `{query: [], prompts: [], labels: []}`, all POSTed at once (aiohttp, a new session per try,
 * `ClientTimeout(total=180)`, no auth header). Each POST is tried 5 times, 1 s apart, whatever the failure (4xx,
 * a non-JSON Content-Type, a timeout); then `RuntimeError`. Only answer 0 is read, yet one failing server fails
 * them all (`asyncio.gather`). `execute` catches any error, logs it and leaves the reward None, as it does for an
 * empty or falsy answer 0 (aiohttp's `.json()` gives None for an empty body) or one without `rewards`: this then
 * returns null. An answer 0 that is truthy but not an object fails `.get` (AttributeError), also caught: null.
 * Source: `openrlhf/utils/agent.py` at HEAD 3c3be62 (same at v0.9.1, v0.10.0, v0.11.0); the reward then goes
 * through `torch.tensor([reward])` in `samples_generator.py` `_process_response_into_experience`.
 * @example const result = await openRlhfSample([`${base}/t/${token}/compat/openrlhf`], p + r, p, '4')
 */
export async function openRlhfSample(
  urls: string[],
  query: string,
  prompt: string,
  label: string,
  options: OpenRlhfSampleOptions = {},
): Promise<OpenRlhfSampleResult | null> {
  const log = options.log ?? (() => {})
  let answers: unknown[]
  try {
    if (urls.length === 0) throw new TrainerError('ZeroDivisionError', 'integer division or modulo by zero')
    const sliceSize = Math.ceil(1 / urls.length)
    answers = await Promise.all(
      urls.map((url, index) => {
        const start = index * sliceSize
        const end = Math.min((index + 1) * sliceSize, 1)
        const body = {
          query: [query].slice(start, end),
          prompts: [prompt].slice(start, end),
          labels: [label].slice(start, end),
        }
        return postWithFlatRetries(url, body, options)
      }),
    )
  } catch (error) {
    log(`[SingleTurnExecutor] Failed to fetch reward from remote RM: ${describe(error)}`)
    return null
  }
  const info = answers[0]
  if (!pyTruthy(info)) return null
  if (!isDict(info)) {
    log(
      `[SingleTurnExecutor] Failed to fetch reward from remote RM: '${pyTypeName(info)}' object has no attribute 'get'`,
    )
    return null
  }
  const reward = info.rewards ?? null
  if (reward === null) return null
  const extraLogs = pyTruthy(info.extra_logs) ? info.extra_logs : {}
  // samples_generator calls extra_logs.items() outside execute's try: anything but an object kills the job there.
  if (!isDict(extraLogs))
    throw new TrainerError('AttributeError', `'${pyTypeName(extraLogs)}' object has no attribute 'items'`)
  return { reward, scores: info.scores ?? reward, extraLogs, answers }
}

function postWithFlatRetries(url: string, data: unknown, options: OpenRlhfSampleOptions): Promise<unknown> {
  return withFlatRetries(
    () => aiohttpPostJson(url, pythonJson(data), options.timeoutMs ?? OPENRLHF_TIMEOUT_MS),
    'RuntimeError',
    options,
  )
}

/**
 * `session.post(url, json=…)` then `raise_for_status()` and `.json()`, all under one total deadline; `slot` is
 * where the attempt waits for a pooled connection first (the deadline already running), as aiohttp's does.
 */
async function aiohttpPostJson(url: string, body: string, timeoutMs: number, slot?: ConnectionPool): Promise<unknown> {
  const controller = new AbortController()
  const timer = setTimeout(
    () =>
      controller.abort(new TrainerError('TimeoutError', `no answer within the total timeout of ${timeoutMs / 1000} s`)),
    timeoutMs,
  )
  const release = slot ? await slot.acquire(controller.signal) : () => {}
  try {
    const response = await send(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: '*/*', 'user-agent': 'Python aiohttp' },
      body,
      signal: controller.signal,
    })
    if (response.status >= 400) {
      await response.body?.cancel().catch(() => {})
      throw new TrainerError(
        'ClientResponseError',
        `${response.status}, message='${response.statusText}', url='${url}'`,
        { status: response.status },
      )
    }
    const text = await readText(response, controller.signal)
    const contentType = (response.headers.get('content-type') ?? '').toLowerCase()
    if (!AIOHTTP_JSON_CONTENT_TYPE.test(contentType)) {
      throw new TrainerError(
        'ContentTypeError',
        `${response.status}, message='Attempt to decode JSON with unexpected mimetype: ${contentType}', url='${url}'`,
        { status: response.status },
      )
    }
    if (text.trim() === '') return null
    return parseAnswer(text, response.status)
  } finally {
    clearTimeout(timer)
    release()
  }
}

/**
 * A connection pool's cap: at most `limit` requests hold a connection at once, the rest queue in arrival order.
 * @example const pool = new ConnectionPool(64); const release = await pool.acquire(); release()
 */
class ConnectionPool {
  readonly limit: number
  private active = 0
  private readonly queue: Array<() => void> = []

  constructor(limit: number) {
    this.limit = limit
  }

  /** Resolves with the release function once a connection is free; rejects if `signal` aborts while queued. */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    if (this.active < this.limit) {
      this.active++
    } else {
      // A released connection is handed straight to the next waiter, so no newcomer can take it in between.
      await new Promise<void>((resolve, reject) => {
        const wake = () => {
          signal?.removeEventListener('abort', abandon)
          resolve()
        }
        const abandon = () => {
          const at = this.queue.indexOf(wake)
          if (at >= 0) this.queue.splice(at, 1)
          reject(signal?.reason)
        }
        if (signal?.aborted) return abandon()
        signal?.addEventListener('abort', abandon, { once: true })
        this.queue.push(wake)
      })
    }
    let released = false
    return () => {
      if (released) return
      released = true
      const next = this.queue.shift()
      if (next) next()
      else this.active--
    }
  }
}

/** Like slime's module-level `_shared_session`: one 64-connection pool for every call that names no other. */
const SLIME_SHARED_POOL = new ConnectionPool(SLIME_CONNECTION_LIMIT)

/**
 * A sample as slime sends it: `prompt` text or chat messages as the dataset has them, `label` anything (None when
 * the dataset has none).
 * @example const sample: SlimeSample = { prompt: 'What is 2+2?', response: '4', label: '4' }
 */
export interface SlimeSample {
  prompt: string | ChatMessage[]
  response: string
  label?: unknown
}

/**
 * Options of {@link slimeRemoteRm}; each defaults to slime's own value.
 * @example const options: SlimeOptions = { rewardKey: 'score', backoffScale: 0.01 }
 */
export interface SlimeOptions {
  /** `--reward-key` (or `--eval-reward-key` for eval): the field of a dict answer that is the reward. */
  rewardKey?: string
  /**
   * Multiplies every backoff wait (default 1, slime's real waits: 1–2 s, 2–3 s, 4–5 s, 8–9 s, 16–17 s, then
   * 30–31 s, about 155 s over 10 attempts); tests pass e.g. 0.001 to keep the sequence but not the wait.
   */
  backoffScale?: number
  /** `max_retries`, 10: attempts in all. */
  maxAttempts?: number
  /** `ClientTimeout(total=120)`, per attempt, queueing for a connection included. */
  timeoutMs?: number
  /** The connection pool; default the process-wide 64-connection one, as slime shares one session. */
  pool?: ConnectionPool
  log?: TrainerLog
}

/**
 * A slime reward: `answer` is `sample.reward` (the whole JSON answer), `reward` what `get_reward_value` then gives.
 * @example const { reward } = await slimeRemoteRm(url, sample, { rewardKey: 'score' })
 */
export interface SlimeResult {
  answer: unknown
  reward: number
}

/**
 * slime `--rm-type remote_rm --rm-url <url>` for one sample: `remote_rm` POSTs `{prompt, response, label}` on the
 * shared aiohttp session (64 connections, `ClientTimeout(total=120)`, no auth header), then `raise_for_status()`
 * and `.json()`. Every failure is retried, 4xx and a non-JSON Content-Type included (the code catches `Exception`),
 * for 10 attempts in all, waiting `min(2**attempt, 30) + random()` seconds (times `backoffScale`) between them;
 * after the 10th it re-raises that attempt's error. peers.md §1.4 describes retrying only transient errors and
 * failing fast on 4xx (THUDM/slime PR #1582); the code at HEAD is PR #1617's catch-all, reproduced here.
 * The answer becomes `sample.reward`; `get_reward_value` then takes `reward[rewardKey]` when a key is set (KeyError
 * if absent), and the value goes into `torch.tensor(..., dtype=torch.float)`: a dict answer without
 * `--reward-key` throws a TypeError there, as any value that is not a number or a boolean does.
 * Source: `slime/rollout/rm_hub/__init__.py` `remote_rm`, `slime/utils/types.py` `get_reward_value`,
 * `slime/ray/rollout.py` `_post_process_rewards`, at HEAD 624b824.
 * @example
 * const sample = { prompt: 'Q', response: 'A', label: 'A' }
 * const { reward } = await slimeRemoteRm(`${base}/t/${token}/compat/slime`, sample, { rewardKey: 'score' })
 */
export async function slimeRemoteRm(
  url: string,
  sample: SlimeSample,
  options: SlimeOptions = {},
): Promise<SlimeResult> {
  const answer = await remoteRm(url, sample, options)
  return { answer, reward: slimeRewardValue(answer, options.rewardKey) }
}

/**
 * Many samples the way slime's rollout scores them: every `remote_rm` at once (`asyncio.gather`, so the first
 * failure rejects while the others go on), all through one pool of 64 connections; then each reward through
 * `get_reward_value`, once every answer is in.
 * @example const results = await slimeRemoteRmAll(url, samples, { rewardKey: 'score' })
 */
export async function slimeRemoteRmAll(
  url: string,
  samples: SlimeSample[],
  options: SlimeOptions = {},
): Promise<SlimeResult[]> {
  const answers = await Promise.all(samples.map((sample) => remoteRm(url, sample, options)))
  return answers.map((answer) => ({ answer, reward: slimeRewardValue(answer, options.rewardKey) }))
}

/**
 * `Sample.get_reward_value` then the float conversion of `_post_process_rewards`: the answer itself without a
 * reward key, else its `rewardKey` field; it must then be a number (a boolean counts as 0 or 1).
 * @example slimeRewardValue({ score: 0.8 }, 'score') // 0.8
 */
function slimeRewardValue(answer: unknown, rewardKey?: string): number {
  const value = rewardKey ? pyGetItem(answer, rewardKey) : answer
  if (typeof value === 'number') return value
  if (typeof value === 'boolean') return value ? 1 : 0
  throw new TrainerError('TypeError', `must be real number, not ${pyTypeName(value)}`)
}

async function remoteRm(url: string, sample: SlimeSample, options: SlimeOptions): Promise<unknown> {
  const payload = { prompt: sample.prompt, response: sample.response, label: sample.label ?? null }
  const attempts = options.maxAttempts ?? SLIME_MAX_ATTEMPTS
  const log = options.log ?? (() => {})
  for (let attempt = 0; ; attempt++) {
    try {
      return await aiohttpPostJson(
        url,
        pythonJson(payload),
        options.timeoutMs ?? SLIME_TIMEOUT_MS,
        options.pool ?? SLIME_SHARED_POOL,
      )
    } catch (error) {
      if (attempt + 1 >= attempts) {
        log(`remote_rm failed after ${attempt + 1} attempts: ${describe(error)}`)
        throw error
      }
      const backoffS = Math.min(2 ** attempt, SLIME_MAX_BACKOFF_S) + Math.random()
      log(
        `remote_rm: ${error instanceof TrainerError ? error.type : 'Exception'}, ` +
          `retrying in ${backoffS.toFixed(1)}s (${attempt + 1}/${attempts})`,
      )
      await sleep(backoffS * 1000 * (options.backoffScale ?? 1))
    }
  }
}

/**
 * A value as Python's `json.dumps` writes it by default, which is what requests' and aiohttp's `json=` send:
 * `", "` and `": "` separators, non-ASCII escaped as `\uXXXX` (so the body is as long as the trainer's). Numbers are
 * written as JavaScript does (Python would write `1.0` for a float 1).
 * @example pythonJson({ query: ['é'] }) // '{"query": ["\\u00e9"]}'
 */
function pythonJson(value: unknown): string {
  if (value === null || value === undefined) return 'null'
  if (typeof value === 'string')
    return JSON.stringify(value).replace(
      /[\u0080-\uffff]/g,
      (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
    )
  if (typeof value === 'number' || typeof value === 'boolean') return JSON.stringify(value)
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(', ')}]`
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, item]) => item !== undefined)
    return `{${entries.map(([key, item]) => `${pythonJson(key)}: ${pythonJson(item)}`).join(', ')}}`
  }
  throw new TrainerError('TypeError', `Object of type ${typeof value} is not JSON serializable`)
}

/** `fetch`, with a refused or dropped connection turned into the error the Python client would raise. */
async function send(url: string, init: RequestInit & { signal: AbortSignal }): Promise<Response> {
  try {
    return await fetch(url, init)
  } catch (error) {
    throw transportError(error, init.signal)
  }
}

async function readText(response: Response, signal: AbortSignal): Promise<string> {
  try {
    return await response.text()
  } catch (error) {
    throw transportError(error, signal)
  }
}

function transportError(error: unknown, signal: AbortSignal): unknown {
  if (signal.aborted) return signal.reason
  return new TrainerError('ConnectionError', describe(error), { cause: error })
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** A message for a log line: the error's own, plus the cause `fetch` hides behind "fetch failed". */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  const cause = error.cause instanceof Error ? ` (${error.cause.message})` : ''
  return `${error.message}${cause}`
}

function isDict(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Python's truthiness of a parsed JSON value. */
function pyTruthy(value: unknown): boolean {
  if (value === null || value === undefined) return false
  if (Array.isArray(value)) return value.length > 0
  if (typeof value === 'object') return Object.keys(value).length > 0
  return Boolean(value)
}

/** The Python type a parsed JSON value would have. */
function pyTypeName(value: unknown): string {
  if (value === null || value === undefined) return 'NoneType'
  if (Array.isArray(value)) return 'list'
  if (typeof value === 'string') return 'str'
  if (typeof value === 'boolean') return 'bool'
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float'
  return 'dict'
}

/** `value[key]` with a string key, failing as Python does. */
function pyGetItem(value: unknown, key: string): unknown {
  if (isDict(value)) {
    if (!Object.hasOwn(value, key)) throw new TrainerError('KeyError', `'${key}'`)
    return value[key]
  }
  if (Array.isArray(value)) throw new TrainerError('TypeError', 'list indices must be integers or slices, not str')
  if (typeof value === 'string') throw new TrainerError('TypeError', "string indices must be integers, not 'str'")
  throw new TrainerError('TypeError', `'${pyTypeName(value)}' object is not subscriptable`)
}

/** `key in value`, failing as Python does for values that are not containers. */
function pyContains(value: unknown, key: string): boolean {
  if (isDict(value)) return Object.hasOwn(value, key)
  if (Array.isArray(value)) return value.includes(key)
  if (typeof value === 'string') return value.includes(key)
  throw new TrainerError('TypeError', `argument of type '${pyTypeName(value)}' is not iterable`)
}

/** `value.keys()`. */
function pyKeys(value: unknown): string[] {
  if (isDict(value)) return Object.keys(value)
  throw new TrainerError('AttributeError', `'${pyTypeName(value)}' object has no attribute 'keys'`)
}
