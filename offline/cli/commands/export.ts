/**
 * `reward-harness export`: a search output (with its run manifest) becomes a content-addressed RM artifact, or
 * (`--library <dir>`) a judge-library checkpoint becomes a library artifact, or (`--format autosr`) a search output or
 * an artifact file becomes an autosr RM artifact. The work is in offline/artifacts (loaded only when the command runs).
 */
import { redactUrl, withoutCredentials } from '../../../src/credentials/index.ts'
import type { Command } from 'commander'
import type { CliContext } from '../program.ts'

const HELP_AFTER = `
The artifact (src/schemas/artifact.ts):
  artifact_id      "rm_" + sha256 of the canonical JSON of everything else (the content address)
  rubrics          one per prompt of the search (best_rubrics), plus "__default__" for prompts it never saw
  provenance       source run and session ids, dataset sha256, config and settings hashes, sha256 of the search output
  runtime          backend, verifier model, temperature, max_tokens, seed, locale, extraction, grade_max, allow_na,
                   votes: what scoring needs to grade as the search did
  created_at_utc   when the search finished (not now): the same search output always gives a byte-identical file

--default-rubric (the "__default__" rubric):
  best (default)   the searched rubric whose criteria generalise best: a criterion generalises when the search found
                   the same criterion (most of its words, exactly its numbers) for other prompts too; the rubric with
                   the highest weighted share of such criteria wins (ties: higher objective score, then prompt id),
                   and its prompt-specific criteria are dropped. With nothing shared (one prompt; rubrics with
                   nothing in common) it is the default run's rubric (config/default-run.json), not one prompt's.
  <prompt_id>      that prompt's rubric, whole
  <file.json>      a rubric given by hand: a bare rubric {"criteria": [...]}, or a preset file whose "__default__" is \
used
  none             no default: the edge refuses prompts the artifact has no rubric for

Refused with exit code 2 (every problem listed):
  no run_manifest; config_hash / settings_hash not the hash of the manifest's config_snapshot / settings; rubric
  prompt ids that differ from the dataset's (manifest prompt count and ids; the dataset file itself when it is still
  where the manifest says, unchanged); rubrics failing the schema (e.g. a negative weight), without a positive weight,
  or with a criterion id used twice.

--library <dir> (a judge-library artifact, kind "library", instead of a rubric one):
  entries          every skill and tool of the library (name, kind, description, when_to_use, body, sha256)
  provenance       library id, registry and library hashes; from the evolution log (<dir>/../../evolution-log.jsonl
                   or --evolution-log): its sha256, best iteration, validation accuracy, iterations, dataset sha256
  runtime          --backend (mock), --model (the mock model), --locale (en), --temperature (0), --max-tokens (2048),
                   --seed (the log's seed, else 0), --max-tool-calls (3)
  scoring          the edge scores a response against a reference response ("reference" or
                   candidate.metadata.reference) with the library judge in both orders: win 1, tie 0.5, loss 0,
                   averaged (failed orders left out) — a scalar in [0, 1] for GRPO (RewardHarness §4.5)

--format autosr (an artifact autosr's RM server loads and serves unchanged, from --search-output or --artifact):
  keys             schema_version "1.0", artifact_id (this project's), created_at_utc, source_session_id,
                   source_run_id, dataset_hash, config_hash, rubric, scoring_policy, normalization, compatibility,
                   runtime_snapshot {seed, extraction, candidate_extraction, llm with its 10 keys}
  judge            autosr's RM server grades with an LLM only: --llm-base-url (else the base_url an imported artifact
                   recorded) and --llm-model (else the artifact's verifier model; required for a mock-searched
                   artifact, whose model no judge serves); exit 2 without them. timeout, retries and fail_soft are
                   autosr's defaults (30 s, 2, 0.5 s, 8 s, 0.2, false); prompt_language is the artifact's locale.
  votes, n/a       every rubric's grading_protocol gets the artifact's num_votes and the rubric's allow_na
  grade scale      this project grades integers 0..grade_max, autosr's verifier 0–5 with its own normalization: both
                   are stated in scoring_policy.grade_scale and in every rubric's metadata.reward_harness (import
                   --from autosr reads it back, so a round trip keeps the scale)
  __default__      written as a plain prompt id: autosr has no fallback rubric, so its server uses it only for
                   requests with prompt_id "__default__"
  not carried      temperature and max_tokens (autosr's server grades at temperature 0 and sends no max_tokens);
                   extraction regex patterns are copied as they are (JavaScript and Python regex dialects differ)

Exit codes: 0 written; 1 failure (e.g. the file cannot be written); 2 refused input.

Examples:
  reward-harness search --dataset examples/demo.json --backend mock --output out/best.json
  reward-harness export --search-output out/best.json --out out/rm.json
  reward-harness export --search-output out/best.json --out out/rm.json --default-rubric rubrics/generic.json --json
  reward-harness evolve --dataset offline/evolve/fixtures/pairs-demo.json --out runs/a --iterations 2 --backend mock
  reward-harness export --library runs/a/checkpoints/best --out out/library-rm.json
  reward-harness export --search-output out/best.json --format autosr --out out/rm-autosr.json \\
      --llm-base-url https://openrouter.ai/api/v1 --llm-model openai/gpt-4o-mini
  reward-harness export --artifact out/rm.json --format autosr --out out/rm-autosr.json \\
      --llm-base-url https://openrouter.ai/api/v1 --llm-model openai/gpt-4o-mini`

