/**
 * `reward-harness evolve`: evolve a judge library (skills + tools) on a pairwise preference dataset, keeping a
 * change only when validation accuracy holds. The work is in offline/evolve (loaded only when the command runs).
 */
import { type Command, Option } from 'commander'
import type { CliContext } from '../program.ts'

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value]

const HELP_AFTER = `
Outputs (under --out):
  evolution-log.jsonl        one line per iteration: change, train/val accuracy, kept|rolled_back|rejected|skipped,
                             failures, order disagreements, tool-prompt check, calls and tokens per role
  checkpoints/iter-<n>/      the library after iteration n (registry.json + skills/ + tools/)
  checkpoints/best/          the best validated library
  results/iter-<n>.*.jsonl   every judged item: prediction, label, chain with tool observations
  cache/llm-cache.sqlite     every usable model reply by content (--cache-dir, --no-cache)
Running the same command again resumes after the last logged iteration.

Example:
  reward-harness evolve --dataset offline/evolve/fixtures/pairs-demo.json --out runs/lib --iterations 3 --backend \
mock`

/**
 * Adds `evolve` to the program.
 * @example register(program, cli) // then: reward-harness evolve --dataset d.json --out runs/a --iterations 3
 */
export function register(program: Command, cli: CliContext): void {
  program
    .command('evolve')
    .description('evolve a judge library of skills and tools on pairwise preference data, gated by validation accuracy')
    .requiredOption('--dataset <file>', 'preference dataset (prompts with 2 ranked candidates)')
    .requiredOption('--out <dir>', 'run directory (log, checkpoints, results)')
    .option('--iterations <n>', 'evolution iterations after the baseline', '3')
    .addOption(new Option('--backend <name>', 'mock, openai or auto').default('mock'))
    .addOption(
      new Option('--endpoint <url[,key=value…]>', 'an OpenAI-compatible server (repeatable)').argParser(collect),
    )
    .option('--model <name>', 'model name for the endpoints')
    .option('--seed <n>', 'split seed', '42')
    .option('--val-fraction <f>', 'share of items held out for validation', '0.34')
    .option('--explore-margin <m>', 'keep a change when val accuracy ≥ best − margin', '0.075')
    .option('--prune-every <k>', 'leave-one-out pruning every k iterations (0 = never)', '0')
    .option('--library <dir>', 'library to start from (default: empty)')
    .option('--locale <locale>', 'prompt language: en or zh', 'en')
    .option('--concurrency <n>', 'judgments in flight', '4')
    .option('--max-tokens <n>', 'completion token limit of every model call', '2048')
    .option('--timeout-ms <ms>', 'time limit of one HTTP attempt (3 attempts a call)', '120000')
    .addOption(
      new Option('--orders <orders>', 'both: judge A/B and B/A, a verdict only when they agree; one: A/B only')
        .choices(['both', 'one'])
        .default('both'),
    )
    .option(
      '--tool-check <n>',
      'train items a new or changed tool prompt must answer in JSON (≥80%) before validation; 0 = off',
      '4',
    )
    .option('--cache-dir <dir>', 'reply cache: a question asked again costs no call (default <out>/cache)')
    .option('--no-cache', 'no reply cache')
    .addHelpText('after', HELP_AFTER)
    .action(async (_options: unknown, self: Command) => {
      const { runEvolveCommand } = await import('../../evolve/cli.ts')
      const summary = await runEvolveCommand(self.opts(), (line) => cli.io.err(`${line}\n`), !cli.json(self))
      const { judging, usage } = summary
      const calls = (['router', 'sub_agent', 'tool', 'chain_analyzer', 'evolver'] as const)
        .map((role) => `${role} ${usage[role].calls}`)
        .join(', ')
      cli.print(
        self,
        summary,
        () =>
          `best iteration ${summary.best_iteration} (val ${summary.best_val_accuracy.toFixed(3)}): ` +
          `${summary.best_dir}\nlog: ${summary.log}\n` +
          `judged ${judging.judged} items (${summary.orders === 'both' ? 'both orders' : 'one order'}): ` +
          `${judging.consistent} verdicts, ${judging.inconsistent} inconsistent, ${judging.failures} failures\n` +
          `model calls: ${calls}; tokens ${usage.total.prompt_tokens} prompt + ${usage.total.completion_tokens} ` +
          `completion`,
      )
    })
}
