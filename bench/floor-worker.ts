/**
 * The floor for `npm run bench`: a Worker whose `POST /score` does the least a `/score` must — parse the JSON body,
 * one judge call (a chat completion naming the criteria, with the rollout's input and output) to the same stub LLM
 * the Worker's scorer calls, then one RPC to one Durable Object, a shard picked by the rollout id as the ledger's
 * are, whose one SQLite write keyed by (step, rollout id) records the score once (a second `/score` of the rollout
 * gets the first score back) — and nothing else: no auth, validation, rate limit, rubric versions, judgement cache,
 * D1 rows or analysis. Served in the same Miniflare as the Worker under test (Host `floor.bench`, see
 * bench/harness.ts), built from bench/floor-worker.wrangler.toml.
 */
import { DurableObject } from 'cloudflare:workers'
import { Hono } from 'hono'
import { ledgerShardOf } from '../durable-objects/names.ts'

/** The ledger shards of a `global` run (`ledgerShardsOf`), the run the bench's stub target scores in. */
const SHARDS = 8
const GRADE_MAX = 10
/** The default run's rubrics, by id and weight: the judge grades each. */
const CRITERIA = [
  { rubric_id: 'anchor-correctness', weight: 2, text: 'The final answer is correct.' },
  { rubric_id: 'anchor-instructions', weight: 1, text: 'The response follows the instructions.' },
  { rubric_id: 'adaptive-reasoning', weight: 1, text: 'The reasoning is sound and complete.' },
  { rubric_id: 'adaptive-concise', weight: 0.5, text: 'The response is concise.' },
]
const INSTRUCTIONS = `Grade the response against each criterion from 0 to ${GRADE_MAX}; reply with JSON.`

interface FloorEnv {
  FLOOR_LEDGER: DurableObjectNamespace<FloorLedger>
  /** The judge's OpenAI-compatible base URL, e.g. `http://llm.stub/v1`. */
  JUDGE_URL: string
}

interface FloorBody {
  rollout: { id: string; input: string; output: string }
  metadata: { current_step: number }
}

interface Grade {
  rubric_id: string
  grade: number
}

/**
 * One shard of the floor's ledger: a table keyed by (step, rollout id), as the ledger's, holding what a repeated
 * `/score` must answer.
 */
export class FloorLedger extends DurableObject<FloorEnv> {
  constructor(ctx: DurableObjectState, env: FloorEnv) {
    super(ctx, env)
    ctx.storage.sql.exec(
      'CREATE TABLE IF NOT EXISTS ledger (step INTEGER NOT NULL, rollout_id TEXT NOT NULL, score REAL NOT NULL, ' +
        'criteria TEXT NOT NULL, PRIMARY KEY (step, rollout_id)) WITHOUT ROWID',
    )
  }

  /**
   * Records a rollout's score once per step: a rollout already recorded keeps its first score, answered with its
   * criteria (which a first record leaves out: the caller has them).
   * @example const { score, criteria } = await stub.record(3, 'r17', 0.7, '[]')
   */
  record(step: number, rolloutId: string, score: number, criteria: string): { score: number; criteria?: string } {
    const sql = this.ctx.storage.sql
    const inserted = sql
      .exec(
        'INSERT INTO ledger (step, rollout_id, score, criteria) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1',
        step,
        rolloutId,
        score,
        criteria,
      )
      .toArray()
    if (inserted.length) return { score }
    return sql
      .exec<{ score: number; criteria: string }>(
        'SELECT score, criteria FROM ledger WHERE step = ? AND rollout_id = ?',
        step,
        rolloutId,
      )
      .one()
  }
}

/**
 * One judge call: every criterion graded in one chat completion, with the rollout to grade.
 * @example const grades = await judge(env, body.rollout)
 */
async function judge(env: FloorEnv, rollout: FloorBody['rollout']): Promise<Grade[]> {
  const criteria = CRITERIA.map((c) => `- ${c.rubric_id} (weight ${c.weight.toFixed(3)}): ${c.text}`).join('\n')
  const response = await fetch(`${env.JUDGE_URL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer not-needed' },
    body: JSON.stringify({
      model: 'stub-judge',
      temperature: 0,
      messages: [
        { role: 'system', content: INSTRUCTIONS },
        { role: 'user', content: `${criteria}\n\n${rollout.input}\n\n${rollout.output}` },
      ],
    }),
  })
  if (!response.ok) throw new Error(`the judge answered ${response.status}`)
  const reply = (await response.json()) as { choices: [{ message: { content: string } }] }
  return (JSON.parse(reply.choices[0].message.content) as { grades: Grade[] }).grades
}

const score = async (c: import('hono').Context<{ Bindings: FloorEnv }>) => {
  const { rollout, metadata } = await c.req.json<FloorBody>()
  const grades = await judge(c.env, rollout)
  const weights = new Map(CRITERIA.map((criterion) => [criterion.rubric_id, criterion.weight]))
  const criteria = grades.map((grade) => ({ ...grade, weight: weights.get(grade.rubric_id) ?? 0 }))
  const total = criteria.reduce((sum, criterion) => sum + criterion.weight, 0)
  const weighted = criteria.reduce((sum, criterion) => sum + criterion.weight * criterion.grade, 0)
  const shard = c.env.FLOOR_LEDGER.get(c.env.FLOOR_LEDGER.idFromName(`floor:${ledgerShardOf(rollout.id, SHARDS)}`))
  const recorded = await shard.record(
    metadata.current_step,
    rollout.id,
    total ? weighted / total / GRADE_MAX : 0,
    JSON.stringify(criteria),
  )
  return c.json({
    score: recorded.score,
    criteria: recorded.criteria === undefined ? criteria : (JSON.parse(recorded.criteria) as unknown),
    rollout_id: rollout.id,
    step: metadata.current_step,
    grade_max: GRADE_MAX,
    duplicate: recorded.criteria !== undefined,
    cached: false,
  })
}

export default new Hono<{ Bindings: FloorEnv }>().post('/score', score).post('/runs/:runId/score', score)
