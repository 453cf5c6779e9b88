// The least CPU any Node program spends to make a given set of LLM calls: it sends each recorded request body
// (bench/loopback-llm-stub.ts with STUB_RECORD) to the chat endpoint over node:http with keep-alive, `concurrency`
// at a time, and parses each reply's JSON and message; nothing else. Plain JavaScript, so no compiler loads with it.
// bench/search-cpu.ts runs it under /usr/bin/time beside the search that made the same calls.
// Usage: node bench/llm-call-floor.mjs <requests.jsonl> <base URL, …/v1> [concurrency, 8]
import { readFileSync } from 'node:fs'
import http from 'node:http'

const [file, baseUrl, concurrency = '8'] = process.argv.slice(2)
const bodies = readFileSync(file, 'utf8').split('\n').filter(Boolean)
const url = new URL(`${baseUrl.replace(/\/+$/, '')}/chat/completions`)
const agent = new http.Agent({ keepAlive: true, maxSockets: Number(concurrency) })

/** One completion: the body as sent, the reply parsed and its message read. */
const complete = (body) =>
  new Promise((resolve, reject) => {
    const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }
    const request = http.request(url, { method: 'POST', agent, headers }, (response) => {
      const chunks = []
      response.on('data', (chunk) => chunks.push(chunk))
      response.on('end', () => {
        const content = JSON.parse(Buffer.concat(chunks).toString('utf8')).choices[0].message.content
        try {
          resolve(JSON.parse(content))
        } catch {
          resolve(content)
        }
      })
      response.on('error', reject)
    })
    request.on('error', reject)
    request.end(body)
  })

let next = 0
await Promise.all(
  Array.from({ length: Number(concurrency) }, async () => {
    while (next < bodies.length) await complete(bodies[next++])
  }),
)
agent.destroy()
