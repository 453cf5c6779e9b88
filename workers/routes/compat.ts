import { Hono } from 'hono'
import { z } from 'zod'
import { AppError } from '../../src/errors/index.ts'
import { canonicalJson, sha256Hex } from '../../src/hash/index.ts'
import { ScoreRequest, TrainingMetadata } from '../../src/schemas/rollout.ts'
import { limitOf, TrajectoryMessage } from '../../src/schemas/trajectory.ts'
import type { ScoreResult } from '../../src/schemas/score.ts'
import type { AppEnv, Env } from '../env.ts'
import { limitBody } from '../middleware/body-limit.ts'
import { invalidBody, jsonBody } from '../middleware/json-body.ts'
import { requestModels } from '../scoring/models.ts'
import { MAX_ROLLOUTS_PER_BATCH } from '../scoring/fan-out.ts'
import { scoreRollouts, type ItemOutcome } from '../scoring/score-rollout.ts'
import { recordTelemetry } from '../telemetry/index.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { RelativeScoring } from '../scoring/relative.ts'
import { chatMlTurns } from '../../src/transcripts/index.ts'
import { mean as meanOf, sampleStd } from '../../src/stats/index.ts'

/** Most responses one group may carry. */
const MAX_GROUP_SIZE = 1_024
const SPLIT_OVER_URLS = 'give OpenRLHF more reward URLs (the batch is split over them)'
const TOO_MANY_SAMPLES = `at most ${MAX_ROLLOUTS_PER_BATCH} samples per request: ${SPLIT_OVER_URLS}`

/**
 * Training metadata for trainers that send none: OpenRLHF, slime and group callers have no such field. A request
 * may still send a (partial) `metadata` object; what it leaves out comes from here.
 * @internal
 */
export const DEFAULT_TRAINING_METADATA: TrainingMetadata = {
  high_level_goal: 'general',
  model_size: 'unknown',
  current_step: 0,
  total_steps: 1,
}

const PartialMetadata = TrainingMetadata.partial().optional()
const Text = z.string().max(200_000)
/** A label or reference as trainers send it: text, a number, null, or anything JSON (stringified for the judge). */
const Label = z.unknown()
/**
 * A part of a chat message's content, as OpenAI-style messages carry it (slime passes dataset messages as they are).
 */
const ContentPart = z.looseObject({ type: z.string(), text: z.string().optional() })
/** A prompt as text or as chat messages (slime and TRL conversational datasets), content as text or a list of parts. */
const PromptInput = z.union([
  Text,
  z
    .array(z.looseObject({ role: z.string(), content: z.union([z.string(), z.array(ContentPart).max(200), z.null()]) }))
    .max(200),
])

/**
 * The body of `POST /compat/openrlhf` (OpenRLHF `--reward.remote_url` / `--remote_rm_url`): `query` is the decoded
 * prompt+response, `prompts` the prompt, `labels` the dataset label, all parallel.
 * @example OpenRlhfRequest.parse({ query: ['Q: 2+2? A: 4'], prompts: ['Q: 2+2? A:'], labels: ['4'] })
 * @internal
 */
export const OpenRlhfRequest = z.object({
  query: z.array(Text).max(MAX_ROLLOUTS_PER_BATCH, TOO_MANY_SAMPLES),
  prompts: z.array(Text).max(MAX_ROLLOUTS_PER_BATCH, TOO_MANY_SAMPLES).nullish(),
  labels: z.array(Label).max(MAX_ROLLOUTS_PER_BATCH, TOO_MANY_SAMPLES).nullish(),
  metadata: PartialMetadata,
})

/**
 * The body of `POST /compat/slime` (slime `--rm-type remote_rm --rm-url`).
 * @example SlimeRequest.parse({ prompt: 'What is 2+2?', response: '4', label: '4' })
 * @internal
 */
export const SlimeRequest = z.object({
  prompt: PromptInput,
  /** The response as text, or as the turns after the prompt (a custom slime reward function that keeps them). */
  response: z.union([Text, z.array(TrajectoryMessage)]),
  label: Label.optional(),
  metadata: PartialMetadata,
})

