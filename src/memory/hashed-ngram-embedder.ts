import type { Embedder } from './embedder.ts'
import { fnv1a, mix32 } from '../hash/index.ts'
import { normalizeInPlace } from './vector-math.ts'

const WORD = /[\p{L}\p{N}]+/gu
/** Words too common to tell two texts apart: skipped, unless a text has no other words. */
const STOPWORDS = new Set(
  (
    'a an and are as at be but by did do does for from had has have he her his i if in into is it its me my ' +
    'no not of ' +
    'on or our she so ' +
    'than that the their them then there these they this those to too us was we were what when which who will with ' +
    'you your'
  ).split(' '),
)
const WORD_BASIS = fnv1a('w:')
const BIGRAM_BASIS = fnv1a('b:')
const TRIGRAM_BASIS = fnv1a('t:')
const WEIGHTS = { word: 1, bigram: 0.8, trigram: 0.3 }

/**
 * The local default embedder: lower-cased content words, their bigrams and the words' character trigrams,
 * hashed (FNV-1a, signed) into `dimensions` buckets and scaled to unit length. Deterministic, needs nothing,
 * fast enough for 100k documents; it finds shared wording, not meaning, so similar texts score clearly higher
 * than unrelated ones, while paraphrases with no words in common do not.
 * @example const [vector] = await new HashedNgramEmbedder({ dimensions: 256 }).embed(['The answer skipped the check.'])
 */
export class HashedNgramEmbedder implements Embedder {
  readonly id: string
  readonly dimensions: number

  constructor(options: { dimensions?: number } = {}) {
    this.dimensions = options.dimensions ?? 256
    if (!Number.isInteger(this.dimensions) || this.dimensions < 8 || this.dimensions > 1_536) {
      throw new RangeError(`dimensions must be an integer in 8…1536, got ${this.dimensions}`)
    }
    this.id = `hashed-ngram:v1:${this.dimensions}`
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    return texts.map((text) => hashedNgramVector(text, this.dimensions))
  }
}

/**
 * The synchronous core of `HashedNgramEmbedder`: one text to one unit vector (all zero when it has no words).
 * @example hashedNgramVector('Skipped the verification step', 256).length // 256
 */
function hashedNgramVector(text: string, dimensions: number): Float32Array {
  const vector = new Float32Array(dimensions)
  const add = (hash: number, weight: number) => {
    const mixed = mix32(hash)
    vector[mixed % dimensions]! += mixed & 0x8000_0000 ? -weight : weight
  }
  const words = text.normalize('NFKC').toLowerCase().match(WORD) ?? []
  const content = words.filter((word) => !STOPWORDS.has(word))
  const kept = content.length > 0 ? content : words
  for (let i = 0; i < kept.length; i++) {
    const word = kept[i]!
    add(fnv1a(word, 0, word.length, WORD_BASIS), WEIGHTS.word)
    if (i > 0) {
      const previous = kept[i - 1]!
      add(
        fnv1a(word, 0, word.length, fnv1a(' ', 0, 1, fnv1a(previous, 0, previous.length, BIGRAM_BASIS))),
        WEIGHTS.bigram,
      )
    }
    const padded = ` ${word} `
    for (let start = 0; start + 3 <= padded.length; start++)
      add(fnv1a(padded, start, start + 3, TRIGRAM_BASIS), WEIGHTS.trigram)
  }
  return normalizeInPlace(vector)
}
