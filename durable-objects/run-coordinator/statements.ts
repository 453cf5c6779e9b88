/**
 * Every statement the coordinator's modules run, on the tables of `COORDINATOR_TABLES` (tables.ts).
 */
/**
 * Every statement the coordinator's modules run, by name: each is checked by a query-plan test (`ledger.test.ts`), so
 * one that scans a table is seen when it is written.
 */
export const COORDINATOR_SQL = {
  // steps
  /** The collecting step's row, written when it has none yet. */
  openStep: `INSERT OR IGNORE INTO steps (step, status, opened_at) VALUES (?, 'collecting', ?)`,
  /** One step's row. */
  step: 'SELECT * FROM steps WHERE step = ?',
  /** The oldest step that has closed and is not updated yet. */
  oldestUnfinished: `SELECT * FROM steps WHERE status IN ('closing', 'updating') ORDER BY step LIMIT 1`,
  /** The steps that stopped taking rollouts and whose shards are being told, oldest first. */
  closingSteps: `SELECT step FROM steps WHERE status = 'closing' ORDER BY step`,
  /** The newest updated step's row. */
  lastUpdated: `SELECT * FROM steps WHERE status = 'updated' ORDER BY step DESC LIMIT 1`,
  /** The number of the newest updated step (NULL when none is). */
  lastUpdatedStep: `SELECT max(step) AS step FROM steps WHERE status = 'updated'`,
  /** The steps not yet updated, oldest first. */
  liveSteps: `SELECT * FROM steps WHERE status != 'updated' ORDER BY step`,
  /** The newest steps' rows, newest first, at most `?`. */
  latestSteps: 'SELECT * FROM steps ORDER BY step DESC LIMIT ?',
  /** The highest `metadata.current_step` a rollout of the step carried. */
  noteTrainerStep: 'UPDATE steps SET trainer_step = max(coalesce(trainer_step, ?), ?) WHERE step = ?',
  /** The collecting step stops taking rollouts, why, and the budget that skips its update (NULL: it runs). */
  closeStep:
    "UPDATE steps SET status = 'closing', closed_at = ?, closed_by = ?, skipped = ? " +
    "WHERE step = ? AND status = 'collecting'",
  /** Every shard of a closing step knows it closed: its updates run. */
  markUpdating: `UPDATE steps SET status = 'updating' WHERE step = ? AND status = 'closing'`,
  /** Every instance of the step is updated: its tally summed once, kept on its row. */
  markUpdated: `UPDATE steps SET status = 'updated', updated_at = coalesce(updated_at, ?), tally = ? WHERE step = ?`,
  /** The rows of updated steps up to a step, once their detail has gone: a step not yet updated stays. */
  forgetStepsThrough: `DELETE FROM steps WHERE step <= ? AND status = 'updated'`,

  // step_shards
  /** A shard's tally of a step (absolute), registering it there; a confirmed close's row is left as confirmed. */
  upsertShard: `INSERT INTO step_shards (step, instance_id, shard, tally, version, last_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (step, instance_id, shard) DO UPDATE SET tally = excluded.tally,
      last_at = max(last_at, excluded.last_at) WHERE acked = 0`,
  /** A shard about to take rollouts in a step: registered with an empty tally, or its arrival time moved on. */
  announceShard: `INSERT INTO step_shards (step, instance_id, shard, tally, version, last_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (step, instance_id, shard) DO UPDATE SET last_at = max(last_at, excluded.last_at)`,
  /** The rubric version the step's first row for the instance was given. */
  pinnedVersion: 'SELECT version FROM step_shards WHERE step = ? AND instance_id = ? AND version IS NOT NULL LIMIT 1',
  /** When rollouts of the step last arrived at any of its shards (ms). */
  lastRolloutAt: 'SELECT max(last_at) AS at FROM step_shards WHERE step = ?',
  /** The longest a rollout of the step took from its request to its record, over the shards' tallies. */
  longestJudgement: "SELECT max(json_extract(tally, '$.longest_judgement_ms')) AS ms FROM step_shards WHERE step = ?",
  /** Every shard row of a step. */
  stepShards: 'SELECT * FROM step_shards WHERE step = ?',
  /** One shard's row of a step. */
  shard: 'SELECT * FROM step_shards WHERE step = ? AND instance_id = ? AND shard = ?',
  /** Whether any shard has taken part in the step: one row read. */
  hasShards: 'SELECT 1 FROM step_shards WHERE step = ? LIMIT 1',
  /** Whether the instance has taken part in the step: one row read. */
  instanceInStep: 'SELECT 1 FROM step_shards WHERE step = ? AND instance_id = ? LIMIT 1',
  /** The distinct instances that have taken part in the step. */
  stepInstanceCount: 'SELECT count(DISTINCT instance_id) AS n FROM step_shards WHERE step = ?',
  /** A shard taking part in a counted step: registered once with an empty tally, the step's version, its lease. */
  registerShard: `INSERT INTO step_shards (step, instance_id, shard, tally, version, leased) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (step, instance_id, shard) DO NOTHING`,
  /** The shards of an instance that took part in a closed step: what its update reads. */
  closedShards: 'SELECT shard FROM step_shards WHERE step = ? AND instance_id = ? ORDER BY shard',
  /** The shard rows of the steps not yet updated. */
  liveShards: `SELECT * FROM step_shards WHERE step IN (SELECT step FROM steps WHERE status != 'updated')`,
  /** The seats a shard holds in a step closed by count. */
  setShardKeep: 'UPDATE step_shards SET keep = ? WHERE step = ? AND instance_id = ? AND shard = ?',
  /** The seats of a counted step leased to all its shards. */
  leasedInStep: 'SELECT coalesce(sum(leased), 0) AS n FROM step_shards WHERE step = ?',
  /** How many shards take part in a step. */
  shardCount: 'SELECT count(*) AS n FROM step_shards WHERE step = ?',
  /** The shards of a counted step that may hold free seats: more leased than they have said they took. */
  untakenShards: 'SELECT * FROM step_shards WHERE step = ? AND leased > taken',
  /** A shard's lease of a counted step, and the seats of it taken. */
  setLease: 'UPDATE step_shards SET leased = ?, taken = ? WHERE step = ? AND instance_id = ? AND shard = ?',
  /** The seats a shard has taken of its lease (its rows), as it says. */
  noteTaken:
    'UPDATE step_shards SET taken = min(?, leased) WHERE step = ? AND instance_id = ? AND shard = ? ' +
    'AND taken != min(?, leased)',
  /** The shard confirmed the close of a step: what it holds of it is final. */
  confirmClose:
    'UPDATE step_shards SET acked = 1, keep = ?, tally = ? WHERE step = ? AND instance_id = ? AND shard = ?',
  /** The shard rows of updated steps up to a step, folded away (their step's row keeps the summed tally). */
  forgetShardsThrough:
    "DELETE FROM step_shards WHERE step <= ? AND step IN (SELECT step FROM steps WHERE status = 'updated')",

  // step_instances
  /** An instance a closed step touched, with the rubric version and rollouts its update starts from. */
  addStepInstance:
    'INSERT OR IGNORE INTO step_instances (step, instance_id, rubric_version, rollouts) VALUES (?, ?, ?, ?)',
  /** An instance's update of a step is done, with its outcome; changes nothing when it already was. */
  markInstanceUpdated:
    'UPDATE step_instances SET updated = 1, rubric_version = ?, outcome = ? ' +
    'WHERE step = ? AND instance_id = ? AND updated = 0',
  /** How many of the instance's updates of later steps are still to do. */
  laterPending: 'SELECT count(*) AS n FROM step_instances WHERE instance_id = ? AND step > ? AND updated = 0',
  /** How many of the step's instance updates are still to do. */
  stepPending: 'SELECT count(*) AS n FROM step_instances WHERE step = ? AND updated = 0',
  /** The instances a step touched, with their updates' outcomes. */
  stepInstances: `SELECT instance_id, rubric_version, rollouts, outcome, progress FROM step_instances WHERE step = ?
    ORDER BY instance_id`,
  /** The instance updates not done of the closed steps, in step order, with when each was last sent. */
  pendingUpdates: `SELECT si.step, si.instance_id, si.enqueued_at, si.sends, si.alive_at, si.rollouts, s.status,
      s.skipped
    FROM steps s JOIN step_instances si ON si.step = s.step
    WHERE s.status IN ('closing', 'updating') AND si.updated = 0 ORDER BY si.step, si.instance_id`,
  /** An instance's update job of a step was sent at `?` (ms). */
  markEnqueued: 'UPDATE step_instances SET enqueued_at = ?, sends = sends + 1 WHERE step = ? AND instance_id = ?',
  /** A sent job whose instance is not updated yet says at `?` (ms) that it is still working. */
  markAlive: `UPDATE step_instances SET alive_at = ?, progress = coalesce(?, progress)
    WHERE step = ? AND instance_id = ? AND enqueued_at IS NOT NULL AND updated = 0`,
  /** One instance's update of a step: whether it is done, and when a run of its job last said it is at work. */
  stepInstance: 'SELECT updated, alive_at, claimed_by FROM step_instances WHERE step = ? AND instance_id = ?',
  /** The queue message `?` claimed the instance's update of the step at `?` (ms). */
  claimJob: 'UPDATE step_instances SET alive_at = ?, claimed_by = ? WHERE step = ? AND instance_id = ?',
  /** The updated instance rows of steps up to a step, folded away. */
  forgetInstancesThrough: 'DELETE FROM step_instances WHERE step <= ? AND updated = 1',

  // instances
  /** The newest rubric version an instance's updates committed. */
  committedVersion: 'SELECT rubric_version FROM instances WHERE instance_id = ?',
  /** Every instance that has finished an update, with its newest version and the rollouts its updates counted. */
  allInstances: 'SELECT instance_id, rubric_version, rollouts FROM instances',
  /** An instance's finished update of a step: its newest version, its rollouts added, its last step moved on. */
  commitInstance: `INSERT INTO instances (instance_id, rubric_version, rollouts, last_step) VALUES (?, ?, ?, ?)
    ON CONFLICT (instance_id) DO UPDATE SET rubric_version = max(rubric_version, excluded.rubric_version),
      rollouts = rollouts + excluded.rollouts, last_step = max(last_step, excluded.last_step)`,

  // update_starts
  /** The step updates started after `?` (ms), and when the oldest of them began. */
  updateStartsSince: 'SELECT count(*) AS n, min(at) AS oldest FROM update_starts WHERE at > ?',
  /** A step update started at `?` (ms). */
  addUpdateStart: 'INSERT OR IGNORE INTO update_starts (at, step) VALUES (?, ?)',
  /** The update starts at or before `?` (ms): out of every window from now on. */
  forgetUpdateStarts: 'DELETE FROM update_starts WHERE at <= ?',

  // llm_batches
  /** A batch of LLM calls taken: no row written when its id was taken before. */
  claimLlmBatch: 'INSERT OR IGNORE INTO llm_batches (id) VALUES (?)',
  /** The batch ids older than `?` (their time prefix): no isolate sends such a batch again. */
  forgetLlmBatches: 'DELETE FROM llm_batches WHERE id < ?',

  // llm_stats
  /** One LLM stat of a step, added to the one stored under the same step, role, model and outcome. */
  addLlmStat: `INSERT INTO llm_stats (step, role, model, outcome, calls, latency_ms, prompt_tokens, completion_tokens)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (step, role, model, outcome) DO UPDATE SET calls = calls + excluded.calls,
      latency_ms = latency_ms + excluded.latency_ms, prompt_tokens = prompt_tokens + excluded.prompt_tokens,
      completion_tokens = completion_tokens + excluded.completion_tokens`,
  /** LLM calls of the run by role, model and outcome, summed over its steps. */
  llmTotals: `SELECT role, model, outcome, sum(calls) AS calls, sum(latency_ms) AS latency_ms,
      sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens
    FROM llm_stats GROUP BY role, model, outcome ORDER BY role, model, outcome`,
  /** The per-step sums of steps 0 to `?` added into step -1's. */
  foldLlmStats: `INSERT INTO llm_stats (step, role, model, outcome, calls, latency_ms, prompt_tokens, completion_tokens)
    SELECT -1, role, model, outcome, sum(calls), sum(latency_ms), sum(prompt_tokens), sum(completion_tokens)
    FROM llm_stats WHERE step BETWEEN 0 AND ? GROUP BY role, model, outcome
    ON CONFLICT (step, role, model, outcome) DO UPDATE SET calls = calls + excluded.calls,
      latency_ms = latency_ms + excluded.latency_ms, prompt_tokens = prompt_tokens + excluded.prompt_tokens,
      completion_tokens = completion_tokens + excluded.completion_tokens`,
  /** The per-step sums of steps 0 to `?`, once folded into step -1's. */
  forgetLlmStatsThrough: 'DELETE FROM llm_stats WHERE step BETWEEN 0 AND ?',
} as const
