/**
 * `reward-harness bench`: accuracy of a scorer on a preference dataset (pairwise in both orders, swap-consistent,
 * K-way, tail; Wilson 95% intervals; per-group table; failures apart). The work is in offline/bench (loaded only when
 * the command runs) and src/bench (the metrics).
 */
import type { Command } from 'commander'
import type { StructuredOutput } from '../../../src/schemas/structured-output.ts'
import { structuredOutputOption } from '../llm-options.ts'
import { CliExit, type CliContext } from '../program.ts'
import { UsageError } from '../../../src/usage-error/index.ts'

/** Exit code of a bench in which no candidate could be scored. */
export const EXIT_NOTHING_SCORED = 3

const HELP_AFTER = `
Scorers (one scalar per prompt and candidate; candidates are shown without labels, under opaque ids):
  mock               the mock verifier on the search initializer's heuristic rubric for each prompt
  rubric:<file>      a search output (best_rubrics) or a preset rubric file; per-prompt rubric, else "__default__"
  artifact:<file>    an RM artifact (reward-harness export): its rubric for the prompt, else its "__default__"
  url:<base>#<target>  the edge's POST <base>/rm/<target>/batch_score (chunks of ≤ 100 items; token: --token or \
RM_TOKEN);
                     url:<base> without #target posts to <base>/batch_score. A library target (its /healthz says
                     artifact_kind "library") gets each pair once, one candidate as the other's reference, with images
  library:<dir>      a judge library (reward-harness evolve: <out>/checkpoints/best): every pair judged in both orders
                     with the dataset's images; a candidate's score is its win rate over the judged orders

Metrics:
  pairwise A/B, B/A  2-candidate items, judged in both presentation orders (for a scalar scorer the order matters only
                     through ties and failures); swap-consistent = correct in both orders (a tie never is)
  K-way              items with > 2 candidates: the top-labelled candidate must score strictly highest
  tail               ranked items with > 2 candidates: the pairs among the top 25% (at least 2) by label
  ties               equal scores: half correct (--ties half, default) or wrong (--ties wrong); always counted
  failures           a scorer error on a candidate: the comparison is excluded from n and reported, never a tie
  intervals          Wilson 95%; --bootstrap N adds a seeded percentile bootstrap over items

Exit codes: 0 done (failures of some candidates are reported, not fatal); 1 failure; 2 bad input (dataset, scorer,
flags); 3 no candidate could be scored (the report is still printed; stderr says why in one line).

Examples:
  reward-harness bench --dataset tests/offline/fixtures/datasets/llmbar-small.json --scorer mock
  reward-harness bench --dataset examples/demo.json --scorer artifact:out/rm.json --json --out out/bench.json
  reward-harness bench --dataset pairs.jsonl --scorer url:http://127.0.0.1:8787#prod --concurrency 4`

interface BenchFlags {
  dataset: string
  scorer: string
  out?: string
  concurrency: string
  seed: string
  ties: string
  bootstrap: string
  group?: string
  token?: string
  requestTimeout: string
  llmBaseUrl?: string
  llmModel?: string
  llmApiKey?: string
  llmStructuredOutput: string
  judging?: string
}

const LLM_URL_HELP =
  'grade mock/rubric/artifact with an OpenAI-compatible model at this base URL (with --llm-model) instead of the ' +
  'mock model'
const JUDGING_HELP =
  'rubric/artifact: one call grades every criterion (default; an artifact: as its runtime says), or one Yes/No call ' +
  'per criterion scored by its probability of Yes (the server must send top_logprobs; docs/configuration.md, judging)'

/** `--judging`'s value, or a usage error. */
function judgingFlag(value: string): 'grades' | 'verdicts' {
  if (value === 'grades' || value === 'verdicts') return value
  throw new UsageError(`--judging: expected grades or verdicts, got "${value}"`)
}

/**
 * Adds `bench` to the program.
 * @example register(program, cli) // then: reward-harness bench --dataset examples/demo.json --scorer mock
 */
