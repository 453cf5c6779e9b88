import { createHash } from 'node:crypto'
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { crc32, deflateSync } from 'node:zlib'
import { afterEach, describe, expect, it } from 'vitest'
import { loadDataset } from '../../offline/datasets/load.ts'
import { runBench } from '../../offline/bench/run.ts'
import { runEvolveCommand } from '../../offline/evolve/cli.ts'
import { evolveAgainst } from '../support/evolve-options.ts'
import { saveLibrary } from '../../offline/library/index.ts'
import { datasetImageRegistry } from '../../offline/evolve/images.ts'
import { readLog } from '../../offline/evolve/run.ts'
import { createBackend } from '../../offline/search/backend.ts'
import { formatAutosrJson, parseDatasetText } from '../../src/datasets/index.ts'
import {
  ImageError,
  ImageRegistry,
  imageType,
  judgeBothOrders,
  judgeWithLibrary,
  LibraryRouter,
  pairItems,
} from '../../src/evolve/index.ts'
import { addEntry, emptyLibrary, type Library } from '../../src/library/index.ts'
import { answerLibraryRoute } from '../../src/evolve/mock.ts'
import { jsonMockReply, MockChatModel } from '../../src/llm/mock.ts'
import { visionMessage, type ChatModel } from '../../src/llm/types.ts'
import { type ChatCompletionBody, contentText, imageUrls, type LlmStub, startLlmStub } from '../support/llm-stub.ts'

/** A real 1×1 RGB PNG of one colour. */
function png(r: number, g: number, b: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data])
    const length = Buffer.alloc(4)
    length.writeUInt32BE(data.length)
    const crc = Buffer.alloc(4)
    crc.writeUInt32BE(crc32(body))
    return Buffer.concat([length, body, crc])
  }
  const header = Buffer.alloc(13)
  header.writeUInt32BE(1, 0)
  header.writeUInt32BE(1, 4)
  header.set([8, 2, 0, 0, 0], 8)
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(Buffer.from([0, r, g, b]))),
    chunk('IEND', Buffer.alloc(0)),
  ])
}

const dataUrl = (bytes: Buffer) => `data:image/png;base64,${bytes.toString('base64')}`

/**
 * A dataset dir with `n` image-edit pairs: a source image per prompt, an image per candidate; candidate 1 is better.
 */
async function imageDataset(n: number): Promise<{ file: string; images: Map<string, Buffer>; good: Set<string> }> {
  const dir = await mkdtemp(join(tmpdir(), 'images-'))
  await mkdir(join(dir, 'img'))
  const images = new Map<string, Buffer>()
  const good = new Set<string>()
  const prompts = []
  for (let i = 1; i <= n; i++) {
    for (const [name, bytes] of [
      [`src-${i}.png`, png(i, 0, 0)],
      [`good-${i}.png`, png(0, i, 0)],
      [`bad-${i}.png`, png(0, 0, i)],
    ] as const) {
      await writeFile(join(dir, 'img', name), bytes)
      images.set(name, bytes)
    }
    good.add(dataUrl(images.get(`good-${i}.png`)!))
    const candidates = [
      {
        candidate_id: `p${i}-good`,
        text: `Edit ${i} that removes the car`,
        images: [{ path: `img/good-${i}.png` }],
        metadata: { rank: 1 },
      },
      {
        candidate_id: `p${i}-bad`,
        text: `Edit ${i} that keeps the car`,
        images: [{ path: `img/bad-${i}.png` }],
        metadata: { rank: 2 },
      },
    ]
    // Alternate positions so that the labels are not all A.
    prompts.push({
      prompt_id: `p${i}`,
      prompt: `Remove the red car from photo ${i}.`,
      images: [{ path: `img/src-${i}.png` }],
      candidates: i % 2 ? candidates : candidates.reverse(),
    })
  }
  const file = join(dir, 'edits.json')
  await writeFile(file, JSON.stringify({ prompts }, null, 2))
  return { file, images, good }
}