/**
 * The body of `POST /score/group`: the responses of one GRPO group to one prompt.
 * @example GroupRequest.parse({ prompt: 'What is 2+2?', responses: ['4', '5'], reference: '4' })
 * @internal
 */
export const GroupRequest = z.object({
  prompt: PromptInput,
  /** Each response as text, or as the completion's messages (TRL's conversational format, tool calls included). */
  responses: z
    .array(z.union([Text, z.array(TrajectoryMessage)]))
    .min(1)
    .max(MAX_GROUP_SIZE, `at most ${MAX_GROUP_SIZE} responses per group: send larger groups as several requests`),
  reference: Label.optional(),
  metadata: PartialMetadata,
  instance_id: ScoreRequest.shape.instance_id,
  /** Seeds the order a relative judge sees the responses in (default: from the group's content); echoed back. */
  seed: z
    .number()
    .int()
    .min(0)
    .max(2 ** 32 - 1)
    .optional(),
})

/**
 * Trainer protocols over the run's online scoring core (`scoreRollout`), in the run API: the run is addressed as
 * everywhere else (its token, the `/runs/<id>/` prefix, or the default run). Rollout ids are stable content hashes
 * (the k-th copy of one content in a request hashed with `#k`: `occurrences`), so a trainer's retry is counted once
 * per step and identical samples of one batch each count.
 * - `POST /compat/openrlhf` `{query[], prompts[], labels[]}` → `{rewards[], scores[], extra_logs: {rubric_version[],
 *   cached[], duplicate[]}}`. The response is `query` minus its prompt prefix (when it starts with it); empty lists
 *   are answered at once with empty lists; lists of different lengths are a 400.
 * - `POST /compat/slime` `{prompt, response, label?}` → the `/score` result (`{score, rubric_version, criteria, …}`).
 * - `POST /score/group` `{prompt, responses[], reference?, metadata?, instance_id?}` → `{scores[], advantages[],
 *   rubric_version (the oldest any response was scored on), rubric_versions[], rollout_ids[], criteria[][] (each
 *   response's grades), grade_max, instance_id, run_id, request_id}` with GRPO advantages; identical responses are
 *   judged once, and each is a rollout of its own. A response may be the completion's messages (tool calls and
 *   results).
 * Every route takes an optional partial `metadata`; the rest comes from {@link DEFAULT_TRAINING_METADATA}.
 * OpenRLHF and slime send no Authorization header: they carry the run token in the path
 * (`/t/<token>/runs/<id>/compat/…`). None of them sends a step: their steps close by the run's idle gap
 * (`close_after_idle_s`) unless a body's `metadata.current_step` moves on.
 * @example runApi.route('/', compatRoutes) // also serves /runs/<id>/compat/openrlhf
 */
