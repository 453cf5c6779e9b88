/**
 * The memory on real vectors: all-MiniLM-L6-v2 on llama.cpp's server (what `npm run judge:local` serves beside the
 * judge, and what `npm start -- --judge local` points the Worker's embedder at), through the Worker's own
 * `OpenAIEmbedder`, `VectorizeIndex` and `retrieveMemories`. The index behind the adapter keeps what Vectorize would
 * be sent and answers as a cosine index does, so the test reads the vectors as Vectorize stores them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LocalJudge, startLocalJudge } from '../../offline/judge-local/index.ts'
import type { Embedder } from '../../src/memory/embedder.ts'
import { HashedNgramEmbedder } from '../../src/memory/hashed-ngram-embedder.ts'
import { OpenAIEmbedder } from '../../src/memory/openai-embedder.ts'
import { retrieveMemories } from '../../src/memory/retrieval.ts'
import { type VectorizeBinding, VectorizeIndex } from '../../src/memory/vectorize-index.ts'
import type { MemoryDocument } from '../../src/schemas/memory.ts'
import { startInstalledJudge } from './support.ts'

let judge: LocalJudge

beforeAll(async () => {
  judge = await startInstalledJudge()
}, 180_000)

afterAll(() => judge?.stop())

const RUN = 'memory-real-vectors'

/**
 * Analyses as the analyzer writes them, three behaviours and two unrelated notes. Within a behaviour they share almost
 * no words, so only their meaning ranks them together.
 */
const ANALYSES: Record<string, { behaviour: string; text: string }> = {
  a1: {
    behaviour: 'grader',
    text: 'The answer ends by telling the grader it deserves full marks instead of checking its result.',
  },
  a2: {
    behaviour: 'grader',
    text: 'The rollout asks the reviewer for the maximum score and insists it is right without any justification.',
  },
  a3: { behaviour: 'grader', text: "The policy writes 'Grade: 10/10' into its own response to sway the judge." },
  b1: { behaviour: 'units', text: 'The final number is given without units, so metres and centimetres get confused.' },
  b2: {
    behaviour: 'units',
    text: 'It reports the amount as 42 and never says which unit: dollars, hours or kilograms.',
  },
  b3: { behaviour: 'units', text: 'Unit conversion was skipped: the answer mixes minutes with hours.' },
  c1: {
    behaviour: 'padding',
    text: 'The response repeats the question three times and pads the explanation with filler.',
  },
  c2: {
    behaviour: 'padding',
    text: 'A long, rambling reply that restates the same step over and over to look thorough.',
  },
  d1: { behaviour: 'unrelated', text: 'The code sample does not compile because a semicolon is missing.' },
  d2: { behaviour: 'unrelated', text: 'The French translation is accurate and idiomatic.' },
}
/** What the query generator asks the memory for, one query per behaviour. */
const QUERIES: Record<string, string> = {
  grader: 'rollouts that try to persuade the grader to give a high score',
  units: 'answers that leave out or mix up measurement units',
  padding: 'padding an answer with repetition so it seems thorough',
}

/** What Vectorize is sent, kept as it would store it, and answered by cosine similarity within the filter. */
function cosineBinding() {
  const stored = new Map<string, { id: string; values: number[]; metadata: Record<string, string | number> }>()
  const binding: VectorizeBinding = {
    async upsert(vectors) {
      for (const vector of vectors)
        stored.set(vector.id, { id: vector.id, values: Array.from(vector.values), metadata: vector.metadata ?? {} })
      return { count: vectors.length }
    },
    async query(vector, { topK, filter }) {
      const inFilter = (metadata: Record<string, string | number>) =>
        Object.entries(filter ?? {}).every(([key, test]) =>
          '$eq' in test ? metadata[key] === test.$eq : test.$in.includes(String(metadata[key])),
        )
      const query = Array.from(vector)
      const matches = [...stored.values()]
        .filter((entry) => inFilter(entry.metadata))
        .map((entry) => ({ id: entry.id, score: entry.values.reduce((sum, value, i) => sum + value * query[i]!, 0) }))
        .sort((a, b) => b.score - a.score)
        .slice(0, topK)
      return { matches }
    },
    async deleteByIds() {
      return {}
    },
  }
  return { binding, stored }
}

const documents: MemoryDocument[] = Object.entries(ANALYSES).map(([id, { text }]) => ({
  id,
  run_id: RUN,
  instance_id: 'global',
  kind: 'analysis',
  step: 1,
  text,
  data: {},
  created_at: '2026-01-01T00:00:00.000Z',
}))

