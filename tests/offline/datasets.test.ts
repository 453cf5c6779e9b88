import { createHash } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { blindItem } from '../../offline/bench/scorers.ts'
import { buildVerifierRequest } from '../../src/search/roles/verifier.ts'
import type { SearchRubric } from '../../src/schemas/search-rubric.ts'
import { loadDataset } from '../../offline/datasets/load.ts'
import { saveDataset } from '../../offline/datasets/save.ts'
import { AppError } from '../../src/errors/index.ts'
import {
  DatasetError,
  datasetHash,
  datasetSummary,
  formatAutosrJson,
  parseDatasetText,
} from '../../src/datasets/index.ts'
import { locateJsonError } from '../../src/datasets/json-text.ts'
import { parseDataset } from '../../src/datasets/parse.ts'
import { toAutosrJson } from '../../src/datasets/serialize.ts'
import { type PreferenceDataset, visibleCandidate } from '../../src/search/types.ts'

const FIXTURES = join(import.meta.dirname, 'fixtures/datasets')
const VERIFIER_RUBRIC: SearchRubric = {
  rubric_id: 'r',
  criteria: [
    {
      criterion_id: 'c1',
      text: 'The final answer is correct.',
      weight: 1,
      criterion_type: null,
      check_points: [],
      positive_examples: [],
      negative_examples: [],
    },
  ],
  grading_protocol: { grade_max: 10, allow_na: false, num_votes: 1 },
  metadata: {},
}
const fixture = (name: string): string => readFileSync(join(FIXTURES, name), 'utf8')
const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex')

/** The DatasetError a parse throws; fails the test when it parses. */
function parseError(text: string, options: Parameters<typeof parseDataset>[1] = {}): DatasetError {
  try {
    parseDataset(text, options)
  } catch (error) {
    if (error instanceof DatasetError) return error
    throw error
  }
  throw new Error('expected a DatasetError')
}

/** A valid autosr dataset as a JS value, to break field by field. */
function autosr(prompts = 4): {
  prompts: { prompt_id?: unknown; prompt?: unknown; candidates: Record<string, unknown>[] }[]
} {
  return {
    prompts: Array.from({ length: prompts }, (_, i) => ({
      prompt_id: `p_${i + 1}`,
      prompt: `Question ${i + 1}?`,
      candidates: [
        { candidate_id: 'c1', text: 'good', metadata: { rank: 1 } },
        { candidate_id: 'c2', text: 'bad', metadata: { rank: 2 } },
      ],
    })),
  }
}

const ranks = (dataset: PreferenceDataset): [string, number | undefined][][] =>
  dataset.prompts.map((item) =>
    item.candidates.map((candidate): [string, number | undefined] => [candidate.candidate_id, candidate.label.rank]),
  )

