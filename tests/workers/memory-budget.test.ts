/**
 * Memory searches are budgeted and cached (issue 46 item 3): each `GET /memory?q=` and each dashboard search embeds
 * its query, so a run's tokens may make `budgets.memory_searches_per_hour` of them per clock hour (429
 * `memory_search_budget_exceeded` naming the key past it, with Retry-After), and a text searched lately is answered
 * from its cached vector, embedding nothing and spending nothing. Before, 100 random queries from one token were 100
 * embedding calls in 2 s, identical ones included. An embedder's own refusal (HTTP 400) is `llm_unavailable`, never a
 * 500. The embedder is an OpenAI-compatible fake that counts its calls.
 */
import { env } from 'cloudflare:workers'
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test'
import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import { createApp } from '../../workers/app.ts'
import { ADMIN_TOKEN, answerOf, clearFakeEndpoints, createRun, fakeEndpoint, requestOf } from './helpers.ts'

const app = createApp()

/** A deployment embedding through the fake endpoint `tag` (2-dimensional vectors), which counts its calls. */
function embeddingDeployment(tag: string, fault?: () => Response) {
  const endpoint = fakeEndpoint(tag, async (_index, request) => {
    if (fault) return fault()
    const { input } = (await request.json()) as { input: string[] }
    return Response.json({ data: input.map((_text, index) => ({ index, embedding: [0.6, 0.8] })) })
  })
  const deployment = {
    ...env,
    EMBEDDER: 'openai',
    EMBEDDINGS_BASE_URL: `http://llm.test/${tag}/v1`,
    EMBEDDINGS_MODEL: 'embed-fake',
    EMBEDDINGS_DIMENSIONS: '2',
  } as typeof env
  return { deployment, calls: endpoint.calls }
}

async function get(path: string, deployment: typeof env, token: string, headers: Record<string, string> = {}) {
  const ctx = createExecutionContext()
  const response = await app.fetch(requestOf('GET', path, { token, headers }), deployment, ctx)
  const answer = await answerOf(response)
  await waitOnExecutionContext(ctx)
  return answer
}

const search = (deployment: typeof env, token: string, q: string) =>
  get(`/memory?q=${encodeURIComponent(q)}`, deployment, token)

afterEach(() => clearFakeEndpoints())

describe('memory searches', () => {
  it('spend budgets.memory_searches_per_hour, then 429 naming it; a repeated query embeds nothing', async () => {
    const { deployment, calls } = embeddingDeployment('budget-api')
    const run = await createRun({ anchor_rubrics: [{ text: 'Correct.' }], budgets: { memory_searches_per_hour: 3 } })
    for (const q of ['units', 'grader', 'format'])
      expect((await search(deployment, run.token, `${run.runId} ${q}`)).status).toBe(200)
    expect(calls()).toBe(3)
    const refused = await search(deployment, run.token, `${run.runId} a fourth text`)
    expect(refused.status).toBe(429)
    expect(refused.json.error).toMatchObject({
      code: 'memory_search_budget_exceeded',
      details: { budget: 'budgets.memory_searches_per_hour', limit: 3 },
    })
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(3_600)
    // A query searched lately is answered from its vector: no call, nothing spent, even past the budget.
    expect((await search(deployment, run.token, `${run.runId} units`)).status).toBe(200)
    expect(calls()).toBe(3)
    // The dashboard's search spends the same budget, and says so on its page.
    const page = await get(
      `/dashboard/runs/${run.runId}?q=${encodeURIComponent('yet another')}`,
      deployment,
      run.token,
      {
        accept: 'text/html',
      },
    )
    expect(page.status).toBe(429)
    expect(page.text).toContain('budgets.memory_searches_per_hour')
    // The admin, who writes the budgets, is not refused by them.
    expect((await search(deployment, ADMIN_TOKEN, `${run.runId} the admin's own`)).status).toBe(200)
    expect(calls()).toBe(4)
  })

  it('from one token cost at most the budget in embedding calls, however many and however repeated', async () => {
    const { deployment, calls } = embeddingDeployment('budget-property')
    const budget = 5
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'), { maxLength: 20 }),
        async (words) => {
          const run = await createRun({
            anchor_rubrics: [{ text: 'Correct.' }],
            budgets: { memory_searches_per_hour: budget },
          })
          const before = calls()
          const distinct = new Set<string>()
          for (const word of words) {
            const q = `${run.runId} ${word}`
            const answer = await search(deployment, run.token, q)
            if (distinct.has(q)) expect(answer.status).toBe(200)
            else if (distinct.size < budget) expect(answer.status).toBe(200)
            else expect(answer.status).toBe(429)
            if (answer.status === 200) distinct.add(q)
          }
          expect(calls() - before).toBe(Math.min(distinct.size, budget))
        },
      ),
      { numRuns: 8 },
    )
  })

  it('that the embedder refuses are llm_unavailable (JSON on the API, a page on the dashboard), not 500', async () => {
    const { deployment } = embeddingDeployment(
      'budget-refused',
      () => new Response('{"error":{"message":"input too long"}}', { status: 400 }),
    )
    const run = await createRun({ anchor_rubrics: [{ text: 'Correct.' }] })
    const refused = await search(deployment, run.token, `${run.runId} refused`)
    expect(refused.status).toBe(502)
    expect(refused.json.error).toMatchObject({ code: 'llm_unavailable', details: { failure: 'bad_request' } })
    expect(refused.json.error.message).toMatch(/embeddings server refused the request \(HTTP 400\)/)
    const page = await get(`/dashboard/runs/${run.runId}?q=refused+again`, deployment, run.token, {
      accept: 'text/html',
    })
    expect(page.status).toBe(502)
    expect(page.text).toContain('llm_unavailable')
  })
})