export const compatRoutes = new Hono<AppEnv>()
  .post('/compat/openrlhf', limitBody('batch'), jsonBody(OpenRlhfRequest), async (c) => {
    const { query, prompts, labels, metadata } = c.get('body')
    // OpenRLHF up to 0.9 merges extra_logs by the first server's keys: an empty shard keeps every key.
    if (query.length === 0 && (prompts ?? []).length === 0 && (labels ?? []).length === 0)
      return c.json({ rewards: [], scores: [], extra_logs: { rubric_version: [], cached: [], duplicate: [] } })
    for (const [name, list] of [
      ['prompts', prompts],
      ['labels', labels],
    ] as const) {
      if (list && list.length !== query.length) {
        throw new AppError(
          'invalid_request',
          'query, prompts and labels must be parallel lists: ' +
            `query has ${query.length} items, ${name} has ${list.length}`,
        )
      }
    }
    const contents = occurrences(query)
    const requests = await Promise.all(
      query.map(async (full, index) => {
        const prompt = prompts?.[index] ?? ''
        const output = responseOf(full, prompt)
        return scoreRequest(
          `orlhf-${(await sha256Hex(contents[index]!)).slice(0, 32)}`,
          prompt,
          multiTurn(prompt, output),
          labels?.[index],
          metadata,
          undefined,
          `query.${index}`,
        )
      }),
    )
    const relative = relativeScoring(c.get('run').config, await sha256Hex(query.join('\u0000')))
    const results = await scoreAll(scoringScope(c), requests, relative)
    const scores = results.map((result) => result.score)
    return c.json({
      ...(relative ? { judging: judgingReport(relative) } : {}),
      rewards: scores,
      scores,
      extra_logs: {
        rubric_version: results.map((result) => result.rubric_version),
        cached: results.map((result) => (result.cached ? 1 : 0)),
        duplicate: results.map((result) => (result.duplicate ? 1 : 0)),
      },
    })
  })
  .post('/compat/slime', limitBody('rollout'), jsonBody(SlimeRequest), async (c) => {
    const { prompt, response, label, metadata } = c.get('body')
    const input = promptText(prompt)
    const text = typeof response === 'string' ? response : canonicalJson(response)
    const request = scoreRequest(
      `slime-${(await sha256Hex(`${input}\u0000${text}`)).slice(0, 32)}`,
      input,
      typeof response === 'string'
        ? multiTurn(prompt, response)
        : { messages: [...promptMessages(prompt), ...response] },
      label,
      metadata,
    )
    const [result] = await scoreAll(scoringScope(c), [request])
    return c.json(result!)
  })
  .post('/score/group', limitBody('batch'), jsonBody(GroupRequest), async (c) => {
    const { prompt, responses, reference, metadata, instance_id: instanceId, seed } = c.get('body')
    const input = promptText(prompt)
    const texts = responses.map((response) => (typeof response === 'string' ? response : canonicalJson(response)))
    const contents = occurrences(texts.map((text) => `${input}\u0000${text}`))
    const requests = await Promise.all(
      responses.map(async (response, index) =>
        scoreRequest(
          `group-${(await sha256Hex(contents[index]!)).slice(0, 32)}`,
          input,
          typeof response === 'string' ? response : { messages: [...promptMessages(prompt), ...response] },
          reference,
          metadata,
          instanceId,
          `responses.${index}`,
        ),
      ),
    )
    const relative = relativeScoring(
      c.get('run').config,
      await sha256Hex(`${input}\u0000${texts.join('\u0000')}`),
      seed,
    )
    const results = await scoreAll(scoringScope(c), requests, relative)
    const scores = results.map((result) => result.score)
    const versions = results.map((result) => result.rubric_version)
    return c.json({
      scores,
      advantages: groupAdvantages(scores),
      rubric_version: Math.min(...versions),
      rubric_versions: versions,
      rollout_ids: results.map((result) => result.rollout_id),
      criteria: results.map((result) => result.criteria),
      grade_max: c.get('run').config.grade_max,
      instance_id: results[0]!.instance_id,
      run_id: c.get('run').id,
      request_id: c.get('requestId'),
      ...(relative ? { judging: judgingReport(relative) } : {}),
    })
  })

/**
 * What names each sample of a batch: its content, and for the k-th copy of the same content in the request (k ≥ 1)
 * that content with `#k`. Identical answers in one batch (a GRPO group at low temperature) are so distinct rollouts,
 * each counted in its step, while the same batch sent again names the same rollouts and gets their first answers.
 * @example occurrences(['C', 'C', 'D']) // ['C', 'C\u0000#1', 'D']
 * @internal
 */
export function occurrences(contents: readonly string[]): string[] {
  const seen = new Map<string, number>()
  return contents.map((content) => {
    const copies = seen.get(content) ?? 0
    seen.set(content, copies + 1)
    return copies === 0 ? content : `${content}\u0000#${copies}`
  })
}

/**
 * End-of-turn tokens OpenRLHF leaves in `query` (it decodes with special tokens kept): not part of the answer judged.
 */
