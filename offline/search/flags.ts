/**
 * The flags of `reward-harness search` that do not come from `SearchConfig`, and the commander value parsers other
 * commands share. Nothing here loads zod: the root `--help` lists `search` from this file alone, and the knobs'
 * flags (./options.ts, read off the schema) are added only when a command line names `search`.
 */
import { type Command, InvalidArgumentError, Option } from 'commander'

// ---------------------------------------------------------------------------------------------
// Value parsers (commander reports their errors naming the option; runCli exits with 2)

/**
 * A commander argument parser for integers, optionally at least `min`.
 * @example new Option('--generations <n>').argParser(integer(1))
 */
export function integer(min?: number): (value: string) => number {
  return (value) => {
    if (!/^-?\d+$/.test(value.trim())) throw new InvalidArgumentError(`expected an integer, got "${value}"`)
    const parsed = Number(value)
    if (min !== undefined && parsed < min)
      throw new InvalidArgumentError(`expected an integer of at least ${min}, got ${value}`)
    return parsed
  }
}

/**
 * A commander argument parser for finite numbers.
 * @example new Option('--temperature <t>').argParser(finiteNumber)
 */
export function finiteNumber(value: string): number {
  const parsed = value.trim() === '' ? Number.NaN : Number(value)
  if (!Number.isFinite(parsed)) throw new InvalidArgumentError(`expected a number, got "${value}"`)
  return parsed
}

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value]

// ---------------------------------------------------------------------------------------------
// The options

/**
 * Adds the flags of `reward-harness search` other than the config knobs to `command`, with help text grouped by
 * concern. The knobs' flags are read off the zod schema, in ./options.ts (`addConfigKnobs`).
 * @example addSearchFlags(program.command('search'))
 */
export function addSearchFlags(command: Command): Command {
  addInputOptions(command)
  addBackendOptions(command)
  addRubricOptions(command)
  addStorageOptions(command)

  // Test-only: interrupt after N backend calls (exactly like Ctrl-C), and slow the mock down.
  command.addOption(new Option('--abort-after-calls <n>').argParser(integer(1)).hideHelp())
  command.addOption(new Option('--mock-latency-ms <ms>').argParser(integer(0)).hideHelp())
  return command
}

/** What a run reads and writes: the dataset, the output, a config file, a checkpoint to resume. */
function addInputOptions(command: Command): void {
  command
    .addOption(
      new Option(
        '--dataset <file>',
        'preference dataset: autosr JSON, LLMBar, JudgeBench or chosen/rejected (JSON or JSONL)',
      ).makeOptionMandatory(),
    )
    .addOption(
      new Option(
        '--dataset-format <format>',
        'read the dataset as json or jsonl (default: by extension, then content)',
      ).choices(['json', 'jsonl']),
    )
    .addOption(
      new Option(
        '--output <file.json>',
        'where the search output JSON goes; run records, cache and checkpoints go next to it',
      ).makeOptionMandatory(),
    )
    .option(
      '--config <file.json>',
      'search knobs from a JSON object with SearchConfig keys (snake_case); flags override it',
    )
    .option(
      '--resume <session|file>',
      'continue a run from its latest checkpoint (a session id under the checkpoint dir) or from a checkpoint file',
    )
}