describe('parseDataset: shapes', () => {
  it('reads the autosr shape and moves rank and quality from metadata into label', () => {
    const dataset = parseDataset(fixture('autosr-small.json'))
    expect(dataset.prompts.map((item) => item.prompt_id)).toEqual(['p_haiku', 'p_capital'])
    const [haiku, capital] = dataset.prompts
    expect(haiku?.metadata).toEqual({ domain: 'poetry' })
    expect(haiku?.candidates[0]).toEqual({
      candidate_id: 'h1',
      text: 'Cold rain on red leaves\nthe gutter hums a low song\nsummer washes out',
      source: 'strong',
      label: { rank: 1 },
      metadata: { words: 14 },
    })
    expect(haiku?.candidates[2]?.source).toBe('unknown')
    expect(capital?.candidates.map((candidate) => candidate.label)).toEqual([{ quality: 0.95 }, { quality: 0.1 }])
  })

  it('keeps labels out of metadata and out of what an LLM sees', () => {
    const dataset = parseDataset(fixture('autosr-small.json'))
    for (const candidate of dataset.prompts.flatMap((item) => item.candidates)) {
      expect(candidate.metadata).not.toHaveProperty('rank')
      expect(candidate.metadata).not.toHaveProperty('quality')
      expect(Object.keys(visibleCandidate(candidate)).sort()).toEqual(['candidate_id', 'text'])
    }
  })

  it('accepts a label object (its own output shape) that agrees with metadata, refuses one that does not', () => {
    const data = autosr(1)
    data.prompts[0]!.candidates[0] = { candidate_id: 'c1', text: 'good', label: { rank: 1 }, metadata: { rank: 1 } }
    expect(parseDataset(JSON.stringify(data)).prompts[0]?.candidates[0]?.label).toEqual({ rank: 1 })
    data.prompts[0]!.candidates[0] = { candidate_id: 'c1', text: 'good', label: { rank: 2 }, metadata: { rank: 1 } }
    expect(parseError(JSON.stringify(data)).message).toBe(
      'prompts[0] (prompt_id "p_1").candidates[0] (candidate_id "c1").label.rank: 2 disagrees with metadata.rank 1',
    )
  })

  it('reads LLMBar pairs as two candidates ranked by the label, with ids from the index', () => {
    const parsed = parseDatasetText(fixture('llmbar-small.json'))
    expect([parsed.format, parsed.shape]).toEqual(['json', 'llmbar'])
    expect(ranks(parsed.dataset)).toEqual([
      [
        ['item-0000-a', 1],
        ['item-0000-b', 2],
      ],
      [
        ['item-0001-a', 2],
        ['item-0001-b', 1],
      ],
    ])
    expect(parsed.dataset.prompts[1]).toMatchObject({
      prompt: 'Reply with only the word yes.',
      candidates: [{ text: 'Yes! Happy to help with anything else.' }, { text: 'yes' }],
    })
    expect(parseDataset(fixture('llmbar-small.json'))).toEqual(parsed.dataset) // stable
  })

  it('reads JudgeBench JSONL: pair ids, source as group, response_model as sources, other fields as metadata', () => {
    const parsed = parseDatasetText(fixture('judgebench-small.jsonl'))
    expect([parsed.format, parsed.shape]).toEqual(['jsonl', 'judgebench'])
    expect(ranks(parsed.dataset)).toEqual([
      [
        ['jb-1-a', 2],
        ['jb-1-b', 1],
      ],
      [
        ['jb-2-a', 1],
        ['jb-2-b', 2],
      ],
    ])
    expect(parsed.dataset.prompts[0]).toMatchObject({
      prompt_id: 'jb-1',
      prompt: 'What is 7 x 8?',
      group: 'livebench-math',
      metadata: { original_id: 'q-9' },
    })
    expect(parsed.dataset.prompts[0]?.metadata).not.toHaveProperty('label')
    expect(parsed.dataset.prompts[0]?.candidates.map((candidate) => candidate.source)).toEqual(['gpt-4o', 'gpt-4o'])
  })

  it('reads JudgeBench as a JSON array too, with `id` when there is no pair_id', () => {
    const text = JSON.stringify([{ id: 17, question: 'Q?', response_A: 'x', response_B: 'y', label: 'B>A' }])
    expect(ranks(parseDataset(text))).toEqual([
      [
        ['17-a', 2],
        ['17-b', 1],
      ],
    ])
  })

  it('reads {prompt, chosen, rejected}: the chosen answer ranks 1, but neither its id nor its position says so', () => {
    const parsed = parseDatasetText(fixture('chosen-rejected.jsonl'))
    expect(parsed.shape).toBe('chosen_rejected')
    const [first, second] = parsed.dataset.prompts
    expect(first).toMatchObject({ prompt_id: 'rb-1', group: 'chat-easy' })
    expect(second?.prompt_id).toBe('item-0001')
    const chosen = first?.candidates.find((candidate) => candidate.label.rank === 1)
    expect(chosen).toMatchObject({ text: '13', source: 'model-x' })
    expect(first?.candidates.map((candidate) => candidate.candidate_id).sort()).toEqual(['rb-1-a', 'rb-1-b'])

    const many = Array.from({ length: 40 }, (_, i) =>
      JSON.stringify({ prompt: `Q${i}`, chosen: 'good', rejected: 'bad' }),
    ).join('\n')
    const positions = parseDataset(many).prompts.map((item) =>
      item.candidates.findIndex((candidate) => candidate.label.rank === 1),
    )
    expect(new Set(positions)).toEqual(new Set([0, 1]))
    expect(
      parseDataset(many).prompts.map((item) => item.candidates.findIndex((candidate) => candidate.label.rank === 1)),
    ).toEqual(positions)
  })

  it('tells JSON from JSONL by the content, and lets the caller force either', () => {
    const line = '{"question":"Q","response_A":"a","response_B":"b","label":"A>B"}'
    expect(parseDatasetText(`${line}\n${line.replace('"Q"', '"R"')}\n`).format).toBe('jsonl')
    expect(parseDatasetText(`[${line}]`).format).toBe('json')
    expect(parseDatasetText(line, { format: 'jsonl' }).format).toBe('jsonl')
    expect(parseError(`${line}\n${line}`, { format: 'json' }).message).toMatch(
      /^line 2: not valid JSON: unexpected '\{' after the JSON value at column 1$/,
    )
  })

  it('reads a single pair object, a byte-order mark, CRLF line ends and numeric ids', () => {
    expect(
      parseDataset('{"input":"I","output_1":"a","output_2":"b","label":"2"}').prompts[0]?.candidates[1]?.label,
    ).toEqual({ rank: 1 })
    const crlf =
      '\uFEFF{"pair_id":1,"question":"Q","response_A":"a","response_B":"b","label":"A>B"}\r\n' +
      '{"pair_id":2,"question":"R","response_A":"a","response_B":"b","label":"B>A"}\r\n'
    expect(parseDataset(crlf).prompts.map((item) => item.prompt_id)).toEqual(['1', '2'])
  })

  it('gives prompts without a group the default group, and leaves the others alone', () => {
    expect(parseDataset(fixture('llmbar-small.json'), { group: 'natural' }).prompts.map((item) => item.group)).toEqual([
      'natural',
      'natural',
    ])
    expect(
      parseDataset(fixture('judgebench-small.jsonl'), { group: 'other' }).prompts.map((item) => item.group),
    ).toEqual(['livebench-math', 'mmlu-pro-history'])
  })
})