const END_OF_TURN_TOKENS = [
  String.raw`<\|(?:im_end|endoftext|eot_id|end|eom_id)\|>`,
  String.raw`<\/s>`,
  '<eos>',
  '<end_of_turn>',
  String.raw`<\uFF5Cend\u2581of\u2581sentence\uFF5C>`,
].join('|')
const TRAILING_SPECIAL_TOKENS = new RegExp(String.raw`(?:\s*(?:${END_OF_TURN_TOKENS}))+\s*$`)

/**
 * The response inside an OpenRLHF `query` (prompt + response as decoded): what follows the prompt, found at the start
 * or, when tokenisation or left truncation changed the prompt's head, after the prompt's last 256 characters; the
 * whole query when neither is found. Trailing end-of-turn tokens are dropped.
 * @example responseOf('<|user|>2+2?<|assistant|>4<|im_end|>', '<|user|>2+2?<|assistant|>') // '4'
 * @internal
 */
export function responseOf(query: string, prompt: string): string {
  let response = query
  if (prompt !== '') {
    if (query.startsWith(prompt)) response = query.slice(prompt.length)
    else {
      const tail = prompt.slice(-256)
      const at = query.indexOf(tail)
      if (at >= 0) response = query.slice(at + tail.length)
    }
  }
  return response.replace(TRAILING_SPECIAL_TOKENS, '')
}

/**
 * GRPO advantages within one group: (s − mean) / (std + 1e-6), with the sample standard deviation (n − 1, as
 * `torch.std` in TRL and verl); all zeros when the scores do not vary (or the group has one member).
 * @example groupAdvantages([1, 0]) // [0.7071…, -0.7071…]
 * @internal
 */
export function groupAdvantages(scores: readonly number[]): number[] {
  const n = scores.length
  if (n < 2) return scores.map(() => 0)
  const mean = meanOf(scores) ?? 0
  const std = sampleStd(scores) ?? 0
  if (!(std > 1e-12)) return scores.map(() => 0)
  return scores.map((score) => (score - mean) / (std + 1e-6))
}

/**
 * Chat messages flattened to text for the judge (`role: content` per message; a content given as parts is its text
 * parts joined, each non-text part shown as `[image]`, `[audio]`… since the rubric judge reads text only); text stays
 * as it is.
 * @example
 * promptText([{ role: 'user', content: [{ type: 'text', text: 'What is shown?' }, { type: 'image_url' }] }])
 * // 'user: What is shown?\n[image]'
 * @internal
 */
export function promptText(prompt: z.infer<typeof PromptInput>): string {
  if (typeof prompt === 'string') return prompt
  return prompt.map((message) => `${message.role}: ${contentText(message.content)}`).join('\n\n')
}

/**
 * A decoded response with ChatML turns in it (special tokens kept, as OpenRLHF and slime decode) as a trajectory
 * after its prompt; any other text as it is.
 */
function multiTurn(prompt: z.infer<typeof PromptInput>, response: string): string | { messages: unknown[] } {
  const turns = chatMlTurns(response)
  return turns ? { messages: [...promptMessages(prompt), ...turns] } : response
}

/**
 * A prompt as the task turns of a trajectory: chat messages as they are, a text as one user turn. Few-shot assistant
 * turns in a prompt are the task's, not the policy's: they are shown as the trainer's (system) text.
 */
function promptMessages(prompt: z.infer<typeof PromptInput>): unknown[] {
  if (typeof prompt === 'string') return [{ role: 'user', content: prompt }]
  return prompt.map((message) =>
    message.role === 'assistant' || message.role === 'tool'
      ? { role: 'system', content: `${message.role}: ${contentText(message.content)}` }
      : message,
  )
}

function contentText(content: z.infer<typeof ContentPart>[] | string | null): string {
  if (content === null) return ''
  if (typeof content === 'string') return content
  return content
    .map((part) => (typeof part.text === 'string' ? part.text : `[${part.type.replace(/_url$/, '')}]`))
    .join('\n')
}

function labelText(label: unknown): string | null {
  if (label === undefined || label === null) return null
  if (typeof label === 'string') return label === '' ? null : label
  return JSON.stringify(label)
}