const toolLibrary: Library = addEntry(emptyLibrary('t'), {
  name: 'visual-check',
  kind: 'tool',
  description: 'Checks which edited photo removed the car',
  when_to_use: 'When the edits must be compared visually',
  body: 'You are the visual-check tool. Reply with JSON {"favours": "A" | "B" | "tie"}.',
})

const system = (body: ChatCompletionBody) => body.messages.find((message) => message.role === 'system')?.content ?? ''
const userMessage = (body: ChatCompletionBody) => body.messages.find((message) => message.role === 'user')!
const block = (text: string, title: string) =>
  new RegExp(`${title}:\\n<<<DATA-(\\w+)\\n([\\s\\S]*?)\\nDATA-\\1>>>`).exec(text)?.[2] ?? ''
const isSubAgent = (body: ChatCompletionBody) => system(body).startsWith('You are the library sub-agent')
const isTool = (body: ChatCompletionBody) => system(body).startsWith('You are the visual-check tool')

describe('dataset images', () => {
  it(
    'reads images beside the prompt and candidate fields into metadata.images, refuses malformed ones, and ' +
      'round-trips',
    () => {
      const text = JSON.stringify({
        prompts: [
          {
            prompt_id: 'p1',
            prompt: 'Q',
            images: [{ path: 'img/a.png' }, { url: 'https://example.org/x.jpg' }],
            candidates: [
              {
                candidate_id: 'a',
                text: 'x',
                images: [{ data_url: 'data:image/png;base64,iVBORw0KGgo=' }],
                metadata: { rank: 1 },
              },
              { candidate_id: 'b', text: 'y', metadata: { rank: 2 } },
            ],
          },
        ],
      })
      const parsed = parseDatasetText(text, { name: 'd.json' }).dataset
      expect(parsed.prompts[0]!.metadata.images).toEqual([{ path: 'img/a.png' }, { url: 'https://example.org/x.jpg' }])
      expect(parsed.prompts[0]!.candidates[0]!.metadata.images).toEqual([
        { data_url: 'data:image/png;base64,iVBORw0KGgo=' },
      ])
      expect(parsed.prompts[0]!.candidates[1]!.metadata).toEqual({})
      expect(parseDatasetText(formatAutosrJson(parsed), { name: 'again.json' }).dataset).toEqual(parsed)

      const bad = (images: unknown) => () =>
        parseDatasetText(
          JSON.stringify({
            prompts: [
              {
                prompt_id: 'p',
                prompt: 'Q',
                images,
                candidates: [
                  { candidate_id: 'a', text: 'x' },
                  { candidate_id: 'b', text: 'y' },
                ],
              },
            ],
          }),
          { name: 'bad.json' },
        )
      expect(bad([{ path: 'a.png', url: 'https://x/y.png' }])).toThrow(
        /images\[0\]: needs exactly one of path, url, data_url, got path and url/,
      )
      expect(bad([{ url: 'file:///etc/passwd' }])).toThrow(/must be an http\(s\) URL/)
      expect(bad([{ data_url: 'data:text/plain;base64,aGk=' }])).toThrow(/must be data:image\/<type>;base64,<data>/)
      expect(bad('a.png')).toThrow(/must be an array/)
    },
  )

  it('keeps images as handles and reads a path image only when it is resolved', async () => {
    const reads: string[] = []
    const registry = new ImageRegistry(async (path) => {
      reads.push(path)
      return path === 'cat.png' ? new Uint8Array(png(1, 2, 3)) : new TextEncoder().encode('not an image')
    })
    const handle = registry.add({ path: 'cat.png' })
    expect(registry.add({ path: 'cat.png' })).toBe(handle)
    expect(reads).toEqual([])
    const resolved = await registry.resolve(handle)
    expect(resolved.url).toBe(dataUrl(png(1, 2, 3)))
    expect(resolved.sha256).toBe(
      createHash('sha256')
        .update(png(1, 2, 3))
        .digest('hex'),
    )
    // The same picture inline is labelled with the same digest (of its bytes, not of the URL text).
    expect((await registry.resolve(registry.add({ data_url: resolved.url }))).sha256).toBe(resolved.sha256)
    await expect(registry.resolve(registry.add({ data_url: 'data:image/png;base64,abcde' }))).rejects.toThrow(
      /does not decode/,
    )
    await registry.resolve(handle)
    expect(reads).toEqual(['cat.png'])
    await expect(registry.resolve(registry.add({ path: 'notes.txt' }))).rejects.toThrow(ImageError)
    await expect(registry.resolve('img-99')).rejects.toThrow(/no image with handle img-99/)
    expect(imageType(new Uint8Array([0xff, 0xd8, 0xff, 0xe0]))).toBe('image/jpeg')
  })

  it('the mock adapter accepts vision messages: it reads their text and counts each image', async () => {
    const model = new MockChatModel()
    const task = 'library_route'
    const mock = jsonMockReply(answerLibraryRoute, { instruction: 'x', entries: [] })
    const text = await model.complete({
      role: 'judge',
      messages: [{ role: 'user', content: 'Look.' }],
      task,
      json: true,
      mock,
    })
    const vision = await model.complete({
      role: 'judge',
      messages: [
        visionMessage('user', [
          { type: 'text', text: 'Look.' },
          { type: 'image_url', image_url: { url: dataUrl(png(1, 1, 1)) } },
        ]),
      ],
      task,
      json: true,
      mock,
    })
    expect(vision.text).toBe(text.text)
    expect(vision.usage.prompt_tokens).toBe(text.usage.prompt_tokens + 85)
  })
})

