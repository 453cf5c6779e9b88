/**
 * Images of pair items, kept as handles (RewardHarness §2.4's gap fixed): a dataset's image references are
 * registered once (`ImageRegistry.add` → `img-<n>`), items carry only handles, and an image becomes a data URL
 * only when a request is built, by resolving its handle at call time. The model sees each image labelled by its
 * place in the presentation (`instruction-1`, `A-1`, `B-2`, …); a tool call may name labels, and the host maps
 * them back to handles. Nothing the model writes is ever used as image data.
 */
import type { ImageRef } from '../datasets/images.ts'
import { toHex } from '../hash/index.ts'
import type { ChatContentPart } from '../llm/types.ts'
import type { Locale } from '../prompts/index.ts'
import { UsageError } from '../usage-error/index.ts'

export type { ImageRef } from '../datasets/images.ts'

/** The images of one pair item as registry handles: the instruction's, answer A's and answer B's. */
export interface ItemImages {
  instruction: string[]
  first: string[]
  second: string[]
}

/** An image ready for a request: its URL (`data:` or http(s)) and a SHA-256 of its bytes (or of its URL). */
export interface ResolvedImage {
  url: string
  sha256: string
}

/** Turns a handle into an image at call time. */
export interface ImageResolver {
  resolve(handle: string): Promise<ResolvedImage>
}

/** Reads a `path` image's bytes (offline: relative to the dataset file). */
export type ReadImageFile = (path: string) => Promise<Uint8Array>

/**
 * An image that cannot be used: unknown handle, unreadable file, not an image.
 * @internal
 */
export class ImageError extends UsageError {
  constructor(message: string) {
    super(message)
    this.name = 'ImageError'
  }
}

/**
 * The handle registry. `path` images are read by `readFile` when first needed and kept in a small cache, so a
 * large dataset is never held in memory as base64.
 * @example const registry = new ImageRegistry((path) => readFile(join(dir, path))); const handle = registry.add({ path:
 *   'cat.png' })
 */
export class ImageRegistry implements ImageResolver {
  readonly #refs = new Map<string, ImageRef>()
  readonly #handles = new Map<string, string>()
  readonly #cache = new Map<string, Promise<ResolvedImage>>()

  constructor(
    private readonly readFile?: ReadImageFile,
    private readonly maxCached = 16,
  ) {}

  /**
   * The handle of an image reference; the same reference always gets the same handle.
   * @example registry.add({ url: 'https://example.org/a.png' }) // 'img-1'
   */
  add(ref: ImageRef): string {
    const key = JSON.stringify(ref)
    let handle = this.#handles.get(key)
    if (!handle) {
      handle = `img-${this.#refs.size + 1}`
      this.#handles.set(key, handle)
      this.#refs.set(handle, ref)
    }
    return handle
  }

  /**
   * The reference behind a handle.
   * @example registry.ref('img-1') // { path: 'cat.png' }
   */
  ref(handle: string): ImageRef | undefined {
    return this.#refs.get(handle)
  }

