/**
 * `reward-harness datasets validate|convert`: check a preference dataset (autosr, LLMBar, JudgeBench
 * or chosen/rejected; JSON or JSONL) and convert it to the autosr JSON shape.
 */
import { extname } from 'node:path'
import { type Command, Option } from 'commander'
import type { DatasetFormat, DatasetSummary } from '../../../src/datasets/index.ts'
import type { LoadedDataset } from '../../datasets/load.ts'
import type { CliContext } from '../program.ts'
import { UsageError } from '../../../src/usage-error/index.ts'

interface InputOptions {
  format?: DatasetFormat
  group?: string
}

const SHAPE_NAMES = {
  autosr: 'autosr prompts',
  llmbar: 'LLMBar pairs',
  judgebench: 'JudgeBench pairs',
  chosen_rejected: 'chosen/rejected pairs',
} as const

/**
 * Adds `datasets` and its subcommands to the program.
 * @example register(program, cli) // then: reward-harness datasets validate examples/demo.json
 */
export function register(program: Command, cli: CliContext): void {
  const datasets = program
    .command('datasets')
    .description('check and convert preference datasets (autosr, LLMBar, JudgeBench, chosen/rejected; JSON or JSONL)')
    .addHelpText(
      'after',
      `
Shapes (detected from the content):
  autosr      {"prompts": [{prompt_id, prompt, candidates: [{candidate_id, text, source?, metadata: {rank? | \
quality?}}]}]}
  LLMBar      [{input, output_1, output_2, label: 1 | 2}]
  JudgeBench  {pair_id?, source?, question, response_A, response_B, label: "A>B" | "B>A"} per line, or an array
  pairs       {id?, prompt, chosen, rejected} per line, or an array
Labels: rank 1 is the best candidate of its prompt (2 the next best, and so on); a higher quality is better.
Pairs become prompts with two candidates "<id>-a" and "<id>-b", ranked 1 (the chosen or labelled-better one) and 2.`,
    )

  withInputOptions(
    datasets
      .command('validate')
      .description('parse a dataset and print a summary; exit 2 with every problem named when it is invalid')
      .argument('<file>', 'dataset file (.json, .jsonl)'),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  reward-harness datasets validate examples/demo.json\n  reward-harness datasets validate ' +
        'examples/pairs.jsonl --json',
    )
    .action(async (file: string, options: InputOptions, command: Command) => {
      const loaded = await load(file, options)
      const { datasetSummary } = await import('../../../src/datasets/index.ts')
      const summary = datasetSummary(loaded.dataset)
      cli.print(
        command,
        { path: loaded.path, sha256: loaded.sha256, format: loaded.format, shape: loaded.shape, summary },
        () => describe(file, loaded, summary),
      )
    })

  withInputOptions(
    datasets
      .command('convert')
      .description('convert a dataset to the autosr JSON shape (labels as metadata.rank / metadata.quality)')
      .argument('<file>', 'dataset file (.json, .jsonl)')
      .requiredOption(
        '-o, --out <file.json>',
        'where to write the autosr JSON (directories are created; an existing file is replaced)',
      ),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  reward-harness datasets convert examples/pairs.jsonl --out /tmp/pairs.json\n  reward-harness ' +
        'datasets convert natural.json --group natural --out llmbar-natural.json',
    )
    .action(async (file: string, options: InputOptions & { out: string }, command: Command) => {
      if (extname(options.out).toLowerCase() !== '.json')
        throw new UsageError(`--out: convert writes autosr JSON; give a .json file, not "${options.out}"`)
      const loaded = await load(file, options)
      const { saveDataset } = await import('../../datasets/save.ts')
      const saved = await saveDataset(options.out, loaded.dataset)
      const { datasetSummary } = await import('../../../src/datasets/index.ts')
      const summary = datasetSummary(loaded.dataset)
      cli.print(
        command,
        {
          input: { path: loaded.path, sha256: loaded.sha256, format: loaded.format, shape: loaded.shape },
          output: saved,
          summary,
        },
        () =>
          `wrote ${summary.prompts} prompts (${summary.candidates} candidates) from ${file} ` +
          `(${SHAPE_NAMES[loaded.shape]}) to ${options.out}\n  sha256  ${saved.sha256}`,
      )
    })
}

function withInputOptions(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--format <format>',
        'read the file as json or jsonl (default: .jsonl/.ndjson are JSONL, otherwise the content decides)',
      ).choices(['json', 'jsonl']),
    )
    .option('--group <name>', 'group (subset name) for prompts that have none, e.g. natural')
}

/** Reads a dataset; the parsers load here, with the action, not with the program's `--help`. */
async function load(file: string, options: InputOptions): Promise<LoadedDataset> {
  const { loadDataset } = await import('../../datasets/load.ts')
  return loadDataset(file, {
    ...(options.format ? { format: options.format } : {}),
    ...(options.group ? { group: options.group } : {}),
  })
}

function describe(file: string, loaded: LoadedDataset, summary: DatasetSummary): string {
  const perPrompt = summary.candidates_per_prompt
  const sizes =
    perPrompt.min === perPrompt.max
      ? `${perPrompt.min} per prompt`
      : `${perPrompt.min}–${perPrompt.max} per prompt, mean ${round(perPrompt.mean)}`
  const counts = (record: Record<string, number>): string =>
    Object.entries(record)
      .sort(([, a], [, b]) => b - a)
      .map(([name, count]) => `${name} ${count}`)
      .join(', ') || 'none'
  const rows: [string, string][] = [
    ['sha256', loaded.sha256],
    ['prompts', String(summary.prompts)],
    ['candidates', `${summary.candidates} (${sizes})`],
    [
      'labels',
      `rank ${summary.labels.rank}, quality ${summary.labels.quality}, none ` +
        `${summary.labels.none}${summary.fully_ranked ? ' (fully ranked)' : ''}`,
    ],
    [
      'groups',
      `${counts(summary.groups)}` +
        `${summary.ungrouped && Object.keys(summary.groups).length ? `, ungrouped ${summary.ungrouped}` : ''}`,
    ],
    ['sources', counts(summary.sources)],
  ]
  return [
    `${file}: valid (${SHAPE_NAMES[loaded.shape]}, ${loaded.format.toUpperCase()})`,
    ...rows.map(([name, value]) => `  ${name.padEnd(12)}${value}`),
  ].join('\n')
}

function round(value: number): string {
  return String(Math.round(value * 100) / 100)
}
