/**
 * Images a `/rm/<target>/score` request may carry: the prompt's (`images`), the candidate's (`candidate.images`) and
 * the reference's (`reference_images`). The edge reads no files: each image is an http(s) `url` the model server
 * fetches or an inline `data_url`, as in a dataset (src/datasets/images.ts) minus `path`.
 */
import { z } from 'zod'
import { dataUrlBytes } from '../../src/evolve/images.ts'
import { isLocalName } from '../../src/llm/hosts.ts'

const DATA_URL = /^data:image\/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=]+$/i
/** Images per list: a judge prompt with more is unlikely to be read well, and each is sent in both orders. */
const MAX_REQUEST_IMAGES = 8

/**
 * True for an https URL on a public DNS name. The model server fetches `url` images itself, so a caller must not be
 * able to point it at the operator's own network: IP literals, single-label names and local suffixes (trailing dots
 * and all: `localhost.`, `kubernetes.default.svc.`) are refused.
 * @example isPublicHttpsUrl('https://images.example.org/a.png') // true; 'http://169.254.169.254/' → false
 */
function isPublicHttpsUrl(text: string): boolean {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return false
  }
  const host = url.hostname.toLowerCase()
  if (url.protocol !== 'https:' || host.startsWith('[') || /^[\d.]+$/.test(host)) return false
  return !isLocalName(host)
}

function decodes(dataUrl: string): boolean {
  try {
    dataUrlBytes(dataUrl)
    return true
  } catch {
    return false
  }
}

/**
 * One image of a request: `{url}` (https, public host) or `{data_url}`.
 * @example RequestImage.parse({ url: 'https://example.org/chart.png' })
 */
export const RequestImage = z.union(
  [
    z.strictObject({
      url: z
        .string()
        .max(4_096)
        .refine(
          isPublicHttpsUrl,
          'an image url must be https on a public host name (no IP address, no local name): ' +
            'the model server fetches it',
        ),
    }),
    z.strictObject({
      data_url: z.string().regex(DATA_URL).refine(decodes, 'the base64 data of data_url does not decode'),
    }),
  ],
  {
    error:
      'an image is {"url": "https://<public host>/…"} or {"data_url": "data:image/<type>;base64,…"} ' +
      '(the edge cannot read a path, and the model server is never sent to an IP address or a local name)',
  },
)
export type RequestImage = z.infer<typeof RequestImage>

/**
 * A list of request images (at most `MAX_REQUEST_IMAGES`).
 * @example RequestImages.parse([{ data_url: 'data:image/png;base64,iVBORw0KGgo=' }])
 */
export const RequestImages = z
  .array(RequestImage)
  .max(MAX_REQUEST_IMAGES, `at most ${MAX_REQUEST_IMAGES} images per list`)

/** The fields of a scoring request that may carry images. */
export interface RequestWithImages {
  images?: RequestImage[] | undefined
  reference_images?: RequestImage[] | undefined
  candidate: { images?: RequestImage[] | undefined }
}

/**
 * A request's images by whose they are (empty lists when absent), and whether there are any.
 * @example imagesOfRequest({ candidate: { images: [{ url: 'https://x.example/a.png' }] } }).any // true
 */
export function imagesOfRequest(request: RequestWithImages): {
  prompt: RequestImage[]
  candidate: RequestImage[]
  reference: RequestImage[]
  any: boolean
} {
  const [prompt, candidate, reference] = [
    request.images ?? [],
    request.candidate.images ?? [],
    request.reference_images ?? [],
  ]
  return { prompt, candidate, reference, any: prompt.length + candidate.length + reference.length > 0 }
}
