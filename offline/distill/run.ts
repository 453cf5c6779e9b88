/**
 * `reward-harness distill`: an archive of judged rollouts → re-judged k times per judge through the run's own scorer
 * request and parser (and the reply cache) → pairs that clear the judge's noise → train / held-out files in the
 * formats trainers read, and a summary.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { buildScorerRequest, parseScorerReply } from '../../src/agents/scorer/index.ts'
import { groupBy } from '../../src/collections/index.ts'
import { canonicalJson } from '../../src/hash/index.ts'
import {
  heldOutPrompts,
  openRlhfRow,
  pairResponses,
  pointwiseRow,
  repeatAgreement,
  trlRow,
  type DistillFormat,
  type JudgedResponse,
} from '../../src/distill/index.ts'
import { pLimit, withRetry } from '../../src/llm/index.ts'
import type { ArchivedRollout } from '../../src/schemas/archive.ts'
import { taskLength, type Trajectory } from '../../src/schemas/trajectory.ts'
import { rewardFromGrades } from '../../src/scoring/index.ts'
import { UsageError } from '../../src/usage-error/index.ts'
import { startProgress } from '../progress/index.ts'
import { readArchive, rubricKey, type ArchiveContents, type ArchiveSource } from './archive.ts'
import { openJudge, type Judge, type JudgeSampling, type JudgeSpec } from './judges.ts'
import { NOISE_BOUND, type DistillSummary } from './summary.ts'

export interface DistillOptions {
  source: ArchiveSource
  /** The directory the data files and summary.json go to. */
  out: string
  formats: readonly DistillFormat[]
  /** Conversational rows (role/content messages) for trl and openrlhf. */
  conversational: boolean
  /** Judgements per judge and rollout; 0 uses the online score alone. */
  repeats: number
  judges: readonly JudgeSpec[]
  sampling: JudgeSampling
  z: number
  minMargin: number
  pairsPerPrompt: number
  /** Share of prompts held out. */
  heldOut: number
  /** Seeds the repeats (repeat r samples with seed + r) and the split. */
  seed: number
  concurrency: number
  cacheDir: string
  /** Show the judging's progress on stderr (a bar on a terminal, else a line every 10 s). */
  showProgress?: boolean
}

/**
 * Runs a distillation and writes its files.
 * @example const summary = await runDistill({ source: { kind: 'file', path: 'archive.ndjson' }, out: 'out/distill',
 *   formats: ['trl'], … })
 */