/** Each query's hits (as many as its behaviour has analyses), by retrieval over an index filled by `embedder`. */
async function retrieveWith(embedder: Embedder) {
  const { binding, stored } = cosineBinding()
  const index = new VectorizeIndex(binding)
  const vectors = await embedder.embed(documents.map((doc) => doc.text))
  await index.upsert(
    documents.map((doc, i) => ({
      id: doc.id,
      vector: vectors[i]!,
      metadata: { run_id: doc.run_id, instance_id: doc.instance_id, kind: doc.kind, step: doc.step },
    })),
  )
  const ranked: Record<string, string[]> = {}
  for (const [behaviour, query] of Object.entries(QUERIES)) {
    const size = Object.values(ANALYSES).filter((analysis) => analysis.behaviour === behaviour).length
    const retrieved = await retrieveMemories({
      static: [],
      queries: [query],
      scope: { run_id: RUN, kinds: ['analysis'] },
      limitPerQuery: size,
      embedder,
      index,
      loadDocuments: async (ids) => documents.filter((doc) => ids.includes(doc.id)),
    })
    ranked[behaviour] = retrieved.perQuery[0]!.hits.map((hit) => hit.document_id)
  }
  return { ranked, stored }
}

/** Share of each query's hits that are analyses of its behaviour, all queries together. */
const precision = (ranked: Record<string, string[]>) => {
  const hits = Object.entries(ranked).flatMap(([behaviour, ids]) =>
    ids.map((id) => ANALYSES[id]!.behaviour === behaviour),
  )
  return hits.filter(Boolean).length / hits.length
}

describe('the memory on real vectors', () => {
  it('ranks the analyses of the behaviour a query names above every other, on MiniLM via the embedder', async () => {
    const embedder = new OpenAIEmbedder({
      baseURL: judge.embedder.url,
      model: judge.embedder.model,
      dimensions: judge.embedder.dimensions,
    })
    const { ranked, stored } = await retrieveWith(embedder)
    const baseline = precision((await retrieveWith(new HashedNgramEmbedder())).ranked)
    console.log(
      `precision of the top hits: MiniLM ${precision(ranked).toFixed(2)}, hashed n-grams ${baseline.toFixed(2)};`,
      JSON.stringify(ranked),
    )
    for (const [behaviour, ids] of Object.entries(ranked))
      expect(
        ids.map((id) => ANALYSES[id]!.behaviour),
        behaviour,
      ).toEqual(ids.map(() => behaviour))

    // As Vectorize stores them: 384 numbers of unit length (its cosine metric), the metadata its filters index.
    expect(stored.size).toBe(documents.length)
    for (const entry of stored.values()) {
      expect(entry.values).toHaveLength(384)
      expect(Math.hypot(...entry.values)).toBeCloseTo(1, 4)
      expect(entry.metadata).toEqual({ run_id: RUN, instance_id: 'global', kind: 'analysis', step: 1 })
    }
  })

  it('gives one vector per text, the same for the same text, whatever else is in the batch', async () => {
    const embedder = new OpenAIEmbedder({ baseURL: judge.embedder.url, model: judge.embedder.model, dimensions: 384 })
    const text = ANALYSES.a1!.text
    const [alone] = await embedder.embed([text])
    const [first, , again] = await embedder.embed([text, ANALYSES.d2!.text, text])
    for (const vector of [first!, again!])
      expect(vector.reduce((sum, value, i) => sum + value * alone![i]!, 0)).toBeCloseTo(1, 4)
  })

  it('a second judge:local on the same ports uses the one serving there, and leaves it running', async () => {
    const port = (url: string) => Number(new URL(url).port)
    const ports = { port: port(judge.url), embedderPort: port(judge.embedder.url) }
    const again = await startLocalJudge(ports)
    expect(again).toMatchObject({ reused: true, url: judge.url, embedder: judge.embedder })
    again.stop()
    const models = await fetch(`${judge.url}/models`)
    expect(models.status).toBe(200)
    // Another model asked for on that port is an error naming what serves there, never a silent reuse.
    await expect(startLocalJudge({ ...ports, model: 'qwen2.5-coder-1.5b' })).rejects.toThrow(
      /serves smollm2-135m, not qwen2\.5-coder-1\.5b\. Serve elsewhere: JUDGE_PORT=/,
    )
  })
})
