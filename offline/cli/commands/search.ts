/**
 * `reward-harness search`: search a rubric per prompt of a preference dataset (autosr's evolutionary search, with
 * its redundancy fixed), with a reply cache, checkpoints and `--resume`, run records and a replay script.
 * The work is in offline/search (loaded only when the command runs); the config knobs' flags, read off a zod schema,
 * load only when a command line names `search` (the root `--help` lists the commands without them).
 */
import type { Command } from 'commander'
import { addSearchFlags } from '../../search/flags.ts'
import { type CliContext, CliExit } from '../program.ts'

/** Exit code of a run interrupted by Ctrl-C / SIGTERM (the last checkpoint is kept). */
export const EXIT_INTERRUPTED = 130

const HELP_AFTER = `
Outputs (next to --output):
  <output>.json                         best_rubrics[] (rubric, score, best_candidate_id, candidate_scores),
                                        best_objective_scores, search_diagnostics, run_manifest, usage
  run_records/<stem>_<run_id>.manifest.json   dataset sha256, config + hash, backend and models per role,
                                        endpoints (no keys), seed, git commit, node version, argv
  run_records/<stem>_<run_id>.replay.sh       bash script that runs the same search again from any directory
                                        (extra arguments are appended: --output /tmp/x/best.json replays elsewhere)
  cache/<model>/llm-cache.sqlite        every LLM answer by content: a question asked again costs no call,
                                        in this run, a resumed run or a rerun (--cache-dir, --no-cache)
  checkpoints/<session>/state-NNNN.json written atomically at every generation (global_batch) or prompt
                                        boundary; --resume <session|file> continues from the latest

Backends:
  mock     deterministic heuristics answering the same prompts through the same parsers (no network)
  openai   OpenAI-compatible servers: --endpoint URL[,max_concurrency=N,model=M,api_key_env=VAR] (repeatable),
           --endpoints-file, or --base-url with --api-key-env; per-endpoint caps are never exceeded,
           429/5xx/timeouts are retried (--max-attempts), and usage is accounted per role and endpoint
  auto     openai when an endpoint is given, else mock
  Roles with different models (--model-<role>) get one pool per model: an endpoint that pins its own model
  serves only those roles; an endpoint without one is shared, its max_concurrency split between the pools.
  The judge is an LLM only when the dataset lacks complete rank/quality labels; otherwise the labels are the
  ground truth and no judge calls are made.

--json (global): a machine-readable summary on stdout (status, output, run records, checkpoints, best
rubrics, usage); without it a progress bar is drawn on stderr when stderr is a terminal.

Exit codes: 0 done; 1 failure (the last checkpoint is kept); 2 bad input (flag, config, dataset, resume
mismatch); 130 interrupted by Ctrl-C or SIGTERM (resume with the printed command).

Examples:
  reward-harness search --dataset examples/demo.json --backend mock --output out/best.json
  reward-harness search --dataset examples/demo.json --output out/best.json --generations 4 --seed 11 --json
  reward-harness search --dataset data.jsonl --output runs/a/best.json \\
      --endpoint http://gpu-1:8000/v1,max_concurrency=16 --endpoint http://gpu-2:8000/v1,max_concurrency=16 \\
      --model Qwen/Qwen3-8B --model-proposer Qwen/Qwen3-32B
  reward-harness search --dataset data.json --output runs/b/best.json --base-url https://api.openai.com/v1 \\
      --api-key-env OPENAI_API_KEY --model gpt-4o-mini --locale zh --extraction tag --extraction-tag question
  reward-harness search --dataset examples/demo.json --output out/best.json --resume 20260222_120000_123456`

/**
 * Adds `search` to the program.
 * @example register(program, cli) // then: reward-harness search --dataset examples/demo.json --output out/best.json
 */
export async function register(program: Command, cli: CliContext): Promise<void> {
  const command = program
    .command('search')
    .description(
      'search a rubric per prompt of a preference dataset (evolutionary or iterative), with cache, checkpoints and ' +
        'run records',
    )
  addSearchFlags(command)
    .addHelpText('after', HELP_AFTER)
    .action(async (_options: unknown, self: Command) => {
      const { readSearchOptions } = await import('../../search/options.ts')
      const { runSearchCommand } = await import('../../search/run.ts')
      const { formatSummary } = await import('../../search/summary.ts')
      const json = cli.json(self)
      const options = await readSearchOptions(self.opts(), process.cwd())
      const summary = await runSearchCommand(options, {
        argv: (self.parent as unknown as { rawArgs?: string[] } | null)?.rawArgs ?? process.argv.slice(2),
        cwd: process.cwd(),
        stderr: cli.io.err,
        progress: !json && process.stderr.isTTY === true,
        handleSignals: true,
        env: process.env,
      })
      if (summary.status === 'interrupted') {
        if (json) cli.io.out(`${JSON.stringify(summary, null, 2)}\n`)
        else cli.io.err(`${formatSummary(summary)}\n`)
        // Calls the backend could not cancel must not keep an interrupted process alive.
        if (summary.interrupted_by !== 'abort-after-calls')
          setTimeout(() => process.exit(EXIT_INTERRUPTED), 2_000).unref()
        throw new CliExit(EXIT_INTERRUPTED)
      }
      cli.print(self, summary, () => formatSummary(summary))
    })
  if (!cli.listing) {
    const { addConfigKnobs } = await import('../../search/options.ts')
    addConfigKnobs(command)
  }
}