export async function runDistill(options: DistillOptions): Promise<DistillSummary> {
  const archive = await readArchive(options.source)
  if (archive.rollouts.length === 0)
    throw new UsageError(
      `${describeSource(options.source)}: the archive holds no scored rollouts${rangeNote(options.source)}`,
    )
  const responses = mergeResponses(archive.rollouts)
  const byPrompt = groupBy(responses, (response) => response.judged.prompt)
  const selected = [...byPrompt.values()].filter((group) => group.length >= 2).flat()
  const judged = await judgeAll(archive, selected, options)

  const pairing = pairResponses(judged.responses, {
    z: options.z,
    minMargin: options.minMargin,
    pairsPerPrompt: options.pairsPerPrompt,
  })
  const pairedPrompts = new Set(pairing.pairs.map((pair) => pair.prompt))
  const heldOut = heldOutPrompts(
    judged.responses.filter((response) => response.samples.length > 0).map((response) => response.prompt),
    options.heldOut,
    options.seed,
  )
  const split = <T extends { prompt: string }>(rows: readonly T[]) => ({
    train: rows.filter((row) => !heldOut.has(row.prompt)),
    held_out: rows.filter((row) => heldOut.has(row.prompt)),
  })
  const pairs = split(pairing.pairs)
  const points = split(judged.responses.filter((response) => response.samples.length > 0))

  const outputs = await writeOutputs(options.out, options.formats, (format, part) => {
    if (format === 'pointwise') return points[part].map(pointwiseRow)
    const row = format === 'trl' ? trlRow : openRlhfRow
    return pairs[part].map((pair) => row(pair, options.conversational))
  })
  const summary: DistillSummary = {
    kind: 'distill_summary',
    run_id: archive.run?.run_id ?? archive.rollouts[0]!.run_id,
    source: describeSource(options.source),
    settings: {
      repeats: options.repeats,
      judges: judged.judgeIds,
      z: options.z,
      min_margin: options.minMargin,
      pairs_per_prompt: options.pairsPerPrompt,
      held_out: options.heldOut,
      seed: options.seed,
      conversational: options.conversational,
    },
    bound: NOISE_BOUND,
    rollouts: {
      archived: archive.rollouts.length,
      distinct: responses.length,
      merged_duplicates: archive.rollouts.length - responses.length,
    },
    prompts: {
      seen: byPrompt.size,
      single_response: [...byPrompt.values()].filter((group) => group.length < 2).length,
      judged: new Set(selected.map((response) => response.judged.prompt)).size,
      paired: pairedPrompts.size,
      train: [...pairedPrompts].filter((prompt) => !heldOut.has(prompt)).length,
      held_out: [...pairedPrompts].filter((prompt) => heldOut.has(prompt)).length,
    },
    judgements: judged.counts,
    pairs: {
      candidates: pairing.candidates,
      kept: pairing.pairs.length,
      train: pairs.train.length,
      held_out: pairs.held_out.length,
      dropped: pairing.dropped,
    },
    agreement: repeatAgreement(judged.responses, pairing.pairs),
    outputs,
  }
  await writeFile(join(options.out, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`)
  return summary
}

/** Writes `<format>.<split>.jsonl` into `out` for every format and both splits; returns what it wrote. */
async function writeOutputs(
  out: string,
  formats: DistillOptions['formats'],
  rowsOf: (format: DistillOptions['formats'][number], part: 'train' | 'held_out') => unknown[],
): Promise<DistillSummary['outputs']> {
  await mkdir(out, { recursive: true })
  const outputs: DistillSummary['outputs'] = []
  for (const format of formats) {
    for (const part of ['train', 'held_out'] as const) {
      const rows = rowsOf(format, part)
      const file = resolve(join(out, `${format}.${part}.jsonl`))
      await writeFile(file, rows.map((row) => `${JSON.stringify(row)}\n`).join(''))
      outputs.push({ format, split: part, file, rows: rows.length })
    }
  }
  return outputs
}

/** A distinct (prompt, response) with the archived rollout that stands for it. */
interface MergedResponse {
  judged: JudgedResponse
  rollout: ArchivedRollout
}

/** Identical responses to one prompt are one response (the first archived rollout stands for them). */
function mergeResponses(rollouts: readonly ArchivedRollout[]): MergedResponse[] {
  const merged = new Map<string, MergedResponse>()
  for (const rollout of rollouts) {
    const turns = rollout.messages ? canonicalJson(rollout.messages) : ''
    const key = `${rollout.input}\u0000${rollout.output}\u0000${turns}`
    const known = merged.get(key)
    if (known) known.judged.rollout_ids.push(rollout.rollout_id)
    else
      merged.set(key, {
        rollout,
        judged: {
          prompt: rollout.input,
          response: rollout.output,
          ...(rollout.messages ? { messages: splitTrajectory(rollout.messages) } : {}),
          rollout_ids: [rollout.rollout_id],
          samples: [],
          online_score: rollout.score,
        },
      })
  }
  return [...merged.values()]
}

/** A trajectory's task turns and the turns after them. */
function splitTrajectory(messages: Trajectory): { task: Trajectory; completion: Trajectory } {
  const at = taskLength(messages)
  return { task: messages.slice(0, at), completion: messages.slice(at) }
}

/** Every judge judges every selected response `repeats` times (seeds seed … seed + repeats − 1). */
async function judgeAll(archive: ArchiveContents, selected: readonly MergedResponse[], options: DistillOptions) {
  const counts: DistillSummary['judgements'] = {
    requested: 0,
    succeeded: 0,
    failed: 0,
    llm_calls: 0,
    cache_hits: 0,
    failures: [],
  }
  if (options.repeats === 0) {
    return {
      responses: selected.map(({ judged }) => ({ ...judged, samples: [judged.online_score] })),
      judgeIds: ['online'],
      counts,
    }
  }
  const run = rejudgeableRun(archive, selected, options)
  const judges: Judge[] = []
  try {
    for (const spec of options.judges) judges.push(await openJudge(spec, options.cacheDir, options.sampling))
    const limit = pLimit(options.concurrency)
    const total = selected.length * judges.length * options.repeats
    const progress = options.showProgress ? startProgress({ label: 'judging', total }) : undefined
    let done = 0
    const samples = await Promise.all(
      selected.map(({ rollout }) =>
        Promise.all(
          judges.flatMap((judge) =>
            Array.from({ length: options.repeats }, (_, repeat) =>
              limit(async () => {
                counts.requested++
                try {
                  const score = await judgeOnce(
                    judge,
                    run,
                    archive.rubrics.get(rubricKey(rollout.instance_id, rollout.rubric_version))!,
                    rollout,
                    options.seed + repeat,
                  )
                  counts.succeeded++
                  return score
                } catch (error) {
                  counts.failed++
                  if (counts.failures.length < 20)
                    counts.failures.push(
                      `${rollout.rollout_id} (${judge.id}, repeat ${repeat}): ${(error as Error).message}`,
                    )
                  return undefined
                } finally {
                  progress?.update(++done, counts.failed > 0 ? `${counts.failed} failed` : '')
                }
              }),
            ),
          ),
        ),
      ),
    )
    progress?.stop()
    for (const judge of judges) {
      const stats = judge.model.stats()
      counts.llm_calls += stats.misses
      counts.cache_hits += stats.hits + stats.joins
    }
    return {
      responses: selected.map(({ judged }, index) => ({
        ...judged,
        samples: samples[index]!.filter((score): score is number => score !== undefined),
      })),
      judgeIds: judges.map((judge) => judge.id),
      counts,
    }
  } finally {
    await Promise.all(judges.map((judge) => judge.close()))
  }
}

/** The archive's run line, refused when missing or when a selected rollout's rubric is not archived. */
function rejudgeableRun(archive: ArchiveContents, selected: readonly MergedResponse[], options: DistillOptions) {
  const run = archive.run
  if (!run)
    throw new UsageError(
      `${describeSource(options.source)}: no "run" line says how the run judges (grade_max, locale, prompts); ` +
        `re-judging needs it (or use --repeats 0)`,
    )
  for (const { rollout } of selected) {
    if (!archive.rubrics.has(rubricKey(rollout.instance_id, rollout.rubric_version))) {
      throw new UsageError(
        `${describeSource(options.source)}: rollout "${rollout.rollout_id}" was scored on rubric version ` +
          `${rollout.rubric_version} of instance "${rollout.instance_id}", but the archive has no rubrics line for it`,
      )
    }
  }
  return run
}

/**
 * One judgement: the scorer's own request (with this repeat's seed), parsed by its own parser, retried on a bad reply.
 */
async function judgeOnce(
  judge: Judge,
  run: NonNullable<ArchiveContents['run']>,
  rubrics: NonNullable<ReturnType<ArchiveContents['rubrics']['get']>>,
  rollout: ArchivedRollout,
  seed: number,
): Promise<number> {
  const request = {
    ...(await buildScorerRequest({
      rubrics,
      gradeMax: run.grade_max,
      locale: run.locale,
      prompts: run.prompts,
      metadata: rollout.metadata,
      rollout: {
        id: rollout.rollout_id,
        input: rollout.input,
        output: rollout.output,
        supplemental_context: rollout.reference,
        ...(rollout.messages ? { messages: rollout.messages } : {}),
      },
    })),
    seed,
  }
  const criteria = await withRetry(
    () => judge.model.completeParsed(request, (reply) => parseScorerReply(reply.text, rubrics, run.grade_max)),
    { maxAttempts: 3 },
  )
  return rewardFromGrades(criteria, run.grade_max)
}

function describeSource(source: ArchiveSource): string {
  return source.kind === 'file' ? source.path : `${source.url.replace(/\/+$/, '')}/runs/${source.runId}/archive`
}

function rangeNote(source: ArchiveSource): string {
  if (source.kind === 'file' || (source.fromStep === undefined && source.toStep === undefined))
    return ' (steps are archived once they close and their rubric update commits)'
  return ` in steps ${source.fromStep ?? 0}..${source.toStep ?? 'last'}`
}
