/**
 * An OpenAI-compatible chat server in its own Node process: the Worker reaches it over loopback HTTP as it would
 * reach a vLLM server, and its CPU is not workerd's. `STUB_LATENCY_MS` (0) delays every answer as a judge would;
 * `STUB_PORT` fixes its port (else any free one); `STUB_REPLY` picks the reply: `scorer` (default, the /score
 * scorer's grade list), `verifier` (a grade per criterion id, as the /rm verifier, the floor Worker of bench/rm.ts
 * and autosr's verifier read it) or `search` (every role of the rubric search, tests/support/search-stub.ts). Prints
 * `{"port":n}` on stdout once listening; `GET /calls` answers how many completions it served and `GET /bytes` the
 * request bytes it read; `STUB_RECORD=<file>` appends each completion request's body to the file, one per line (as
 * bench/llm-call-floor.mjs replays them); exits when its stdin closes (the bench ended).
 * @example STUB_LATENCY_MS=20 STUB_REPLY=verifier node --import tsx bench/loopback-llm-stub.ts
 */
import { appendFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { chatCompletion, contentText, gradeAllRubrics, type ChatCompletionBody } from '../tests/support/llm-stub.ts'
import { searchResponder } from '../tests/support/search-stub.ts'

const latencyMs = Number(process.env.STUB_LATENCY_MS ?? 0)
const grade = Number(process.env.STUB_GRADE ?? 7)
const record = process.env.STUB_RECORD
const REPLIES = { verifier: gradeEachCriterion, search: searchResponder } as const
const reply = REPLIES[process.env.STUB_REPLY as keyof typeof REPLIES] ?? gradeAllRubrics(grade)
let calls = 0
let bytes = 0

/** `{"grades": {id: grade}}` for every `- <id> (` criterion line of the user message. */
function gradeEachCriterion(body: ChatCompletionBody): string {
  const user = contentText(body.messages.find((message) => message.role === 'user') ?? { content: '' })
  // This project's criterion lines (`- <id> (`), or the criteria JSON autosr's verifier sends
  // (`"criterion_id": "<id>"`).
  const lines = [...user.matchAll(/^- ([\w.:-]+) \(/gm)].map((match) => match[1]!)
  const ids = lines.length ? lines : [...user.matchAll(/"criterion_id":\s*"([^"]+)"/g)].map((match) => match[1]!)
  return JSON.stringify({ grades: Object.fromEntries(ids.map((id) => [id, Math.min(grade, 5)])) })
}

const server = createServer(async (req, res) => {
  if (req.method === 'GET' && req.url === '/calls') return void res.end(String(calls))
  if (req.method === 'GET' && req.url === '/bytes') return void res.end(String(bytes))
  // The search's endpoint pool probes its endpoints before it sends work.
  if (req.method === 'GET' && req.url?.endsWith('/models'))
    return void res.end(JSON.stringify({ object: 'list', data: [{ id: 'stub-model', object: 'model' }] }))
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const raw = Buffer.concat(chunks)
  const body = JSON.parse(raw.toString('utf8')) as ChatCompletionBody
  calls++
  bytes += raw.length
  if (record) appendFileSync(record, `${JSON.stringify(body)}\n`)
  const answer = JSON.stringify(chatCompletion(body, reply(body), calls))
  const send = () => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(answer)
  }
  if (latencyMs > 0) setTimeout(send, latencyMs)
  else send()
})
server.keepAliveTimeout = 60_000
server.listen(Number(process.env.STUB_PORT ?? 0), '127.0.0.1', () => {
  const address = server.address()
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`)
})
process.stdin.on('close', () => process.exit(0))
process.stdin.resume()
