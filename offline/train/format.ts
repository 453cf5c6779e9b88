/** Text renderings of the train commands' outcomes for the CLI (never a token: none reaches these values). */
import { cliCommand } from '../cli/command.ts'
import { formatChain, metricText } from '../lineage/format.ts'
import type { FinalizeOutcome } from './finalize.ts'
import type { PrepareOutcome } from './prepare.ts'
import type { ShowOutcome } from './show.ts'
import type { TrainerRun } from './state.ts'

/**
 * The summary of a prepare, and the next command to run.
 * @example console.log(formatPrepare(outcome))
 */
export function formatPrepare(outcome: PrepareOutcome): string {
  const token = {
    online_run: "the online run's token",
    RM_TOKEN: 'RM_TOKEN',
    none: 'none (no online run, RM_TOKEN unset)',
  }[outcome.token_source ?? 'none']
  return [
    `prepared training run ${outcome.training_run_id}`,
    `  artifact    ${outcome.artifact_id}`,
    `  deployment  ${outcome.deploy_id} on target ${outcome.target} (${outcome.edge_url})`,
    `  online run  ${outcome.online_run ? `${outcome.online_run.run_id} (${outcome.online_run.base_path})` : '(none)'}`,
    `  trainer     ${outcome.manifest.trainer.name} · model ${outcome.manifest.model.name} · dataset ` +
      `${outcome.manifest.dataset.id}@${outcome.manifest.dataset.version}`,
    `  env file    ${outcome.env_file} (mode 600; token: ${token})`,
    `  lineage     ${outcome.lineage}`,
    `next: ${cliCommand()} train run --env-path ${outcome.env_file} -- <trainer command>`,
  ].join('\n')
}

/**
 * What was recorded, and any note.
 * @example console.log(formatFinalize(outcome))
 */
export function formatFinalize(outcome: FinalizeOutcome): string {
  const { result } = outcome
  const metrics = Object.entries(result.metrics)
    .map(([name, value]) => `${name}=${metricText(value)}`)
    .join(' ')
  return [
    `${outcome.stored ? 'recorded' : 'already recorded (identical)'}: training run ${result.run_id} ` +
      `${result.status}${result.failure ? ` at stage ${result.failure.stage}: ${result.failure.message}` : ''}`,
    `  metrics  ${metrics || '(none)'}`,
    `  lineage  ${outcome.lineage}`,
    ...outcome.notes.map((note) => `note: ${note}`),
  ].join('\n')
}

/**
 * The chain as `lineage show` prints it, then the trainer's recorded run when known.
 * @example console.log(formatShow(outcome))
 */
export function formatShow(outcome: ShowOutcome): string {
  return outcome.trainer
    ? `${formatChain(outcome.chain)}\ntrainer     ${formatTrainer(outcome.trainer)}`
    : formatChain(outcome.chain)
}

function formatTrainer(run: TrainerRun): string {
  const command = run.command.join(' ')
  if (run.ended_at === undefined) return `started ${run.started_at}, no end recorded · ${command}`
  const how = run.spawn_error ?? (run.signal ? `stopped by ${run.signal}` : `exit ${run.exit_code}`)
  return `${how} · ${run.started_at} → ${run.ended_at} · ${command}`
}