describe('parseDataset: problems', () => {
  it('names the prompt and field of a one-candidate prompt', () => {
    expect(parseError(fixture('one-candidate.json')).message).toBe(
      'prompts[1] (prompt_id "p_lonely").candidates: needs at least 2 candidates, got 1',
    )
  })

  it('names the place of a missing id', () => {
    const data = autosr()
    delete data.prompts[3]!.candidates[1]!.candidate_id
    delete data.prompts[1]!.prompt_id
    expect(parseError(JSON.stringify(data)).issues).toEqual([
      { place: 'prompts[1].prompt_id', reason: 'required' },
      { place: 'prompts[3] (prompt_id "p_4").candidates[1].candidate_id', reason: 'required' },
    ])
    expect(parseError(JSON.stringify(data)).message).toContain(
      'prompts[3] (prompt_id "p_4").candidates[1].candidate_id: required',
    )
  })

  it('refuses duplicate prompt ids and duplicate candidate ids within a prompt', () => {
    const data = autosr(3)
    data.prompts[2]!.prompt_id = 'p_1'
    data.prompts[1]!.candidates[1]!.candidate_id = 'c1'
    expect(parseError(JSON.stringify(data)).message).toBe(
      [
        'prompts[1] (prompt_id "p_2").candidates[1] (candidate_id "c1").candidate_id: duplicate of candidates[0]',
        'prompts[2] (prompt_id "p_1").prompt_id: duplicate of prompts[0]',
      ].join('\n'),
    )
    const pairs = ['a', 'b', 'a']
      .map((id) => JSON.stringify({ pair_id: id, question: 'Q', response_A: 'x', response_B: 'y', label: 'A>B' }))
      .join('\n')
    expect(parseError(pairs).message).toBe('line 3 (pair_id "a").pair_id: duplicate of line 1')
  })

  it('names the line and column of broken JSON, in JSONL and in a JSON document', () => {
    expect(parseError(fixture('broken-line.jsonl'), { name: 'broken-line.jsonl' }).message).toBe(
      "broken-line.jsonl: line 3: not valid JSON: expected ',' or '}' after a property value, found '\"' at column 62",
    )
    const document =
      '{\n  "prompts": [\n    { "prompt_id": "p1",\n      "prompt": "Q"\n      "candidates": [] }\n  ]\n}'
    expect(parseError(document).message).toBe(
      "line 5: not valid JSON: expected ',' or '}' after a property value, found '\"' at column 7",
    )
    expect(parseError('[{"input": "x", ').message).toBe(
      'line 1: not valid JSON: expected a property name in double quotes, found the end of the text at column 17',
    )
  })

  it('refuses a JudgeBench label that is neither A>B nor B>A, and an LLMBar label that is neither 1 nor 2', () => {
    const judge = JSON.stringify({ pair_id: 'x', question: 'Q', response_A: 'a', response_B: 'b', label: 'A=B' })
    expect(parseError(judge).message).toBe('items[0] (pair_id "x").label: must be "A>B" or "B>A", got "A=B"')
    expect(parseError(`${judge}\n${judge.replace('"x"', '"y"').replace('A=B', 'B>A')}`).message).toBe(
      'line 1 (pair_id "x").label: must be "A>B" or "B>A", got "A=B"',
    )
    expect(parseError('[{"input":"I","output_1":"a","output_2":"b","label":3}]').message).toBe(
      'items[0].label: must be 1 or 2 (the better output), got 3',
    )
    expect(parseError('[{"input":"I","output_1":"a","output_2":"b"}]').message).toBe('items[0].label: required')
  })

  it('refuses ranks that are not positive integers and qualities that are not numbers', () => {
    const data = autosr(1)
    data.prompts[0]!.candidates[0]!.metadata = { rank: 0 }
    data.prompts[0]!.candidates[1]!.metadata = { quality: 'high' }
    expect(parseError(JSON.stringify(data)).issues.map((issue) => `${issue.place}: ${issue.reason}`)).toEqual([
      'prompts[0] (prompt_id "p_1").candidates[0] (candidate_id "c1").metadata.rank: must be a positive integer (1 = ' +
        'best), got 0',
      'prompts[0] (prompt_id "p_1").candidates[1] (candidate_id "c2").metadata.quality: must be a finite number ' +
        '(higher is better), got a string',
    ])
  })

  it('reports every problem at once, prefixed with the dataset name, as an invalid_request AppError', () => {
    const data = autosr(2)
    data.prompts[0]!.prompt = '  '
    data.prompts[1]!.candidates[0]!.text = 42
    const error = parseError(JSON.stringify(data), { name: 'demo.json' })
    expect(error).toBeInstanceOf(AppError)
    expect(error.code).toBe('invalid_request')
    expect(error.message.split('\n')).toEqual([
      'demo.json: prompts[0] (prompt_id "p_1").prompt: must not be blank',
      'demo.json: prompts[1] (prompt_id "p_2").candidates[0] (candidate_id "c1").text: must be a string, got a number',
    ])
  })

  it('refuses records of an unknown or mixed shape, an empty file, and a document of the wrong kind', () => {
    const mixed =
      '[{"prompt":"P","chosen":"a","rejected":"b"},{"input":"I","output_1":"a","output_2":"b","label":1},{"foo":1},3]'
    expect(parseError(mixed).message.split('\n')).toEqual([
      'items[1]: an LLMBar pair {input, output_1, output_2, label}, but items[0] is a preference pair {prompt, ' +
        'chosen, rejected}; use one shape per file',
      expect.stringMatching(
        /^items\[2\]: unrecognised item with fields \{foo\}: expected \{prompt_id, prompt, candidates\} \(autosr\)/,
      ),
      'items[3]: must be an object, got a number',
    ])
    expect(parseError(' \n').message).toBe('the file is empty')
    expect(parseError('[]').message).toBe('no items')
    expect(parseError('{"prompts": []}').message).toBe('prompts: no prompts')
    expect(parseError('{"prompts": {}}').message).toBe('prompts: must be an array, got an object')
    expect(parseError('{"data": []}').message).toBe(
      'expected an object with "prompts", an array of items, or JSON Lines; got an object with fields {data}',
    )
  })

  it('cuts a long list of problems in the message but keeps them in issues', () => {
    const lines = Array.from({ length: 30 }, (_, i) =>
      JSON.stringify({ pair_id: `x${i}`, question: 'Q', response_A: 'a', response_B: 'b', label: 'tie' }),
    ).join('\n')
    const error = parseError(lines)
    expect(error.issues).toHaveLength(30)
    expect(error.message.split('\n')).toHaveLength(21)
    expect(error.message).toMatch(/… and 10 more problems$/)
  })
})