export function register(program: Command, cli: CliContext): void {
  program
    .command('bench')
    .description(
      'measure a scorer on a preference dataset: pairwise (both orders), swap-consistent, K-way and tail accuracy ' +
        'with 95% intervals',
    )
    .requiredOption('--dataset <file>', 'the dataset (autosr, LLMBar, JudgeBench or chosen/rejected; JSON or JSONL)')
    .requiredOption(
      '--scorer <spec>',
      'mock | rubric:<file> | artifact:<file> | url:<base>#<target> | library:<dir> (see below)',
    )
    .option('--out <file.json>', 'also write the JSON report to this file')
    .option('--concurrency <n>', 'scorer calls in flight at once', '4')
    .option('--seed <n>', 'seed of the verifier, the opaque candidate ids and the bootstrap', '0')
    .option('--ties <half|wrong>', 'how a tie counts', 'half')
    .option('--bootstrap <n>', 'bootstrap resamples for percentile intervals (0 = none)', '0')
    .option('--group <name>', 'group of prompts that have none', 'all')
    .option('--token <token>', 'bearer token for url: (default: env RM_TOKEN)')
    .option(
      '--request-timeout <s>',
      'url: seconds to wait for each batch_score answer before its items count as failures',
      '300',
    )
    .option('--llm-base-url <url>', LLM_URL_HELP)
    .option('--llm-model <name>', 'the model for --llm-base-url')
    .option('--llm-api-key <key>', 'API key for --llm-base-url (default: env OPENAI_API_KEY, else "none")')
    .addOption(structuredOutputOption('json_object'))
    .option('--judging <grades|verdicts>', JUDGING_HELP)
    .addHelpText('after', HELP_AFTER)
    .action(async (options: BenchFlags, command: Command) => {
      const concurrency = integer(options.concurrency, '--concurrency', 1)
      const seed = integer(options.seed, '--seed', 0)
      const bootstrap = integer(options.bootstrap, '--bootstrap', 0)
      const requestTimeoutS = Number(options.requestTimeout)
      if (!(requestTimeoutS > 0 && requestTimeoutS <= 86_400))
        throw new UsageError(`--request-timeout: expected seconds in (0, 86400], got "${options.requestTimeout}"`)
      if (options.ties !== 'half' && options.ties !== 'wrong')
        throw new UsageError(`--ties: expected half or wrong, got "${options.ties}"`)
      if (Boolean(options.llmBaseUrl) !== Boolean(options.llmModel))
        throw new UsageError('--llm-base-url and --llm-model go together')
      const model =
        options.llmBaseUrl && options.llmModel
          ? await openAiModel(
              options.llmBaseUrl,
              options.llmModel,
              options.llmApiKey ?? process.env.OPENAI_API_KEY ?? 'none',
              options.llmStructuredOutput as StructuredOutput,
            )
          : undefined
      const { runBench, formatReport, writeReport } = await import('../../bench/run.ts')
      const report = await runBench({
        dataset: options.dataset,
        scorer: options.scorer,
        concurrency,
        seed,
        bootstrap,
        ties: options.ties,
        ...(options.group ? { group: options.group } : {}),
        ...(options.token ? { token: options.token } : {}),
        requestTimeoutMs: Math.ceil(requestTimeoutS * 1_000),
        ...(options.judging === undefined ? {} : { judging: judgingFlag(options.judging) }),
        showProgress: !cli.json(command),
        ...(model ? { model } : {}),
      })
      const written = options.out ? await writeReport(report, options.out) : undefined
      cli.print(command, report, () => formatReport(report) + (written ? `\nwrote ${written}` : ''))
      // A gate must not pass on a bench that measured nothing (an edge without an artifact, an unreachable judge).
      if (report.dataset.candidates > 0 && report.failures.count === report.dataset.candidates) {
        throw new CliExit(
          EXIT_NOTHING_SCORED,
          `bench: none of the ${report.dataset.candidates} candidates could be scored; the first failure: ` +
            `${report.failures.examples[0]?.error ?? 'unknown'}`,
        )
      }
    })
}

/** The model of `--llm-base-url`: each call asks for the room its reply needs (a verdict is a few tokens). */
async function openAiModel(baseURL: string, model: string, apiKey: string, structuredOutput: StructuredOutput) {
  const { OpenAIChatModel } = await import('../../../src/llm/openai.ts')
  return new OpenAIChatModel({ baseURL, apiKey, model, temperature: 0, timeoutMs: 300_000, structuredOutput })
}

function integer(value: string, flag: string, min: number): number {
  const number = Number(value)
  if (!Number.isInteger(number) || number < min)
    throw new UsageError(`${flag}: expected an integer ≥ ${min}, got "${value}"`)
  return number
}
