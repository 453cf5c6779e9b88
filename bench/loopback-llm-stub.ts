/**
 * A zero-latency OpenAI-compatible chat server in its own Node process, for `--stub process`: the Worker
 * reaches it over loopback HTTP as it would reach a vLLM server, and its CPU is not workerd's.
 * Prints `{"port":n}` on stdout once listening; exits when its stdin closes (the bench process ended).
 * @example node --import tsx bench/loopback-llm-stub.ts
 */
import { createServer } from 'node:http'
import { chatCompletion, gradeAllRubrics, type ChatCompletionBody } from '../tests/support/llm-stub.ts'

const judge = gradeAllRubrics(Number(process.env.STUB_GRADE ?? 7))
let calls = 0

const server = createServer(async (req, res) => {
  if (req.method === 'GET' && req.url === '/calls') return void res.end(String(calls))
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatCompletionBody
  calls++
  res.writeHead(200, { 'content-type': 'application/json' })
  res.end(JSON.stringify(chatCompletion(body, judge(body), calls)))
})
server.keepAliveTimeout = 60_000
server.listen(0, '127.0.0.1', () => {
  const address = server.address()
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`)
})
process.stdin.on('close', () => process.exit(0))
process.stdin.resume()
