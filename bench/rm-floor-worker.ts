/**
 * The floor for `npm run bench:rm`: a bare Hono Worker that does what any `/rm` request must — parse the body, make
 * the same single judge call per candidate to `JUDGE_URL` (an OpenAI-compatible chat completion naming one
 * criterion, padded to `JUDGE_REQUEST_BYTES`, the size of /rm's judge request, so the judge does the same work for
 * both), parse the reply — and nothing else: no auth, validation, D1, rubric or prompt template. Served by
 * `wrangler dev` like `npm start`, with bench/rm-floor.wrangler.toml. A batch keeps at most 6 judge calls in flight,
 * Cloudflare's limit of simultaneous open connections per invocation, which `wrangler dev` does not enforce.
 */
import { Hono } from 'hono'
import pLimit from 'p-limit'

const OPEN_CONNECTIONS = 6

interface FloorItem {
  prompt_id?: string
  prompt?: string
  candidate?: { candidate_id?: string; text?: string }
}

/**
 * Grades one candidate with one judge call; the score is the judge's grade of 0–5 over 5.
 * @example const { score } = await judgeOnce({ JUDGE_URL: 'http://127.0.0.1:9000/v1' }, item)
 */
async function judgeOnce(env: FloorEnv, item: FloorItem) {
  const user = `- quality (weight 1.000): the answer is correct.\n\n${item.prompt}\n\n${item.candidate?.text}`
  const request = (system: string) =>
    JSON.stringify({
      model: 'stub-judge',
      temperature: 0,
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: user },
      ],
    })
  const instructions = 'Grade the answer against each criterion from 0 to 5; reply with JSON.'
  const padding = Math.max(0, Number(env.JUDGE_REQUEST_BYTES ?? 0) - request(instructions).length)
  const response = await fetch(`${env.JUDGE_URL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer not-needed' },
    body: request(`${instructions} ${'.'.repeat(padding)}`),
  })
  const reply = (await response.json()) as { choices: [{ message: { content: string } }] }
  const { grades } = JSON.parse(reply.choices[0].message.content) as { grades: { quality: number } }
  return { prompt_id: item.prompt_id, candidate_id: item.candidate?.candidate_id, score: grades.quality / 5 }
}

interface FloorEnv {
  JUDGE_URL: string
  JUDGE_REQUEST_BYTES?: string
}

const app = new Hono<{ Bindings: FloorEnv }>()
  .post('/rm/:target/score', async (c) => c.json(await judgeOnce(c.env, await c.req.json<FloorItem>())))
  .post('/rm/:target/batch_score', async (c) => {
    const { items } = await c.req.json<{ items: FloorItem[] }>()
    const limit = pLimit(OPEN_CONNECTIONS)
    const results = await Promise.all(items.map((item) => limit(() => judgeOnce(c.env, item))))
    return c.json({ results: results.map((result, index) => ({ index, ok: true, ...result })) })
  })

export default app
