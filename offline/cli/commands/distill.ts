/**
 * `reward-harness distill`: a run's archived scored rollouts (from the edge or a file) → re-judged k times → pairs
 * that clear the judge's noise → TRL, OpenRLHF and pointwise training data for a classifier reward model, split into
 * train and held-out by prompt. The work is in offline/distill and src/distill, loaded only when the command runs.
 */
import { Option, type Command } from 'commander'
import type { DistillFormat } from '../../../src/distill/index.ts'
import { DISTILL_FORMATS } from '../../../src/schemas/distill-formats.ts'
import { finiteNumber, integer } from '../../search/flags.ts'
import type { CliContext } from '../program.ts'
import type { JudgeSpec } from '../../distill/judges.ts'
import { UsageError } from '../../../src/usage-error/index.ts'
import { adminTokenFor, refuseInsecureTransport } from '../../edge/index.ts'

const HELP_AFTER = `
Input (one of):
  --archive <file.ndjson>        a local archive: the lines GET /runs/<id>/archive answers (a "run" line, "rubrics"
                                 lines, one line per scored rollout)
  --url <edge> --run-id <id>     fetch the run's archive from the edge (the run needs "archive": true); the token is
                                 --token, else REWARD_HARNESS_TOKEN (the run's), else REWARD_HARNESS_ADMIN_TOKEN,
                                 else (a server on this machine) ADMIN_TOKEN from .dev.vars

Denoising: each rollout of a prompt with at least two distinct responses (identical responses merge) is judged
--repeats times by every --judge (repeat r samples with seed --seed + r), with the run's own rubric version, scale,
locale and prompt templates, through the reply cache (--cache-dir): a second identical run makes no LLM call.
--repeats 0 uses the online score alone. Per prompt, responses are ranked by mean; the candidates are best vs worst,
then adjacent pairs closest first; a pair is kept when
  mean_c − mean_r ≥ --min-margin  and  mean_c − mean_r > z·√(var_c/n_c + var_r/n_r)   (sample variances)
up to --pairs-per-prompt. Prompts are split into train and held out (--held-out share) by a seeded hash.

Outputs in --out: <format>.train.jsonl and <format>.held_out.jsonl per --format, and summary.json
  trl         {prompt, chosen, rejected}: TRL RewardTrainer, explicit prompt (--conversational: message lists)
  openrlhf    {prompt, chosen, rejected, margin}: OpenRLHF train_rm --prompt_key prompt --chosen_key chosen
              --rejected_key rejected (--conversational: with --apply_chat_template)
  pointwise   {prompt, response, score, spread, n}: mean judgement, its standard deviation, judgements
Render the summary with: reward-harness report <out>/summary.json --out <file.html>

Exit codes: 0 done; 2 bad input (a flag, an archive line that is not JSON or misses a field, a run without an
archive, an empty archive); 1 a failure (the edge or the judge unreachable).

Examples:
  reward-harness distill --archive runs/grpo-1.ndjson --repeats 3 --out out/distill
  reward-harness distill --url http://127.0.0.1:8787 --run-id grpo-1 --repeats 5 --out out/rm-data --json
  reward-harness distill --archive a.ndjson --repeats 2 --judge http://gpu-1:8000/v1,model=Qwen/Qwen3-8B \\
      --judge http://gpu-2:8000/v1,model=meta-llama/Llama-3.1-8B-Instruct --format trl --conversational --out out/d`

interface DistillFlags {
  archive?: string
  url?: string
  runId?: string
  token?: string
  fromStep?: number
  toStep?: number
  out: string
  format?: string[]
  conversational?: boolean
  repeats: number
  judge?: string[]
  mockNoise: number
  temperature: number
  maxTokens: number
  timeout: number
  z: number
  minMargin: number
  pairsPerPrompt: number
  heldOut: number
  seed: number
  concurrency: number
  cacheDir: string
}

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value]

/**
 * Adds `distill` to the program.
 * @example register(program, cli) // then: reward-harness distill --archive a.ndjson --repeats 3 --out out/d
 */
export function register(program: Command, cli: CliContext): void {
  const command = program
    .command('distill')
    .description(
      "turn a run's judged rollouts into classifier-RM training data (TRL, OpenRLHF, pointwise), " +
        'denoised by repeated judging',
    )
    .option('--archive <file>', 'a local archive (NDJSON)')
    .option('--url <edge>', 'fetch the archive from this edge')
    .option('--run-id <id>', 'the run whose archive --url fetches')
    .option('--token <token>', 'bearer token for --url (default: REWARD_HARNESS_TOKEN, else the admin token)')
    .addOption(new Option('--from-step <n>', 'first step to read (--url)').argParser(integer(0)))
    .addOption(new Option('--to-step <n>', 'last step to read (--url)').argParser(integer(0)))
    .requiredOption('--out <dir>', 'where the data files and summary.json go')
    .option('--format <name>', `${DISTILL_FORMATS.join(' | ')} (repeatable; default all)`, collect)
    .option('--conversational', 'trl and openrlhf rows as role/content message lists')
  addJudgingOptions(command)
    .addHelpText('after', HELP_AFTER)
    .action(async (flags: DistillFlags, command: Command) => {
      const { formatDistillSummary, parseJudgeSpec, runDistill } = await import('../../distill/index.ts')
      const summary = await runDistill({ ...distillOptions(flags, parseJudgeSpec), showProgress: !cli.json(command) })
      cli.print(command, summary, () => formatDistillSummary(summary))
    })
}