/** Which models answer (mock or OpenAI-compatible endpoints, per role) and how requests are sent and retried. */
function addBackendOptions(command: Command): void {
  command
    .addOption(
      new Option(
        '--backend <backend>',
        'auto = openai when --endpoint, --endpoints-file or --base-url is given, else mock',
      )
        .choices(['auto', 'mock', 'openai'])
        .default('auto'),
    )
    .addOption(
      new Option(
        '--endpoint <url[,key=value…]>',
        'an OpenAI-compatible server (repeatable); settings: max_concurrency, model, api_key_env, structured_output, ' +
          'name',
      ).argParser(collect),
    )
    .option(
      '--endpoints-file <file.json>',
      'endpoints from a JSON file: {"endpoints": [{base_url, max_concurrency, model?, api_key_env?, …}]}',
    )
    .option('--base-url <url>', 'a single OpenAI-compatible server (with --api-key-env and --max-concurrency)')
    .option(
      '--api-key-env <NAME>',
      'environment variable holding the API key, for --base-url and every endpoint without its own',
    )
    .addOption(
      new Option(
        '--max-concurrency <n>',
        'requests in flight per endpoint, for --base-url and endpoints without their own',
      )
        .argParser(integer(1))
        .default(4),
    )
    .option('--model <name>', 'model of every role without its own (openai backend)')
    .option('--model-initializer <name>', 'model of the initializer (writes first rubrics)')
    .option('--model-proposer <name>', 'model of the proposer (mutates rubrics)')
    .option('--model-verifier <name>', 'model of the verifier (grades candidates)')
    .option(
      '--model-judge <name>',
      'model of the pair judge (used when the dataset has no complete rank or quality labels)',
    )
    .addOption(
      new Option('--temperature <t>', 'sampling temperature of every request').argParser(finiteNumber).default(0),
    )
    .addOption(
      new Option(
        '--max-tokens <n>',
        'completion token limit per request (default: what each reply needs, and twice that for a cut reply)',
      ).argParser(integer(1)),
    )
    .addOption(new Option('--timeout-ms <ms>', 'time limit of one HTTP attempt').argParser(integer(1)).default(60_000))
    .addOption(
      new Option('--max-attempts <n>', 'HTTP attempts per call (429/5xx/timeouts retried by the pool, never stacked)')
        .argParser(integer(1))
        .default(4),
    )
    .addOption(
      new Option('--role-attempts <n>', 'attempts per role call when the reply is unusable (invalid JSON, wrong shape)')
        .argParser(integer(1))
        .default(4),
    )
    .addOption(
      new Option('--mock-noise <p>', "mock backend: share of verifier grades flipped, drawn from each vote's seed")
        .argParser(finiteNumber)
        .default(0),
    )
}

/** How roles write and grade rubrics: language, grade scale, votes, extraction, preset rubrics. */
function addRubricOptions(command: Command): void {
  command
    .addOption(new Option('--locale <locale>', 'prompt language of every role').choices(['en', 'zh']).default('en'))
    .addOption(
      new Option('--grade-max <n>', 'top of the integer grade scale of new rubrics').argParser(integer(1)).default(10),
    )
    .option('--no-allow-na', 'new rubrics do not allow N/A grades')
    .addOption(
      new Option(
        '--judging <kind>',
        'how the verifier grades: one call for all criteria, or verdicts (each criterion Yes/No, the grade its ' +
          'probability; the server must send top_logprobs); the exported artifact grades the same way',
      )
        .choices(['grades', 'verdicts'])
        .default('grades'),
    )
    .addOption(
      new Option('--rubric-votes <n>', 'verifier votes recorded in new rubrics (see --num-votes for an override)')
        .argParser(integer(1))
        .default(1),
    )
    .addOption(
      new Option('--extraction <kind>', 'what of the prompt the verifier grades')
        .choices(['identity', 'tag', 'xml', 'regex'])
        .default('identity'),
    )
    .option('--extraction-tag <name>', 'tag extraction: the tag whose segments are kept (default content)')
    .option('--extraction-pattern <regex>', 'regex extraction: a dot-all pattern; group 1 when it has groups')
    .option('--extraction-join <text>', 'tag/regex extraction: separator of the kept segments (default a blank line)')
    .addOption(
      new Option(
        '--candidate-extraction <kind>',
        'what of a candidate the verifier grades: its <answer> part (else without <think>), or all',
      )
        .choices(['answer', 'identity'])
        .default('answer'),
    )
    .option(
      '--preset-rubrics <file.json>',
      'start from preset rubrics: a previous output, {"rubrics": [...]}, or {prompt_id: rubric}; "__default__" ' +
        'applies to any prompt',
    )
    .option(
      '--preset-strict',
      'fail when a prompt has no preset (own or __default__) instead of asking the initializer',
    )
}

/** Where the reply cache and the checkpoints go, and how many checkpoints are kept. */
function addStorageOptions(command: Command): void {
  command
    .option('--cache-dir <dir>', 'reply cache of every LLM answer (default <output dir>/cache)')
    .option('--no-cache', 'do not read or write the reply cache')
    .option('--checkpoint-dir <dir>', 'checkpoint sessions (default <output dir>/checkpoints)')
    .addOption(
      new Option('--keep-checkpoints <n>', 'checkpoints kept per session, newest first (0 = all)')
        .argParser(integer(0))
        .default(3),
    )
}
