/**
 * `reward-harness import --from autosr FILE --out OUT`: an autosr RM artifact becomes this project's content-addressed
 * RM artifact. The work is in offline/artifacts/autosr-import.ts (loaded only when the command runs).
 */
import type { Command } from 'commander'
import type { CliContext } from '../program.ts'

const HELP_AFTER = `
What is read from the autosr artifact (autosr's RM artifact, schema_version "1.0"):
  rubric           every prompt's rubric: criterion ids, texts, weights, criterion_type, check_points and examples.
                   A criterion_type other than factual, format, reasoning, safety, style becomes null (the original
                   kept in the rubric's metadata.autosr_criterion_types). A "__default__" prompt id becomes this
                   project's __default__ rubric, which also scores prompts the artifact has no rubric for (autosr
                   served it only to prompt_id "__default__").
  grading_protocol num_votes and allow_na: one value for the whole artifact here, so rubrics must agree
  grade scale      grade_max 5, the 0–5 scale of autosr's verifier (an artifact written by export --format autosr
                   keeps the scale it was searched on: metadata.reward_harness.grade_max)
  runtime_snapshot seed; extraction (identity, tag, xml, regex — a pattern must be a JavaScript regex that RE2 runs:
                   no backreferences, no lookaround; it is matched in linear time) and
                   candidate_extraction (answer, identity); llm: base_url (recorded as runtime.base_url: scheme, host,
                   port and path only), verifier_model
                   (else default_model), prompt_language (en, zh; null = autosr's built-in English prompts). Backend
                   openai, temperature 0 (as autosr's RM server grades), max_tokens 2048 (autosr sends none). autosr's
                   client settings (timeout, retries, fail_soft) have no equivalent and are not kept.
  provenance       source_run_id, source_session_id, dataset_hash (as dataset_sha256), config_hash; settings_hash =
                   sha256 of the runtime snapshot's canonical JSON; search_output_sha256 = sha256 of FILE;
                   imported = {format "autosr", artifact_id (autosr's), file_sha256}
  created_at_utc   autosr's, so the same FILE always gives a byte-identical artifact (and the same artifact_id)

Credentials are removed before anything is read, at any depth: never copied, never printed (--json lists where
one was found, as dropped_keys; see docs/security.md): a field whose name says key, token, secret, password,
authorization, cookie or credential; a value shaped like a bearer token or a provider key (sk-…, ghp_…, AKIA…);
a URL's user-info and its credential query values.

Refused with exit code 2, every problem listed with its field (e.g. rubric.p2.grading_protocol.num_votes):
  what autosr's loader refuses (schema_version not "1.0"; a blank artifact_id, source_run_id, dataset_hash or
  config_hash; an empty rubric map; a criterion without criterion_id or text, a repeated id, a negative weight);
  an empty runtime_snapshot (autosr's RM server refuses it too: export it again from a search output with its run
  manifest) or one missing seed, extraction, candidate_extraction or any of the 10 llm keys; rubrics that disagree on
  num_votes or allow_na; what this project cannot express (an extraction strategy, a tag name, a pattern, a prompt
  language, more than 15 votes, a rubric without a positive weight).

The edge grades where the deployment says (deploy --llm-base-url, else the Worker's RM_LLM_BASE_URL), never at an
artifact's recorded base_url: deploy with --llm-base-url <runtime.base_url> to grade where autosr did.

Exit codes: 0 written; 1 failure (e.g. the file cannot be written); 2 refused input.

Examples:
  reward-harness import --from autosr artifacts/rm_artifact.json --out out/rm.json
  reward-harness import --from autosr artifacts/rm_artifact.json --out out/rm.json --json
  reward-harness deploy --artifact out/rm.json --target prod --url https://rm.example.com \\
      --llm-base-url https://openrouter.ai/api/v1 --llm-api-key-env OPENROUTER_API_KEY`

/** The formats `import --from` reads. */
const FORMATS = ['autosr'] as const

/**
 * Adds `import` to the program.
 * @example register(program, cli) // then: reward-harness import --from autosr rm_autosr.json --out out/rm.json
 */
export function register(program: Command, cli: CliContext): void {
  program
    .command('import')
    .description("convert another system's RM artifact (autosr) into a content-addressed RM artifact of this project")
    .argument('<file>', 'the artifact JSON to convert (autosr: written by its rm.export)')
    .requiredOption('--from <format>', `the format of <file>: ${FORMATS.join(', ')}`)
    .requiredOption('--out <file>', 'where to write the artifact JSON (written atomically; directories are created)')
    .addHelpText('after', HELP_AFTER)
    .action(async (file: string, options: { from: string; out: string }, command: Command) => {
      const { ArtifactInputError } = await import('../../artifacts/errors.ts')
      if (!(FORMATS as readonly string[]).includes(options.from))
        throw new ArtifactInputError(
          'invalid_option',
          `--from "${options.from}": expected one of ${FORMATS.join(', ')}`,
        )
      const { importAutosrFile } = await import('../../artifacts/autosr-import.ts')
      const result = await importAutosrFile({ file, out: options.out })
      const { artifact } = result
      const prompts = Object.keys(artifact.rubrics)
      cli.print(
        command,
        {
          artifact_id: artifact.artifact_id,
          out: options.out,
          from: { format: options.from, file, artifact_id: result.source_artifact_id },
          prompts,
          provenance: artifact.provenance,
          runtime: artifact.runtime,
          dropped_keys: result.dropped_keys,
          notes: result.notes,
        },
        () => {
          const r = artifact.runtime
          const rows: Array<[string, string]> = [
            ['from', `autosr ${result.source_artifact_id} (${file})`],
            ['source run', `${artifact.provenance.source_run_id} (session ${artifact.provenance.source_session_id})`],
            ['rubrics', `${prompts.length} prompt${prompts.length === 1 ? '' : 's'}: ${prompts.join(', ')}`],
            [
              'runtime',
              `${r.backend} ${r.verifier_model} at ${r.base_url ?? '?'}, temperature ${r.temperature}, ` +
                `seed ${r.seed}, ` +
                `${r.locale}, grades 0–${r.grade_max}${r.allow_na ? ' or n/a' : ''}, ${r.num_votes} ` +
                `vote${r.num_votes === 1 ? '' : 's'}`,
            ],
            ['dataset', artifact.provenance.dataset_sha256],
            ...(result.dropped_keys.length
              ? [['credentials', `removed, not copied: ${result.dropped_keys.join(', ')}`] as [string, string]]
              : []),
            ...result.notes.map((note): [string, string] => ['note', note]),
          ]
          return [
            `wrote ${artifact.artifact_id} to ${options.out}`,
            ...rows.map(([key, value]) => `  ${key.padEnd(12)}${value}`),
          ].join('\n')
        },
      )
    })
}