/** A `/score` request for one sample; a sample that breaks the `/score` limits is a 400 naming it. */
function scoreRequest(
  id: string,
  input: string,
  output: string | { messages: unknown[] },
  label: unknown,
  metadata: z.infer<typeof PartialMetadata>,
  instanceId?: string,
  where = '(body)',
): ScoreRequest {
  const parsed = ScoreRequest.safeParse({
    rollout: {
      id,
      input,
      ...(typeof output === 'string' ? { output } : output),
      supplemental_context: labelText(label),
    },
    metadata: { ...DEFAULT_TRAINING_METADATA, ...stripUndefined(metadata ?? {}) },
    ...(instanceId === undefined ? {} : { instance_id: instanceId }),
  })
  if (!parsed.success) {
    if (parsed.error.issues.some((issue) => limitOf(issue))) throw invalidBody(parsed.error.issues, where)
    const details = parsed.error.issues.map((issue) => ({
      path: `${where}: ${issue.path.join('.')}`,
      message: issue.message,
    }))
    throw new AppError('invalid_request', `${where} cannot be scored — ${details[0]?.path}: ${details[0]?.message}`, {
      details,
    })
  }
  return parsed.data
}

/** What scoring needs of a request's context. */
interface ScoringScope {
  env: Env
  run: AppEnv['Variables']['run']
  requestId: string
  /** The request's `waitUntil`, on which its LLM calls reach the run's counts (`recordTelemetry`). */
  context: Pick<ExecutionContext, 'waitUntil'>
}

function scoringScope(c: {
  env: Env
  executionCtx: Pick<ExecutionContext, 'waitUntil'>
  get(key: 'run'): AppEnv['Variables']['run']
  get(key: 'requestId'): string
}): ScoringScope {
  return { env: c.env, run: c.get('run'), requestId: c.get('requestId'), context: c.executionCtx }
}

/**
 * Scores every request under one set of models (the run's LLM caps hold across the batch) with one ledger lookup and
 * one record per shard, in input order; the first failure fails the request (a trainer's retry re-scores only what
 * was not recorded, and what was costs no model call).
 */
async function scoreAll(
  scope: ScoringScope,
  requests: readonly ScoreRequest[],
  relative?: RelativeScoring,
): Promise<ScoreResult[]> {
  const { env, run, requestId } = scope
  const models = requestModels(env, run.config)
  let scores: ScoreResult[] = []
  let outcomes: ItemOutcome[]
  try {
    outcomes = await scoreRollouts(
      { env, run, scorer: models.forRole('scorer'), calls: models.calls, requestId, ...(relative ? { relative } : {}) },
      requests,
      { lookupFirst: true },
    )
    scores = outcomes.flatMap((outcome) => (outcome.ok ? [outcome.result] : []))
  } finally {
    // Calls made before a failure were made all the same.
    recordTelemetry(env, { runId: run.id, requestId, scores, calls: models.calls }, scope.context)
  }
  const failure = outcomes.find((outcome) => !outcome.ok)
  if (failure && !failure.ok) throw failure.error
  return scores
}

/** The relative-judging state of a request when the run asks for it: the seed given, else one from the content. */
function relativeScoring(config: RunConfig, contentHash: string, seed?: number): RelativeScoring | undefined {
  if (config.group_scoring !== 'relative') return undefined
  return {
    seed: seed ?? Number.parseInt(contentHash.slice(0, 8), 16),
    report: { groups: 0, calls: 0, cached: 0, fallbacks: [] },
  }
}

/** How the request's groups were judged, for its answer: relative, or pointwise after a failed group reply. */
function judgingReport({ seed, report }: RelativeScoring) {
  return {
    mode: report.fallbacks.length > 0 ? ('relative_with_fallback' as const) : ('relative' as const),
    seed,
    groups: report.groups,
    group_calls: report.calls,
    cached_groups: report.cached,
    fallbacks: report.fallbacks,
  }
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, item]) => item !== undefined)) as Partial<T>
}