interface ExportFlags {
  searchOutput?: string
  library?: string
  artifact?: string
  format: string
  llmBaseUrl?: string
  llmModel?: string
  out: string
  defaultRubric?: string
  datasetCheck: boolean
  evolutionLog?: string
  backend?: string
  model?: string
  locale?: string
  temperature?: string
  maxTokens?: string
  seed?: string
  maxToolCalls?: string
}

/**
 * Adds `export` to the program.
 * @example register(program, cli) // then: reward-harness export --search-output out/best.json --out out/rm.json (or
 *   --library runs/a/checkpoints/best)
 */
export function register(program: Command, cli: CliContext): void {
  program
    .command('export')
    .description(
      'build a content-addressed RM artifact (per-prompt rubrics + __default__, provenance, runtime) from a search ' +
        'output, or a library artifact from a judge library, or (--format autosr) an autosr RM artifact',
    )
    .option('--search-output <file>', 'the output JSON of `reward-harness search` (with its run_manifest)')
    .option(
      '--library <dir>',
      'a judge-library directory (e.g. <evolve out>/checkpoints/best): export a library artifact instead',
    )
    .option(
      '--evolution-log <file>',
      '--library: the evolution log (default <dir>/../../evolution-log.jsonl when present)',
    )
    .option('--backend <mock|openai>', '--library: the backend the edge judges with (default mock)')
    .option('--model <name>', '--library: the judge model (required with --backend openai)')
    .option('--locale <en|zh>', '--library: prompt locale (default en)')
    .option('--temperature <t>', '--library: sampling temperature (default 0)')
    .option('--max-tokens <n>', '--library: max tokens per judge call (default 2048)')
    .option('--seed <n>', "--library: seed (default the evolution log's)")
    .option('--max-tool-calls <n>', '--library: tool calls per judgment (default 3)')
    .requiredOption('--out <file>', 'where to write the artifact JSON (written atomically; directories are created)')
    .option(
      '--default-rubric <best|none|prompt_id|file.json>',
      'the "__default__" rubric for unseen prompts (default: best; see below)',
    )
    .option('--no-dataset-check', "do not compare the rubrics' prompt ids with the dataset file named by the manifest")
    .option('--format <rubric|autosr>', "the artifact's format: this project's (rubric) or autosr's", 'rubric')
    .option('--artifact <file>', "--format autosr: convert this project's artifact file instead of a search output")
    .option('--llm-base-url <url>', "--format autosr: the judge endpoint autosr's RM server calls (see below)")
    .option('--llm-model <model>', "--format autosr: the judge model (default: the artifact's verifier model)")
    .addHelpText('after', HELP_AFTER)
    .action(async (options: ExportFlags, command: Command) => {
      await checkSource(options)
      if (options.format === 'autosr') await exportAutosr(options, command, cli)
      else if (options.library !== undefined)
        await exportLibrary(options as ExportFlags & { library: string }, command, cli)
      else await exportSearchOutput(options as ExportFlags & { searchOutput: string }, command, cli)
    })
}

