/**
 * `npx tsx bench/memory-search.ts [--queries 100] [--repeats 100] [--budget 600]`
 *
 * What one run token can make the server spend on embeddings through `GET /memory?q=` (issue 46 item 3): the built
 * Worker on Miniflare alone (`npm run serve`'s server, a fresh state), `EMBEDDER=openai` pointed at an
 * OpenAI-compatible `/embeddings` on 127.0.0.1 in this process that counts its calls, and one run (created with
 * `budgets.memory_searches_per_hour: --budget` where the tree knows the key) whose token sends `--queries` distinct
 * random queries and then `--repeats` of them again, one after another. Prints one JSON line: the searches sent, the
 * embedding calls they caused, the answers by status, and the seconds it took.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { buildWorker, serveWorker } from '../offline/dev/serve.ts'
import { applyLocalMigrations, freePort } from '../offline/dev/start.ts'

const ADMIN = 'bench-memory-admin-token'
const { values } = parseArgs({
  options: {
    queries: { type: 'string', default: '100' },
    repeats: { type: 'string', default: '100' },
    budget: { type: 'string', default: '600' },
  },
})

let embeddingCalls = 0
const embedder = createServer((req, res) => {
  let body = ''
  req.on('data', (chunk: Buffer) => (body += chunk.toString()))
  req.on('end', () => {
    embeddingCalls++
    const { input } = JSON.parse(body) as { input: string[] }
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ data: input.map((_text, index) => ({ index, embedding: [0.6, 0.8] })) }))
  })
})
await new Promise<void>((resolve) => embedder.listen(0, '127.0.0.1', resolve))
const embedderUrl = `http://127.0.0.1:${(embedder.address() as AddressInfo).port}/v1`

const state = mkdtempSync(join(tmpdir(), 'rh-memory-bench-'))
const port = await freePort()
applyLocalMigrations(state)
const vars = { EMBEDDER: 'openai', EMBEDDINGS_BASE_URL: embedderUrl, EMBEDDINGS_MODEL: 'e', EMBEDDINGS_DIMENSIONS: '2' }
const mf = await serveWorker(buildWorker(), port, { persistTo: state, adminToken: ADMIN, vars })
const base = `http://127.0.0.1:${port}`
try {
  const config = {
    anchor_rubrics: [{ text: 'Correct.' }],
    budgets: { memory_searches_per_hour: Number(values.budget) },
  }
  let created = await fetch(`${base}/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ config }),
  })
  // A tree without the budget refuses the unknown key: the same run without it.
  if (created.status === 400)
    created = await fetch(`${base}/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ config: { anchor_rubrics: config.anchor_rubrics } }),
    })
  const { run_id: runId, token } = (await created.json()) as { run_id: string; token: string }
  const queries = Array.from({ length: Number(values.queries) }, () => `why ${Math.random().toString(36).slice(2)}`)
  const sent = [...queries, ...Array.from({ length: Number(values.repeats) }, (_, i) => queries[i % queries.length]!)]
  const statuses: Record<string, number> = {}
  const started = performance.now()
  for (const q of sent) {
    const answer = await fetch(`${base}/runs/${runId}/memory?q=${encodeURIComponent(q)}`, {
      headers: { authorization: `Bearer ${token}` },
    })
    await answer.arrayBuffer()
    statuses[answer.status] = (statuses[answer.status] ?? 0) + 1
  }
  console.log(
    JSON.stringify({
      searches: sent.length,
      distinct: queries.length,
      embedding_calls: embeddingCalls,
      statuses,
      seconds: Number(((performance.now() - started) / 1_000).toFixed(2)),
    }),
  )
} finally {
  await mf.dispose()
  embedder.close()
  rmSync(state, { recursive: true, force: true })
}