describe('images through an OpenAI-compatible vision stub', () => {
  let stub: LlmStub | undefined
  afterEach(async () => {
    await stub?.close()
    stub = undefined
  })

  async function stubModel(url: string): Promise<{ model: ChatModel; close: () => Promise<void> }> {
    const backend = await createBackend({
      backend: 'openai',
      endpoints: [url],
      maxConcurrency: 2,
      model: 'stub-vlm',
      models: {},
      temperature: 0,
      maxTokens: 512,
      timeoutMs: 10_000,
      maxAttempts: 1,
      seed: 1,
      mockNoise: 0,
    })
    return { model: backend.models.judge, close: backend.close }
  }

  it(
    'the Sub-Agent gets the images as image_url parts, and a tool call gets the same ones resolved by handle, never ' +
      'pasted data',
    async () => {
      const { file, images } = await imageDataset(1)
      const { dataset } = await loadDataset(file)
      const registry = datasetImageRegistry(file)
      const [item] = pairItems(dataset, registry)
      // Position 1 is the good edit for p1.
      const expected = [
        dataUrl(images.get('src-1.png')!),
        dataUrl(images.get('good-1.png')!),
        dataUrl(images.get('bad-1.png')!),
      ]
      let toolImages: string[] | undefined
      stub = await startLlmStub()
      stub.respondWith((body) => {
        if (system(body).startsWith('You are the library router')) return JSON.stringify({ entries: ['visual-check'] })
        if (isTool(body)) return '{"favours": "A"}'
        const observed = body.messages.some((message) => contentText(message).startsWith('Observation from tool'))
        if (observed)
          return JSON.stringify({ think: 'the tool favours A', answer: { preference: 'A', reason: 'car removed' } })
        return JSON.stringify({
          think: 'look closer',
          tool: {
            name: 'visual-check',
            query: 'which edit removed the car?',
            ...(toolImages ? { images: toolImages } : {}),
          },
        })
      })
      const { model, close } = await stubModel(stub.baseUrl)
      try {
        const routed = await new LibraryRouter(model).route(toolLibrary, item!.instruction)
        // the router reads text only
        expect(stub.requests[0]!.messages.every((message) => typeof message.content === 'string')).toBe(true)

        // 1. Every image to the Sub-Agent, and the same ones to the tool.
        const outcome = await judgeWithLibrary(model, toolLibrary, routed, item!, { images: registry })
        expect(outcome).toMatchObject({ ok: true, preference: 'A', tool_calls: 1 })
        expect(outcome.chain).toContain('[tool input visual-check] images instruction-1, A-1, B-1')
        const judgeCall = stub.requests.find(isSubAgent)!
        const toolCall = stub.requests.find(isTool)!
        expect(imageUrls(userMessage(judgeCall))).toEqual(expected)
        expect(imageUrls(userMessage(toolCall))).toEqual(expected)
        expect(contentText(userMessage(judgeCall))).toMatch(/Image A-1 \(of answer A, sha256 [0-9a-f]{12}\):/)
        for (const title of ['The instruction', 'Answer A', 'Answer B'])
          expect(block(contentText(userMessage(toolCall)), title)).toBe(
            block(contentText(userMessage(judgeCall)), title),
          )
        expect(block(contentText(userMessage(toolCall)), 'The judge asks')).toBe('which edit removed the car?')

        // 2. A tool call that names labels gets exactly those images.
        toolImages = ['B-1']
        const before = stub.requests.length
        await judgeWithLibrary(model, toolLibrary, routed, item!, { images: registry })
        const subsetCall = stub.requests.slice(before).find(isTool)!
        expect(imageUrls(userMessage(subsetCall))).toEqual([expected[2]])

        // 3. Image data pasted into the tool call is refused: no sub-call, an error observation instead.
        toolImages = [expected[1]!]
        const start = stub.requests.length
        const pasted = await judgeWithLibrary(model, toolLibrary, routed, item!, { images: registry })
        expect(stub.requests.slice(start).some(isTool)).toBe(false)
        const pastedError = new RegExp(
          /\[observation visual-check\] \{"error":"unknown image handle \\"data:image\/png;base64…\\": /.source +
            /name images by their labels \(instruction-1, A-1, B-1\)"\}/.source,
        )
        expect(pasted.chain).toMatch(pastedError)
        expect(pasted.chain).not.toContain(expected[1])
        const answerTurn = stub.requests.slice(start).filter(isSubAgent).at(-1)!
        expect(contentText(answerTurn.messages.at(-1)!)).toContain('unknown image handle')

        // 4. The B/A order shows answer B's image as A-1 and the tool follows the presentation.
        toolImages = undefined
        const mark = stub.requests.length
        const both = await judgeBothOrders(model, toolLibrary, routed, item!, { images: registry })
        expect(both).toMatchObject({ verdict: 'inconsistent', orders: { ab: 'A', ba: 'B' } }) // the stub always says A
        const swappedJudge = stub.requests.slice(mark).filter(isSubAgent)[2]!
        const swappedTool = stub.requests.slice(mark).filter(isTool)[1]!
        expect(imageUrls(userMessage(swappedJudge))).toEqual([expected[0], expected[2], expected[1]])
        expect(imageUrls(userMessage(swappedTool))).toEqual([expected[0], expected[2], expected[1]])
      } finally {
        await close()
      }
    },
  )

  it(
    'evolve on an image dataset: judges in both orders from the images, and the tool-prompt check exercises a new ' +
      'tool on them',
    async () => {
      const { file, good } = await imageDataset(6)
      const toolBody = 'You are the visual-check tool. Reply with JSON {"favours": "A" | "B" | "tie"}.'
      stub = await startLlmStub()
      stub.respondWith((body) => {
        const sys = system(body)
        if (sys.startsWith('You are the library router'))
          return JSON.stringify({
            entries: [...contentText(userMessage(body)).matchAll(/^- ([a-z0-9-]+) \(/gm)].map((match) => match[1]),
          })
        if (sys.startsWith('You are the chain analyzer'))
          return JSON.stringify({
            signals: [{ kind: 'missing_tool', suggestion: 'look at the images' }],
            summary: 'stub',
          })
        if (sys.startsWith('You are the evolver'))
          return JSON.stringify({
            op: 'add',
            entry: {
              name: 'visual-check',
              kind: 'tool',
              description: 'Checks which edited photo removed the car',
              when_to_use: 'Always',
              body: toolBody,
            },
            rationale: 'stub',
          })
        if (isTool(body)) return '{"favours": "tie"}'
        // The Sub-Agent decides from the pixels it was sent: the image shown as A-1 is the second URL.
        const urls = imageUrls(userMessage(body))
        return JSON.stringify({
          think: 'compared the photos',
          answer: { preference: good.has(urls[1]!) ? 'A' : 'B', reason: 'stub' },
        })
      })
      const options = await evolveAgainst(stub.baseUrl, { dataset: file, model: 'stub-vlm', toolCheck: '3' })
      const summary = await runEvolveCommand(options, () => {})
      const log = await readLog(join(options.out, 'evolution-log.jsonl'))
      expect(log[0]).toMatchObject({
        train_accuracy: 1,
        val_accuracy: 1,
        inconsistent: { train: 0, val: 0 },
        failures: { train: 0, val: 0 },
      })
      expect(log[0]!.settings).toMatchObject({ orders: 'both', images: 18 })
      expect(log[1]).toMatchObject({
        decision: 'kept',
        change: { key: 'add visual-check' },
        tool_check: [{ tool: 'visual-check', sampled: 3, json: 3, passed: true }],
      })
      const toolCalls = stub.requests.filter(isTool)
      expect(toolCalls.length).toBeGreaterThanOrEqual(3)
      for (const call of toolCalls) {
        const urls = imageUrls(userMessage(call))
        expect(urls).toHaveLength(3)
        // Each probe got one item's own images: exactly one of its answers' images is a good edit.
        expect(urls.slice(1).filter((url) => good.has(url))).toHaveLength(1)
      }
      for (const call of stub.requests.filter(isSubAgent)) expect(imageUrls(userMessage(call))).toHaveLength(3)
      expect(summary.usage.tool.calls).toBe(toolCalls.length)
      // Per-item results keep handles' labels out of the data: the chains name images by label only.
      expect(await readFile(join(options.out, 'results', 'iter-0.val.jsonl'), 'utf8')).not.toContain('base64')
    },
  )

  it("bench --scorer library: judges each ordered pair with the instruction and both answers' images", async () => {
    const { file, images, good } = await imageDataset(2)
    const libDir = await mkdtemp(join(tmpdir(), 'bench-images-lib-'))
    await saveLibrary(toolLibrary, libDir)
    stub = await startLlmStub()
    // The judge sees only pictures that tell the edits apart: it prefers the answer whose image is a good edit.
    stub.respondWith((body) => {
      if (system(body).startsWith('You are the library router')) return JSON.stringify({ entries: [] })
      const [, a] = imageUrls(userMessage(body))
      return JSON.stringify({
        think: 'compare the edits',
        answer: { preference: good.has(a ?? '') ? 'A' : 'B', reason: 'by the images' },
      })
    })
    const { model, close } = await stubModel(stub.baseUrl)
    try {
      const report = await runBench({ dataset: file, scorer: `library:${libDir}`, seed: 0, concurrency: 1, model })
      expect(report.overall.pairwise!.ab.accuracy).toBe(1)
      expect(report.failures.count).toBe(0)
      const judged = stub.requests.filter(isSubAgent)
      expect(judged).toHaveLength(4) // 2 items × both orders
      const url = (name: string) => dataUrl(images.get(name)!)
      for (const request of judged) {
        const [source, ...answers] = imageUrls(userMessage(request))
        const item = source === url('src-1.png') ? 1 : source === url('src-2.png') ? 2 : 0
        expect(item, 'the instruction image comes first').toBeGreaterThan(0)
        expect(answers.sort()).toEqual([url(`good-${item}.png`), url(`bad-${item}.png`)].sort())
      }
    } finally {
      await close()
    }
  })

  it('refuses a dataset whose image files are missing, before any model call', async () => {
    const { file } = await imageDataset(2)
    const text = (await readFile(file, 'utf8')).replace('img/src-2.png', 'img/typo.png')
    await writeFile(file, text)
    stub = await startLlmStub()
    await expect(
      runEvolveCommand(
        await evolveAgainst(stub.baseUrl, {
          dataset: file,
          iterations: '0',
          model: 'm',
          seed: '1',
          valFraction: '0.5',
        }),
        () => {},
      ),
    ).rejects.toThrow(/1 image file not found \(paths are relative to the dataset file\): img\/typo\.png: no such file/)
    expect(stub.requests).toHaveLength(0)
  })
})