/** Refuses flags that do not make one export: one source, and the flags of its format only. */
async function checkSource(options: ExportFlags): Promise<void> {
  const { ArtifactInputError } = await import('../../artifacts/errors.ts')
  const refuse = (message: string) => new ArtifactInputError('invalid_option', message)
  if (options.format !== 'rubric' && options.format !== 'autosr')
    throw refuse(`--format "${options.format}": expected rubric or autosr`)
  const sources = (['searchOutput', 'library', 'artifact'] as const).filter((key) => options[key] !== undefined)
  if (sources.length === 0)
    throw refuse(
      "required option '--search-output <file>' not specified (or give --library <dir> for a library artifact, or " +
        '--artifact <file> with --format autosr)',
    )
  if (sources.length > 1) throw refuse('give one of --search-output <file>, --library <dir> and --artifact <file>')
  if (options.format === 'autosr' && options.library !== undefined)
    throw refuse('--format autosr: a library artifact has no rubrics, so autosr cannot serve it')
  if (options.format === 'rubric') {
    if (options.artifact !== undefined)
      throw refuse('--artifact converts an artifact file to --format autosr (it is already a rubric artifact)')
    const stray =
      options.llmBaseUrl !== undefined ? '--llm-base-url' : options.llmModel !== undefined ? '--llm-model' : ''
    if (stray) throw refuse(`${stray} names the judge of --format autosr`)
  }
}

/** Exports an autosr artifact (from a search output or an artifact file) and prints what it holds. */
async function exportAutosr(options: ExportFlags, command: Command, cli: CliContext): Promise<void> {
  const { exportAutosrArtifact } = await import('../../artifacts/autosr-export.ts')
  const pick = <K extends keyof ExportFlags>(key: K) => (options[key] === undefined ? {} : { [key]: options[key] })
  const result = await exportAutosrArtifact({
    out: options.out,
    ...pick('searchOutput'),
    ...pick('artifact'),
    ...pick('defaultRubric'),
    // The URL is written into the artifact and printed: it goes without its credentials (the key is autosr's env).
    ...(options.llmBaseUrl === undefined ? {} : { llmBaseUrl: withoutCredentials(options.llmBaseUrl).value as string }),
    ...pick('llmModel'),
    checkDatasetFile: options.datasetCheck,
  })
  const snapshot = result.autosr.runtime_snapshot as { seed: number; llm: Record<string, unknown> }
  const prompts = Object.keys(result.autosr.rubric as object)
  cli.print(
    command,
    {
      artifact_id: result.artifact.artifact_id,
      format: 'autosr',
      out: result.out,
      source: options.artifact ?? options.searchOutput,
      prompts,
      runtime_snapshot: snapshot,
      grade_scale: (result.autosr.scoring_policy as Record<string, unknown>).grade_scale,
      notes: result.notes,
    },
    () =>
      [
        `wrote autosr artifact ${result.artifact.artifact_id} to ${result.out}`,
        `  ${'rubrics'.padEnd(12)}${prompts.length} prompt${prompts.length === 1 ? '' : 's'}: ${prompts.join(', ')}`,
        `  ${'judge'.padEnd(12)}${String(snapshot.llm.verifier_model)} at ` +
          `${redactUrl(String(snapshot.llm.base_url))}, seed ${snapshot.seed}, ${String(snapshot.llm.prompt_language)}`,
        `  ${'grades'.padEnd(12)}searched on 0–${result.artifact.runtime.grade_max}; autosr's verifier grades 0–5`,
        ...result.notes.map((note) => `  ${'note'.padEnd(12)}${note}`),
      ].join('\n'),
  )
}

