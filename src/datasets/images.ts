/**
 * Images of a dataset item (a prompt or a candidate): `images: [{path} | {url} | {data_url}]`, each entry exactly one
 * of the three. `path` is a file relative to the dataset file (or absolute), read only when a model call needs it;
 * `url` an http(s) URL the model server fetches; `data_url` an inline `data:image/<type>;base64,…`. The parsers keep
 * the checked list in the item's `metadata.images`, which the autosr writer round-trips.
 */
import { describeType, type IssueLog, type JsonObject } from './fields.ts'

/** Where one image comes from, as a dataset writes it. */
export type ImageRef = { path: string } | { url: string } | { data_url: string }

const KEYS = ['path', 'url', 'data_url'] as const
const DATA_URL = /^data:image\/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=\s]+$/i

/**
 * A checked image list, or undefined after logging what is wrong. `value` absent or null is an empty list.
 * @example readImageRefs([{ path: 'img/cat.png' }], 'prompts[0].images', log) // [{ path: 'img/cat.png' }]
 */
export function readImageRefs(value: unknown, place: string, log: IssueLog): ImageRef[] | undefined {
  if (value === undefined || value === null) return []
  if (!Array.isArray(value))
    return void log.add(place, `must be an array of {path} | {url} | {data_url}, got ${describeType(value)}`)
  const before = log.issues.length
  const refs: ImageRef[] = []
  for (const [index, entry] of value.entries()) {
    const at = `${place}[${index}]`
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      log.add(at, `must be an object {path} | {url} | {data_url}, got ${describeType(entry)}`)
      continue
    }
    const given = KEYS.filter((key) => (entry as JsonObject)[key] !== undefined && (entry as JsonObject)[key] !== null)
    if (given.length !== 1) {
      log.add(at, `needs exactly one of path, url, data_url${given.length ? `, got ${given.join(' and ')}` : ''}`)
      continue
    }
    const key = given[0]!
    const text = (entry as JsonObject)[key]
    if (typeof text !== 'string' || text.trim() === '') {
      log.add(`${at}.${key}`, `must be a non-blank string, got ${describeType(text)}`)
      continue
    }
    if (key === 'url' && !/^https?:\/\/\S+$/i.test(text)) {
      log.add(`${at}.url`, 'must be an http(s) URL (use path for a local file, data_url for inline data)')
      continue
    }
    if (key === 'data_url' && !DATA_URL.test(text)) {
      log.add(`${at}.data_url`, 'must be data:image/<type>;base64,<data>')
      continue
    }
    refs.push({ [key]: text } as ImageRef)
  }
  return log.issues.length > before ? undefined : refs
}

/**
 * The images of a record given as `images` beside its fields or as `metadata.images` (what the writer produces), not
 * both; undefined after logging a problem.
 * @example recordImages({ prompt: 'Q', images: [{ url: 'https://x/a.png' }] }, {}, 'prompts[0]', log) // [{ url:
 *   'https://x/a.png' }]
 */
export function recordImages(
  record: JsonObject,
  metadata: JsonObject,
  place: string,
  log: IssueLog,
): ImageRef[] | undefined {
  const top = record.images !== undefined && record.images !== null
  const inMetadata = metadata.images !== undefined && metadata.images !== null
  if (top && inMetadata)
    return void log.add(`${place}.images`, 'give images once: either beside the fields or in metadata.images')
  return top
    ? readImageRefs(record.images, `${place}.images`, log)
    : readImageRefs(metadata.images, `${place}.metadata.images`, log)
}

/**
 * `metadata` with the checked images in `metadata.images` (none: the key is left out).
 * @example withImages({ note: 'x' }, [{ path: 'a.png' }]) // { note: 'x', images: [{ path: 'a.png' }] }
 */
export function withImages(metadata: JsonObject, images: readonly ImageRef[]): JsonObject {
  const { images: _old, ...rest } = metadata
  return images.length ? { ...rest, images: [...images] } : rest
}