  /** Every registered handle with its reference, in registration order. */
  entries(): [string, ImageRef][] {
    return [...this.#refs]
  }

  /**
   * The image behind a handle as a URL for a request: `path` files become `data:` URLs (type from the bytes).
   * Rejects with an ImageError for an unknown handle or an unusable file.
   * @example (await registry.resolve('img-1')).url // 'data:image/png;base64,iVBORw0…'
   */
  resolve(handle: string): Promise<ResolvedImage> {
    const cached = this.#cache.get(handle)
    if (cached) {
      // Most recently used last, so the oldest is evicted first.
      this.#cache.delete(handle)
      this.#cache.set(handle, cached)
      return cached
    }
    const loading = this.#load(handle)
    this.#cache.set(handle, loading)
    loading.catch(() => this.#cache.delete(handle))
    while (this.#cache.size > this.maxCached) this.#cache.delete(this.#cache.keys().next().value!)
    return loading
  }

  async #load(handle: string): Promise<ResolvedImage> {
    const ref = this.#refs.get(handle)
    if (!ref) throw new ImageError(`no image with handle ${handle}`)
    if ('url' in ref) return { url: ref.url, sha256: await sha256Of(new TextEncoder().encode(ref.url)) }
    if ('data_url' in ref) {
      // The digest of the bytes, as for a file: the same picture is labelled alike inline or on disk.
      const url = ref.data_url.replace(/\s+/g, '')
      return { url, sha256: await sha256Of(dataUrlBytes(url)) }
    }
    if (!this.readFile) throw new ImageError(`image ${ref.path}: this registry cannot read files`)
    let bytes: Uint8Array
    try {
      bytes = await this.readFile(ref.path)
    } catch (error) {
      throw new ImageError(`image ${ref.path}: ${(error as Error).message}`)
    }
    const type = imageType(bytes)
    if (!type) throw new ImageError(`image ${ref.path}: not a PNG, JPEG, GIF or WebP file`)
    return { url: `data:${type};base64,${base64(bytes)}`, sha256: await sha256Of(bytes) }
  }
}

/**
 * The MIME type of image bytes from their signature (PNG, JPEG, GIF, WebP), or undefined.
 * @example imageType(new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) // 'image/png'
 * @internal
 */
export function imageType(bytes: Uint8Array): string | undefined {
  const starts = (...signature: number[]) => signature.every((byte, index) => bytes[index] === byte)
  if (starts(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return 'image/png'
  if (starts(0xff, 0xd8, 0xff)) return 'image/jpeg'
  if (starts(0x47, 0x49, 0x46, 0x38)) return 'image/gif'
  if (
    starts(0x52, 0x49, 0x46, 0x46) &&
    bytes[8] === 0x57 &&
    bytes[9] === 0x45 &&
    bytes[10] === 0x42 &&
    bytes[11] === 0x50
  )
    return 'image/webp'
  return undefined
}

/**
 * The bytes a `data:…;base64,` URL carries; an ImageError when its data does not decode.
 * @example dataUrlBytes('data:image/png;base64,iVBORw0KGgo=').length // 8
 */
export function dataUrlBytes(dataUrl: string): Uint8Array {
  let binary: string
  try {
    binary = atob(dataUrl.slice(dataUrl.indexOf(',') + 1))
  } catch {
    throw new ImageError(`image ${dataUrl.slice(0, 40)}…: its base64 data does not decode`)
  }
  return Uint8Array.from(binary, (char) => char.charCodeAt(0))
}

function base64(bytes: Uint8Array): string {
  let binary = ''
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(binary)
}

async function sha256Of(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>)
  return toHex(new Uint8Array(digest))
}

/** An image as the model sees it: its label in the presentation, whose it is, and its registry handle. */
export interface PresentedImage {
  label: string
  of: 'instruction' | 'A' | 'B'
  handle: string
}

/**
 * The item's images labelled as presented: `instruction-<i>`, then `A-<i>` (first answer), then `B-<i>`.
 * @example presentedImages({ instruction: ['img-1'], first: ['img-2'], second: [] }) // [{ label: 'instruction-1', of:
 *   'instruction', handle: 'img-1' }, { label: 'A-1', of: 'A', handle: 'img-2' }]
 */
export function presentedImages(images: ItemImages | undefined): PresentedImage[] {
  if (!images) return []
  const label = (of: PresentedImage['of'], handles: string[]) =>
    handles.map((handle, index) => ({ label: `${of}-${index + 1}`, of, handle }))
  return [...label('instruction', images.instruction), ...label('A', images.first), ...label('B', images.second)]
}

/**
 * The item's images with A's and B's exchanged (the B/A presentation, or a swapped copy).
 * @example swapImages({ instruction: [], first: ['img-1'], second: ['img-2'] }) // { instruction: [], first: ['img-2'],
 *   second: ['img-1'] }
 */
export function swapImages(images: ItemImages | undefined): ItemImages | undefined {
  return images && { instruction: images.instruction, first: images.second, second: images.first }
}

const WHOSE = {
  en: { instruction: 'of the instruction', A: 'of answer A', B: 'of answer B', image: 'Image' },
  zh: { instruction: '指令的图片', A: '答案 A 的图片', B: '答案 B 的图片', image: '图片' },
} as const satisfies Record<Locale, Record<string, string>>

/**
 * Image parts for a request, each after a text part naming it (label, whose, and a digest prefix so that the
 * message's text alone tells different images apart). Resolves every handle now: this is call time.
 * @example await imageParts(registry, presentedImages(item.images), 'en') // [{ type: 'text', text: 'Image A-1 (of
 *   answer A, sha256 3f2a…):' }, { type: 'image_url', … }]
 */
export async function imageParts(
  resolver: ImageResolver,
  images: readonly PresentedImage[],
  locale: Locale,
): Promise<ChatContentPart[]> {
  const words = WHOSE[locale]
  const parts: ChatContentPart[] = []
  for (const image of images) {
    const resolved = await resolver.resolve(image.handle)
    parts.push(
      {
        type: 'text',
        text: `${words.image} ${image.label} (${words[image.of]}, sha256 ${resolved.sha256.slice(0, 12)}):`,
      },
      { type: 'image_url', image_url: { url: resolved.url } },
    )
  }
  return parts
}

/**
 * Items' image handles from a dataset prompt's and its two candidates' `metadata.images` (as src/datasets checked
 * them), registered in `registry`; undefined when there are none.
 * @example itemImages(registry, prompt.metadata, a.metadata, b.metadata) // { instruction: ['img-1'], first: [],
 *   second: ['img-2'] }
 */
export function itemImages(
  registry: ImageRegistry,
  prompt: Record<string, unknown>,
  first: Record<string, unknown>,
  second: Record<string, unknown>,
): ItemImages | undefined {
  const handles = (metadata: Record<string, unknown>) =>
    Array.isArray(metadata.images) ? (metadata.images as ImageRef[]).map((ref) => registry.add(ref)) : []
  const images = { instruction: handles(prompt), first: handles(first), second: handles(second) }
  return images.instruction.length + images.first.length + images.second.length > 0 ? images : undefined
}