/** The options of judging, denoising and splitting. */
function addJudgingOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--repeats <k>', 'judgements per judge and rollout (0: the online score alone)')
        .argParser(integer(0))
        .default(3),
    )
    .option(
      '--judge <spec>',
      'mock, or an OpenAI-compatible URL[,model=M,api_key_env=VAR,max_concurrency=N] (repeatable; default mock)',
      collect,
    )
    .addOption(
      new Option('--mock-noise <p>', "the mock judge's share of grades moved one point per repeat")
        .argParser(finiteNumber)
        .default(0.2),
    )
    .addOption(
      new Option('--temperature <t>', 'sampling temperature of endpoint judges (repeats need > 0 to differ)')
        .argParser(finiteNumber)
        .default(0.7),
    )
    .addOption(
      new Option('--max-tokens <n>', 'reply token limit of endpoint judges').argParser(integer(1)).default(1024),
    )
    .addOption(new Option('--timeout <s>', 'seconds per judge call attempt').argParser(integer(1)).default(120))
    .addOption(new Option('--z <z>', 'z of the noise bound').argParser(finiteNumber).default(1.96))
    .addOption(
      new Option('--min-margin <m>', 'smallest gap of means kept (scores are in [0, 1])')
        .argParser(finiteNumber)
        .default(0.05),
    )
    .addOption(new Option('--pairs-per-prompt <n>', 'most pairs kept per prompt').argParser(integer(1)).default(4))
    .addOption(new Option('--held-out <share>', 'share of prompts held out').argParser(finiteNumber).default(0.1))
    .addOption(new Option('--seed <n>', 'seed of the repeats and of the split').argParser(integer(0)).default(0))
    .addOption(new Option('--concurrency <n>', 'judge calls in flight').argParser(integer(1)).default(8))
    .option('--cache-dir <dir>', 'the reply cache (one subdirectory per judge model)', '.reward-harness/cache')
}

/** What `runDistill` is asked to do, from the checked flags. */
function distillOptions(flags: DistillFlags, parseJudgeSpec: (spec: string) => JudgeSpec) {
  return {
    source: sourceOf(flags),
    out: flags.out,
    formats: formatsOf(flags.format),
    conversational: flags.conversational === true,
    repeats: flags.repeats,
    judges: (flags.judge ?? ['mock']).map(parseJudgeSpec),
    sampling: {
      mockNoise: share(flags.mockNoise, '--mock-noise'),
      temperature: flags.temperature,
      maxTokens: flags.maxTokens,
      timeoutMs: flags.timeout * 1_000,
      maxAttempts: 4,
    },
    z: positive(flags.z, '--z'),
    minMargin: share(flags.minMargin, '--min-margin'),
    pairsPerPrompt: flags.pairsPerPrompt,
    heldOut: share(flags.heldOut, '--held-out'),
    seed: flags.seed,
    concurrency: flags.concurrency,
    cacheDir: flags.cacheDir,
  }
}

function sourceOf(flags: DistillFlags) {
  if (flags.archive && flags.url) throw new UsageError('give --archive or --url, not both')
  if (flags.archive) {
    if (flags.runId || flags.fromStep !== undefined || flags.toStep !== undefined)
      throw new UsageError('--run-id, --from-step and --to-step go with --url')
    return { kind: 'file' as const, path: flags.archive }
  }
  if (!flags.url) throw new UsageError('give the archive: --archive <file> or --url <edge> --run-id <id>')
  if (!/^https?:\/\//.test(flags.url)) throw new UsageError(`--url: expected an http(s) URL, got "${flags.url}"`)
  if (!flags.runId) throw new UsageError('--url needs --run-id <id>')
  const token = flags.token ?? process.env.REWARD_HARNESS_TOKEN ?? adminTokenFor(flags.url, process.env)
  if (!token)
    throw new UsageError(
      "--url needs a token: --token, REWARD_HARNESS_TOKEN (the run's) or REWARD_HARNESS_ADMIN_TOKEN " +
        '(.dev.vars is read for a server on this machine only)',
    )
  refuseInsecureTransport(flags.url, process.env, 'a token')
  if (flags.fromStep !== undefined && flags.toStep !== undefined && flags.toStep < flags.fromStep)
    throw new UsageError(`--to-step ${flags.toStep} is before --from-step ${flags.fromStep}`)
  return {
    kind: 'edge' as const,
    url: flags.url,
    runId: flags.runId,
    token,
    ...(flags.fromStep === undefined ? {} : { fromStep: flags.fromStep }),
    ...(flags.toStep === undefined ? {} : { toStep: flags.toStep }),
  }
}

function formatsOf(values: string[] | undefined): DistillFormat[] {
  if (!values) return [...DISTILL_FORMATS]
  for (const value of values) {
    if (!(DISTILL_FORMATS as readonly string[]).includes(value))
      throw new UsageError(`--format: "${value}" is not one of ${DISTILL_FORMATS.join(', ')}`)
  }
  return [...new Set(values)] as DistillFormat[]
}

function share(value: number, flag: string): number {
  if (value < 0 || value > 1) throw new UsageError(`${flag}: expected a number in [0, 1], got ${value}`)
  return value
}

function positive(value: number, flag: string): number {
  if (!(value > 0)) throw new UsageError(`${flag}: expected a number above 0, got ${value}`)
  return value
}
