/**
 * `reward-harness lineage …`: record training-run manifests, results and eval reports, show a run's chain
 * (artifact → deployment → training run → evals), compare runs or artifacts, and gate on regressions. The store is a
 * local SQLite file (`--db`, default .reward-harness/lineage.sqlite) or the edge's `/lineage` API (`--url`, with
 * REWARD_HARNESS_ADMIN_TOKEN). The work is in src/lineage and offline/lineage, loaded only when a command runs.
 */
import type { Command } from 'commander'
import { readJsonFile, type StoreFlags, storeOptions, withBackend } from '../../lineage/backend.ts'
import { CliExit, type CliContext } from '../program.ts'

const HELP = `
Storage: --db <file> (default .reward-harness/lineage.sqlite), or --url <edge> to use the edge's /lineage API with
the admin token from REWARD_HARNESS_ADMIN_TOKEN.

Run references: a training run id, or "latest" = the run started last in time (among runs with evals; in a
comparison, other than the other side).

Exit codes: 0 ok (check-regression: no regression); 1 check-regression found a regression, or a failure (an edge
unreachable, a 5xx); 2 refused input (invalid JSON or schema, a conflicting record, an unknown run, a bad --metric).

Examples:
  reward-harness lineage record-manifest runs/grpo-7/manifest.json
  reward-harness lineage record-result runs/grpo-7/result.json
  reward-harness lineage record-eval runs/grpo-7/eval-gsm8k.json
  reward-harness lineage show grpo-7
  reward-harness lineage compare-runs grpo-6 grpo-7 --json
  reward-harness lineage compare-artifacts rm_aaa… rm_bbb…
  reward-harness lineage check-regression --baseline grpo-6 --candidate latest --metric accuracy:higher:0.01 \
--metric loss:lower:2%`

/**
 * Adds `lineage` and its subcommands to the program.
 * @example register(program, cli) // then: reward-harness lineage show grpo-7
 */
export function register(program: Command, cli: CliContext): void {
  if (program.commands.some((command) => command.name() === 'lineage')) return
  const lineage = program
    .command('lineage')
    .description('training-run lineage: manifests, results, evals, comparisons, regression gates')
    .addHelpText('after', HELP)

  const recorders = [
    [
      'record-manifest',
      'record a training-run manifest (TrainingRunManifest JSON)',
      'recordManifest',
      'TrainingRunManifest',
    ],
    [
      'record-result',
      "record a training run's result (TrainingRunResult JSON; needs the manifest)",
      'recordResult',
      'TrainingRunResult',
    ],
    ['record-eval', 'record an eval report (EvalReport JSON; needs the manifest)', 'recordEval', 'EvalReport'],
  ] as const
  for (const [name, description, method, schemaName] of recorders) {
    storeOptions(lineage.command(name).description(description).argument('<file>', 'the JSON file')).action(
      async (file: string, flags: StoreFlags, command: Command) => {
        const schemas = await import('../../../src/lineage/schemas.ts')
        const raw = await readJsonFile(file)
        const outcome = await withBackend(flags, async (backend) => {
          const parsed = schemas[schemaName].parse(raw)
          return backend[method](parsed as never)
        })
        cli.print(
          command,
          outcome,
          `${outcome.stored ? 'recorded' : 'already recorded (identical)'}: ${name.replace('record-', '')} of run ` +
            `${outcome.run_id}`,
        )
      },
    )
  }

  registerLineageShow(lineage, cli)
  registerLineageCompareRuns(lineage, cli)
  registerLineageCompareArtifacts(lineage, cli)
  registerLineageCheckRegression(lineage, cli)
}

/** `lineage show`: a training run's chain. */
function registerLineageShow(lineage: Command, cli: CliContext): void {
  storeOptions(
    lineage
      .command('show')
      .description("print a run's chain: artifact → deployment → training run → evals")
      .argument('<run_id>', 'a run id or "latest"'),
  ).action(async (runId: string, flags: StoreFlags, command: Command) => {
    const { resolveRunRef } = await import('../../../src/lineage/compare.ts')
    const { formatChain } = await import('../../lineage/format.ts')
    const chain = await withBackend(flags, (backend) => resolveRunRef(backend, runId))
    cli.print(command, chain, () => formatChain(chain))
  })
}

/** `lineage compare-runs`: two training runs side by side. */
function registerLineageCompareRuns(lineage: Command, cli: CliContext): void {
  storeOptions(
    lineage
      .command('compare-runs')
      .description('compare the metrics two runs share (latest eval per benchmark)')
      .argument('<a>')
      .argument('<b>'),
  ).action(async (a: string, b: string, flags: StoreFlags, command: Command) => {
    const { compareRuns, resolveRunRef } = await import('../../../src/lineage/compare.ts')
    const { formatDeltas } = await import('../../lineage/format.ts')
    const [runA, runB] = await withBackend(flags, async (backend) => {
      const first = await resolveRunRef(backend, a, b === 'latest' ? undefined : b)
      return [first, await resolveRunRef(backend, b, first.run_id)] as const
    })
    const rows = compareRuns(runA, runB)
    cli.print(command, { a: runA.run_id, b: runB.run_id, metrics: rows }, () =>
      formatDeltas(runA.run_id, runB.run_id, rows),
    )
  })
}

/** `lineage compare-artifacts`: two artifacts by the runs trained on them. */
function registerLineageCompareArtifacts(lineage: Command, cli: CliContext): void {
  storeOptions(
    lineage
      .command('compare-artifacts')
      .description("compare artifacts through each one's latest succeeded run")
      .argument('<a>')
      .argument('<b>')
      .argument('[more...]'),
  ).action(async (a: string, b: string, more: string[], flags: StoreFlags, command: Command) => {
    const { compareArtifacts } = await import('../../../src/lineage/compare.ts')
    const { formatArtifacts } = await import('../../lineage/format.ts')
    const rows = await withBackend(flags, (backend) => compareArtifacts(backend, [a, b, ...more]))
    cli.print(command, { artifacts: [a, b, ...more], metrics: rows }, () => formatArtifacts(rows))
  })
}

/** `lineage check-regression`: exit 1 when the candidate is worse than the baseline. */
function registerLineageCheckRegression(lineage: Command, cli: CliContext): void {
  storeOptions(
    lineage.command('check-regression').description('exit 1 when the candidate is worse than the baseline on a metric'),
  )
    .requiredOption('--baseline <run>', 'a run id or "latest"')
    .requiredOption('--candidate <run>', 'a run id or "latest"')
    .requiredOption('--metric <spec...>', 'name:higher|lower[:tolerance] (absolute, or N% of |baseline|); repeatable')
    .action(async (flags: StoreFlags & { baseline: string; candidate: string; metric: string[] }, command: Command) => {
      const { checkRegression, parseMetricSpec, resolveRunRef } = await import('../../../src/lineage/compare.ts')
      const { formatRegression } = await import('../../lineage/format.ts')
      const report = await withBackend(flags, async (backend) => {
        const specs = flags.metric.map(parseMetricSpec)
        const explicitCandidate = flags.candidate === 'latest' ? undefined : flags.candidate
        const baseline = await resolveRunRef(backend, flags.baseline, explicitCandidate)
        const candidate = await resolveRunRef(backend, flags.candidate, baseline.run_id)
        return checkRegression(baseline, candidate, specs)
      })
      cli.print(command, report, () => formatRegression(report))
      if (report.regressed) throw new CliExit(1)
    })
}
