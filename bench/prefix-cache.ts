/**
 * What an inference server's prefix cache can reuse of a stream of chat requests (pure: no I/O, no tokenizer of its
 * own). A request is rendered with the ChatML template, tokenised by the caller, cut into blocks of 16 tokens, and each
 * full block is keyed by its tokens and the key of the block before it, as vLLM's automatic prefix caching keys them:
 * a block is reused only when every token before it matched too. The cache is unbounded (no eviction).
 */

/** vLLM's default KV-cache block size, in tokens. */
const CACHE_BLOCK_TOKENS = 16

/** The messages of a chat request, as a judge sends them. */
export interface ChatMessageText {
  role: string
  content: string
}

/**
 * A chat request rendered with the ChatML template (Qwen's and many open models'), ending where the model starts to
 * write: the text a server tokenises and prefills.
 * @example chatMl([{ role: 'user', content: 'Hi' }]) // '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n'
 */
export function chatMl(messages: readonly ChatMessageText[]): string {
  const turns = messages.map((message) => `<|im_start|>${message.role}\n${message.content}<|im_end|>\n`)
  return `${turns.join('')}<|im_start|>assistant\n`
}

/**
 * An unbounded block-level prefix cache: `lookup` says how many leading tokens of a prompt were already cached and then
 * caches its full blocks, as a server does once it has prefilled them.
 * @example const cache = new PrefixCache(); cache.lookup(tokens); cache.lookup(tokens) // tokens.length, in whole
 *   blocks
 */
export class PrefixCache {
  private readonly blocks = new Map<string, number>()

  /** Reused tokens of `tokens` (a multiple of the block size); caches every full block of it. */
  lookup(tokens: readonly number[], blockTokens = CACHE_BLOCK_TOKENS): number {
    let parent = 0
    let hits = 0
    let missed = false
    for (let start = 0; start + blockTokens <= tokens.length; start += blockTokens) {
      const key = `${parent}:${tokens.slice(start, start + blockTokens).join(',')}`
      let id = this.blocks.get(key)
      if (id === undefined) {
        missed = true
        id = this.blocks.size + 1
        this.blocks.set(key, id)
      } else if (!missed) hits += blockTokens
      parent = id
    }
    return hits
  }
}