/** Exports the artifact of a search output and prints what it holds. */
async function exportSearchOutput(
  options: ExportFlags & { searchOutput: string },
  command: Command,
  cli: CliContext,
): Promise<void> {
  const { exportArtifact } = await import('../../artifacts/export.ts')
  const result = await exportArtifact({
    searchOutput: options.searchOutput,
    out: options.out,
    ...(options.defaultRubric === undefined ? {} : { defaultRubric: options.defaultRubric }),
    checkDatasetFile: options.datasetCheck,
  })
  const { artifact } = result
  const prompts = Object.keys(artifact.rubrics).filter((key) => key !== '__default__')
  cli.print(
    command,
    {
      artifact_id: artifact.artifact_id,
      out: result.out,
      search_output: result.search_output,
      created_at_utc: artifact.created_at_utc,
      prompts,
      default_rubric: result.default_rubric,
      provenance: artifact.provenance,
      runtime: artifact.runtime,
      checks: result.checks,
    },
    () => {
      const def = result.default_rubric
      const defaultText = !def
        ? 'none (unseen prompts are refused)'
        : def.strategy === 'best'
          ? `best: ${def.criteria.join(', ')} from ${def.source_prompt_id} (generality ` +
            `${def.generality}${def.dropped_criteria.length ? `; dropped ${def.dropped_criteria.join(', ')}` : ''})`
          : def.strategy === 'generic'
            ? `generic: the default run's rubric (${def.criteria.join(', ')}); no searched criterion recurs across ` +
              'prompts, so none is known to hold for an unseen one'
            : def.strategy === 'prompt'
              ? `the rubric of ${def.source_prompt_id}`
              : `from ${def.source_file} (${def.criteria.join(', ')})`
      const r = artifact.runtime
      const rows: Array<[string, string]> = [
        ['source run', `${artifact.provenance.source_run_id} (session ${artifact.provenance.source_session_id})`],
        ['rubrics', `${prompts.length} prompt${prompts.length === 1 ? '' : 's'}: ${prompts.join(', ')}`],
        ['default', defaultText],
        [
          'runtime',
          `${r.backend} ${r.verifier_model}, temperature ${r.temperature}, max_tokens ${r.max_tokens}, seed ` +
            `${r.seed}, ${r.locale}, grades 0–${r.grade_max}${r.allow_na ? ' or n/a' : ''}, ${r.num_votes} ` +
            `vote${r.num_votes === 1 ? '' : 's'}`,
        ],
        ['dataset', artifact.provenance.dataset_sha256],
        [
          'checks',
          `config and settings hashes match; prompt ids checked against ` +
            `${result.checks.dataset_prompts.join(', ') || 'best_objective_scores'}` +
            `${result.checks.dataset_file_note ? ` (dataset file: ${result.checks.dataset_file_note})` : ''}`,
        ],
      ]
      return [
        `wrote ${artifact.artifact_id} to ${result.out}`,
        ...rows.map(([key, value]) => `  ${key.padEnd(12)}${value}`),
      ].join('\n')
    },
  )
}

async function exportLibrary(
  options: ExportFlags & { library: string },
  command: Command,
  cli: CliContext,
): Promise<void> {
  const { exportLibraryArtifact } = await import('../../artifacts/library-export.ts')
  const pick = <K extends keyof ExportFlags>(key: K) => (options[key] === undefined ? {} : { [key]: options[key] })
  const result = await exportLibraryArtifact({
    library: options.library,
    out: options.out,
    ...pick('evolutionLog'),
    ...pick('backend'),
    ...pick('model'),
    ...pick('locale'),
    ...pick('temperature'),
    ...pick('maxTokens'),
    ...pick('seed'),
    ...pick('maxToolCalls'),
  })
  const { artifact } = result
  cli.print(
    command,
    {
      artifact_id: artifact.artifact_id,
      kind: artifact.kind,
      out: result.out,
      library: result.library_dir,
      evolution_log: result.evolution_log,
      created_at_utc: artifact.created_at_utc,
      entries: artifact.entries.map((entry) => ({ name: entry.name, kind: entry.kind, sha256: entry.sha256 })),
      provenance: artifact.provenance,
      runtime: artifact.runtime,
      notes: result.notes,
    },
    () => {
      const p = artifact.provenance
      const r = artifact.runtime
      const rows: Array<[string, string]> = [
        ['library', `${p.library_id}: ${artifact.entries.map((entry) => `${entry.name} (${entry.kind})`).join(', ')}`],
        ['registry', p.registry_sha256],
        [
          'evolution',
          result.evolution_log
            ? `${result.evolution_log}: best iteration ${p.best_iteration ?? '?'}, val accuracy ` +
              `${p.best_val_accuracy ?? '?'}, ${p.iterations ?? '?'} iterations`
            : 'no evolution log',
        ],
        [
          'runtime',
          `${r.backend} ${r.model}, ${r.locale}, temperature ${r.temperature}, max_tokens ${r.max_tokens}, seed ` +
            `${r.seed}, ${r.max_tool_calls} tool calls`,
        ],
        ['scoring', 'win rate vs a reference response, both orders (win 1, tie 0.5, loss 0)'],
        ...result.notes.map((note): [string, string] => ['note', note]),
      ]
      return [
        `wrote ${artifact.artifact_id} to ${result.out}`,
        ...rows.map(([key, value]) => `  ${key.padEnd(12)}${value}`),
      ].join('\n')
    },
  )
}
