/**
 * Images a `/rm/<target>/score` request may carry: the prompt's (`images`), the candidate's (`candidate.images`) and
 * the reference's (`reference_images`). The edge reads no files: each image is an http(s) `url` the model server
 * fetches or an inline `data_url`, as in a dataset (src/datasets/images.ts) minus `path`.
 */
import { z } from 'zod'

const DATA_URL = /^data:image\/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=]+$/i
/** Images per list: a judge prompt with more is unlikely to be read well, and each is sent in both orders. */
export const MAX_REQUEST_IMAGES = 8

/**
 * One image of a request: `{url}` or `{data_url}`.
 * @example RequestImage.parse({ url: 'https://example.org/chart.png' })
 */
export const RequestImage = z.union(
  [
    z.strictObject({ url: z.url({ protocol: /^https?$/ }) }),
    z.strictObject({ data_url: z.string().regex(DATA_URL) }),
  ],
  { error: 'an image is {"url": "https://…"} or {"data_url": "data:image/<type>;base64,…"} (the edge cannot read a path)' },
)
export type RequestImage = z.infer<typeof RequestImage>

/**
 * A list of request images (at most `MAX_REQUEST_IMAGES`).
 * @example RequestImages.parse([{ data_url: 'data:image/png;base64,iVBORw0KGgo=' }])
 */
export const RequestImages = z.array(RequestImage).max(MAX_REQUEST_IMAGES, `at most ${MAX_REQUEST_IMAGES} images per list`)
