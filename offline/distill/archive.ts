/**
 * Reads a run's archive of scored rollouts: from the edge (`GET /runs/<id>/archive`, following its `more` lines)
 * or from a local NDJSON file of the same lines. Every line is checked; a bad one is a UsageError (exit 2) that
 * names its line number and field.
 */
import { createReadStream } from 'node:fs'
import { createInterface } from 'node:readline'
import { Readable } from 'node:stream'
import type { z } from 'zod'
import { ArchivedRollout, ArchiveLine, type ArchiveRunLine } from '../../src/schemas/archive.ts'
import type { Rubric } from '../../src/schemas/rubric.ts'
import { UsageError } from '../../src/usage-error/index.ts'
import { EdgeNetworkError } from '../deploy/errors.ts'
import { networkReason } from '../edge/index.ts'

/** What an archive holds, in the order it came. */
export interface ArchiveContents {
  /** How the run judges; null for a file that has no `run` line. */
  run: ArchiveRunLine | null
  /** The rubrics of `<instance>@<version>`. */
  rubrics: Map<string, Rubric[]>
  rollouts: ArchivedRollout[]
}

/** Where the archive comes from. */
export type ArchiveSource =
  | { kind: 'file'; path: string }
  | {
      kind: 'edge'
      url: string
      runId: string
      token: string
      fromStep?: number
      toStep?: number
      fetch?: typeof fetch
    }

/**
 * The key of an instance's rubric version in {@link ArchiveContents.rubrics}.
 * @example rubricKey('global', 3) // 'global@3'
 */
export function rubricKey(instanceId: string, version: number): string {
  return `${instanceId}@${version}`
}

/**
 * Reads the whole archive of a source.
 * @example const archive = await readArchive({ kind: 'file', path: 'runs/grpo-1.ndjson' })
 */
export async function readArchive(source: ArchiveSource): Promise<ArchiveContents> {
  const contents: ArchiveContents = { run: null, rubrics: new Map(), rollouts: [] }
  if (source.kind === 'file') {
    const stream = createReadStream(source.path, { encoding: 'utf8' })
    await new Promise<void>((resolve, reject) => {
      stream.once('open', () => resolve())
      stream.once('error', (error: NodeJS.ErrnoException) =>
        reject(new UsageError(`${source.path}: cannot read (${error.code ?? error.message})`)),
      )
    })
    await collect(createInterface({ input: stream, crlfDelay: Infinity }), source.path, contents)
    return contents
  }
  let after: string | undefined
  do {
    const url = new URL(`${source.url.replace(/\/+$/, '')}/runs/${encodeURIComponent(source.runId)}/archive`)
    if (source.fromStep !== undefined) url.searchParams.set('from_step', String(source.fromStep))
    if (source.toStep !== undefined) url.searchParams.set('to_step', String(source.toStep))
    if (after) url.searchParams.set('after', after)
    let response: Response
    try {
      response = await (source.fetch ?? fetch)(url, {
        headers: { authorization: `Bearer ${source.token}`, accept: 'application/x-ndjson' },
      })
    } catch (error) {
      throw new EdgeNetworkError('GET', url.pathname, networkReason(error), source.url.replace(/\/+$/, ''))
    }
    if (!response.ok || !response.body) throw await edgeError(response, source.runId)
    after = await collect(
      createInterface({
        input: Readable.fromWeb(response.body as import('node:stream/web').ReadableStream),
        crlfDelay: Infinity,
      }),
      url.pathname,
      contents,
    )
  } while (after)
  return contents
}

/** Adds every line of one response (or file) to `contents`; answers the `more` key, if the response ended with one. */
async function collect(
  lines: AsyncIterable<string>,
  shown: string,
  contents: ArchiveContents,
): Promise<string | undefined> {
  let number = 0
  let more: string | undefined
  for await (const text of lines) {
    number++
    if (text.trim() === '') continue
    const line = parseLine(text, `${shown}:${number}`)
    switch (line.kind) {
      case 'run':
        contents.run ??= line
        break
      case 'rubrics':
        contents.rubrics.set(rubricKey(line.instance_id, line.rubric_version), line.rubrics)
        break
      case 'more':
        more = line.after
        break
      default:
        contents.rollouts.push(line)
    }
  }
  return more
}

function parseLine(text: string, where: string): ArchiveLine {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    throw new UsageError(`${where}: not JSON (${(error as Error).message})`)
  }
  const kind = typeof value === 'object' && value !== null ? (value as { kind?: unknown }).kind : undefined
  const schema = kind === undefined || kind === 'rollout' ? ArchivedRollout : ArchiveLine
  const parsed = schema.safeParse(value)
  if (parsed.success) return parsed.data
  throw new UsageError(`${where}: ${describeIssue(parsed.error)}`)
}

function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0]!
  const field = issue.path.join('.')
  return field ? `field "${field}": ${issue.message}` : issue.message
}

async function edgeError(response: Response, runId: string): Promise<Error> {
  const text = await response.text().catch(() => '')
  let message = text.slice(0, 500)
  try {
    const body = JSON.parse(text) as { error?: { code?: string; message?: string } }
    if (body.error?.message) message = `${body.error.code}: ${body.error.message}`
  } catch {
    // Not JSON: the text as it came.
  }
  const reason = `the edge refused the archive of run "${runId}" (HTTP ${response.status}): ${message}`
  // A refusal of this request (no archive, no such run, a wrong token) is the caller's to fix; a 5xx is a failure.
  return response.status >= 400 && response.status < 500 ? new UsageError(reason) : new Error(reason)
}