describe('locateJsonError', () => {
  it('finds the line and column of the first syntax error', () => {
    expect(locateJsonError('{"a": 1,\n "b" 2}')).toEqual({
      line: 2,
      column: 6,
      reason: "expected ':' after a property name, found '2'",
    })
    expect(locateJsonError('[1, 2')).toMatchObject({
      line: 1,
      column: 6,
      reason: "expected ',' or ']' after an array element, found the end of the text",
    })
    expect(locateJsonError('{"a": "x\ny"}')).toMatchObject({
      line: 1,
      column: 9,
      reason: 'unescaped control character in a string',
    })
    expect(locateJsonError('{"a": tru}')).toMatchObject({ column: 7, reason: "unexpected 't', expected a value" })
    expect(locateJsonError('{"a": "\\q"}')).toMatchObject({ column: 8, reason: "bad escape '\\q' in a string" })
  })
})

describe('datasetSummary, datasetHash, toAutosrJson', () => {
  it('counts prompts, candidates, labels, groups and sources', () => {
    expect(datasetSummary(parseDataset(fixture('autosr-small.json')))).toEqual({
      prompts: 2,
      candidates: 5,
      candidates_per_prompt: { min: 2, max: 3, mean: 2.5 },
      labels: { rank: 3, quality: 2, none: 0 },
      fully_ranked: false,
      groups: {},
      ungrouped: 2,
      sources: { strong: 2, base: 2, unknown: 1 },
    })
    expect(datasetSummary(parseDataset(fixture('judgebench-small.jsonl')))).toMatchObject({
      fully_ranked: true,
      groups: { 'livebench-math': 1, 'mmlu-pro-history': 1 },
      ungrouped: 0,
    })
  })

  it('hashes text as sha256 hex, equal to the hash of the UTF-8 file', async () => {
    const text = fixture('autosr-small.json')
    expect(await datasetHash(text)).toBe(sha256(text))
    expect(await datasetHash('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
  })

  it('writes the autosr shape with labels back in metadata, and reads it back unchanged', () => {
    for (const name of ['autosr-small.json', 'llmbar-small.json', 'judgebench-small.jsonl', 'chosen-rejected.jsonl']) {
      const dataset = parseDataset(fixture(name))
      expect(parseDataset(formatAutosrJson(dataset))).toEqual(dataset)
    }
    const judged = toAutosrJson(parseDataset(fixture('judgebench-small.jsonl')))
    expect(judged.prompts[0]).toMatchObject({
      prompt_id: 'jb-1',
      group: 'livebench-math',
      candidates: [{ candidate_id: 'jb-1-a', source: 'gpt-4o', metadata: { rank: 2 } }, { metadata: { rank: 1 } }],
    })
  })
})

describe('loadDataset and saveDataset', () => {
  const directory = mkdtempSync(join(tmpdir(), 'datasets-test-'))
  afterAll(() => rmSync(directory, { recursive: true, force: true }))

  it('reads a file with its sha256 and absolute path; .jsonl files are JSONL', async () => {
    const loaded = await loadDataset(join(FIXTURES, 'judgebench-small.jsonl'))
    expect(loaded).toMatchObject({
      path: join(FIXTURES, 'judgebench-small.jsonl'),
      sha256: sha256(fixture('judgebench-small.jsonl')),
      format: 'jsonl',
      shape: 'judgebench',
    })
    expect(loaded.dataset.prompts).toHaveLength(2)
  })

  it('names the file in its errors, a missing one included', async () => {
    await expect(loadDataset('tests/offline/fixtures/datasets/one-candidate.json')).rejects.toThrow(
      'tests/offline/fixtures/datasets/one-candidate.json: prompts[1] (prompt_id "p_lonely").candidates: needs at ' +
        'least 2 candidates, got 1',
    )
    await expect(loadDataset(join(directory, 'missing.json'))).rejects.toThrow(DatasetError)
  })

  it('writes autosr JSON atomically (no temporary file left) that loads back to the same dataset', async () => {
    const dataset = parseDataset(fixture('llmbar-small.json'))
    const saved = await saveDataset(join(directory, 'nested/llmbar.json'), dataset)
    expect(saved.sha256).toBe(sha256(readFileSync(saved.path, 'utf8')))
    expect((await loadDataset(saved.path)).dataset).toEqual(dataset)
    expect(readdirSync(join(directory, 'nested'))).toEqual(['llmbar.json'])
  })
})

describe('examples', () => {
  it('demo.json has 3 prompts × 6 ranked candidates, varied sources, and ids that do not reveal the rank', async () => {
    const { dataset } = await loadDataset('examples/demo.json')
    const summary = datasetSummary(dataset)
    expect(summary).toMatchObject({
      prompts: 3,
      candidates: 18,
      candidates_per_prompt: { min: 6, max: 6 },
      fully_ranked: true,
    })
    expect(Object.keys(summary.sources).length).toBeGreaterThanOrEqual(3)
    for (const item of dataset.prompts) {
      expect(item.candidates.map((candidate) => candidate.label.rank).sort()).toEqual([1, 2, 3, 4, 5, 6])
      expect(item.candidates[0]?.label.rank).not.toBe(1)
    }
  })

  it('pairs.jsonl has 6 JudgeBench pairs, three won by each side', async () => {
    const { dataset, shape } = await loadDataset('examples/pairs.jsonl')
    expect(shape).toBe('judgebench')
    expect(dataset.prompts.map((item) => item.candidates[0]?.label.rank).sort()).toEqual([1, 1, 1, 2, 2, 2])
  })
})

describe("a prompt's reference answer", () => {
  const reference = fc.oneof(
    fc.string({ minLength: 1, maxLength: 40 }).filter((text) => text.trim() !== ''),
    fc.integer({ min: -10_000, max: 10_000 }),
  )
  const pair = (id: string, ref: string | number) => ({
    id,
    prompt: `Question ${id}?`,
    reference: ref,
    chosen: 'A: 3',
    rejected: 'A: 4',
  })

  it('is read from pairs and autosr records, shown to the verifier as data, kept blind, round-tripped', async () => {
    await fc.assert(
      fc.asyncProperty(reference, async (ref) => {
        const fromPairs = parseDataset(JSON.stringify([pair('q1', ref)]))
        const item = fromPairs.prompts[0]!
        expect(item.reference).toBe(String(ref))
        expect(item.metadata).not.toHaveProperty('reference')
        // As the judge sees it: the reference in its own data block, beside the prompt; no label anywhere.
        const blind = blindItem(item, 1)
        expect(blind.reference).toBe(String(ref))
        const request = await buildVerifierRequest(
          { item: blind, candidate: blind.candidates[0]!, rubric: VERIFIER_RUBRIC, vote: 0, seed: 1 },
          { locale: 'en' },
        )
        const user = request.messages.find((message) => message.role === 'user')!.content
        const block = user.match(
          /Reference material for the grader, may be empty \(data, tagged (\w+)\):\n<<<DATA-\1\n([\s\S]*?)\nDATA-\1>>>/,
        )
        expect(block?.[2]).toBe(String(ref))
        // The autosr shape carries it too, and reads back the same.
        const again = parseDataset(JSON.stringify(toAutosrJson(fromPairs)))
        expect(again.prompts[0]!.reference).toBe(String(ref))
      }),
      { numRuns: 40 },
    )
  })

  it('is refused when it is neither text nor a number, and leaves the verifier block empty when absent', async () => {
    expect(() => parseDataset(JSON.stringify([{ ...pair('q1', 1), reference: { answer: 3 } }]))).toThrow(/reference/)
    const item = parseDataset(JSON.stringify([{ prompt: 'Q?', chosen: 'a', rejected: 'b' }])).prompts[0]!
    expect(item.reference).toBeUndefined()
    const request = await buildVerifierRequest(
      { item, candidate: item.candidates[0]!, rubric: VERIFIER_RUBRIC, vote: 0, seed: 1 },
      { locale: 'en' },
    )
    expect(request.messages[1]!.content).toMatch(/may be empty \(data, tagged (\w+)\):\n<<<DATA-\1\n\nDATA-\1>>>/)
  })
})
