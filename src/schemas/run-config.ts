import { z } from 'zod'
import { bundledTemplate, placeholdersOf, PROMPT_KEYS } from './prompt-templates.ts'
import { RubricSeed } from './rubric.ts'
import { strict } from './strict.ts'
import { STRUCTURED_OUTPUTS } from './structured-output.ts'

/** Every LLM role in the system; each may have its own model and endpoint. */
export const AGENT_ROLES = [
  'scorer',
  'auditor',
  'analyzer',
  'summarizer',
  'meta_summarizer',
  'query_generator',
  'updater',
] as const
export type AgentRole = (typeof AGENT_ROLES)[number]

/**
 * How one role reaches its model. `auto` means `openai` when a base URL is set, else `mock`.
 * API keys are never stored here: `api_key_env` names the environment variable or wrangler secret.
 * @example AgentSettings.parse({ backend: 'openai', model: 'Qwen/Qwen3-8B', base_url: 'http://gpu-1:8000/v1',
 *   api_key_env: 'VLLM_KEY' })
 */
const SecretName = z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'an environment variable name such as OPENAI_API_KEY')

/**
 * Extra HTTP headers a role sends to its endpoint (e.g. Cloudflare Access service-token headers in front of a judge
 * behind a Tunnel): a literal value, or `{secret: NAME}` for a wrangler secret named like `api_key_env`.
 * @example AgentHeaders.parse({ 'CF-Access-Client-Id': { secret: 'ACCESS_CLIENT_ID' }, 'CF-Access-Client-Secret': {
 *   secret: 'ACCESS_CLIENT_SECRET' } })
 */
export const AgentHeaders = z.record(
  z
    .string()
    .regex(/^[A-Za-z0-9-]{1,64}$/, 'a header name: letters, digits and -')
    .refine(
      (name) => !/^(authorization|content-type|content-length|host)$/i.test(name),
      'set by the client itself (the API key goes in api_key_env)',
    ),
  z.union([
    z
      .string()
      .max(4_096)
      // What `fetch` can send: a line break would end the header (and every call with it), past U+00FF throws.
      .regex(
        /^[\t\x20-\x7e\x80-\xff]*$/,
        'a header value: no line breaks, control characters or characters past U+00FF',
      ),
    z.object({ secret: SecretName }),
  ]),
)
export type AgentHeaders = z.infer<typeof AgentHeaders>

/**
 * How an endpoint takes a reply's JSON schema. `json_schema`: OpenAI's shape, `{type: 'json_schema', json_schema:
 * {name, schema, strict}}` (OpenAI, vLLM, SGLang). `json_object_schema`: `{type: 'json_object', schema}`, the shape
 * llama-cpp-python's server enforces (it refuses OpenAI's). `json_object`: JSON with no shape, which every
 * OpenAI-compatible server takes.
 */

export const AgentSettings = z
  .object({
    backend: z.enum(['auto', 'mock', 'openai', 'workers-ai']).default('auto'),
    model: z.string().min(1).max(200).default('mock-heuristic-1'),
    base_url: z.url({ protocol: /^https?$/ }).optional(),
    api_key_env: SecretName.optional(),
    headers: AgentHeaders.optional(),
    temperature: z.number().min(0).max(2).default(0),
    /**
     * Longest reply, in tokens. Unset: each call asks for what its reply needs (a judge from its rubric count, others
     * 1,024); set it for a model that thinks before it answers.
     */
    max_tokens: z.number().int().positive().max(32_768).optional(),
    /**
     * `json_schema` when the endpoint enforces a JSON schema on its reply (vLLM, SGLang, OpenAI): judges then send the
     * exact schema of their reply (rubric ids, the grade range), so a reply never needs a repair call;
     * `json_object_schema` sends it as `{type: 'json_object', schema}` (llama-cpp-python). Default `json_object`, which
     * every OpenAI-compatible server takes.
     */
    structured_output: z.enum(STRUCTURED_OUTPUTS).default('json_object'),
    seed: z.number().int().optional(),
    timeout_ms: z.number().int().positive().max(300_000).default(60_000),
    max_attempts: z.number().int().min(1).max(10).default(4),
    /** Highest number of this role's calls in flight at once within one Worker invocation. */
    concurrency: z.number().int().min(1).max(64).default(4),
  })
  .apply(strict)
export type AgentSettings = z.infer<typeof AgentSettings>

/** A role's overrides: every field optional and without defaults, so only what is set overrides `agents.default`. */
const PartialAgentSettings = z
  .object(
    Object.fromEntries(
      Object.entries(AgentSettings.shape).map(([key, field]) => [
        key,
        (field instanceof z.ZodDefault ? field.unwrap() : field).optional(),
      ]),
    ) as unknown as {
      [K in keyof typeof AgentSettings.shape]: z.ZodOptional<z.ZodType<z.infer<typeof AgentSettings>[K]>>
    },
  )
  .apply(strict)
export type PartialAgentSettings = z.infer<typeof PartialAgentSettings>

/**
 * What one run token can make the server spend, whatever it sends (`RunConfig.budgets`): only the admin, who writes the
 * run's config, can raise them.
 * @example RunBudgets.parse({ instances_per_step: 1024 }).updates_per_window // 60
 */
export const RunBudgets = z
  .object({
    /**
     * Distinct instances one step may touch: each costs an update of its own when the step closes. A rollout of one
     * more instance is refused (429 `instance_budget_exceeded`) until the step closes.
     */
    instances_per_step: z.number().int().min(1).max(100_000).default(256),
    /**
     * Step updates the run may start within `update_window_s`. Past it, `/complete` is refused (429
     * `update_budget_exceeded` with Retry-After) and the step goes on collecting; a step closed by count, a later
     * trainer step or the idle gap closes with its update skipped (its rollouts and scores stay).
     */
    updates_per_window: z.number().int().min(1).max(100_000).default(60),
    update_window_s: z.number().int().min(60).max(86_400).default(3_600),
    /**
     * LLM calls one request may spend judging one rollout: every attempt of every judgement counts (retries, a reply
     * cut at max_tokens asked again, a re-judge on moved rubrics, a sync re-score, a relative group's call). Spent
     * without a valid judgement: 429 `judge_budget_exceeded`; a scorer's `max_attempts` above it is cut to it.
     */
    judge_calls_per_rollout: z.number().int().min(1).max(100).default(8),
    /**
     * Memory searches (`GET /memory?q=`, the dashboard's search) the run's tokens may make per clock hour: each embeds
     * its query, unless the same text was searched lately (then its vector is reused and nothing is spent). Past it:
     * 429 `memory_search_budget_exceeded` with Retry-After; listing memory without `q` costs nothing and goes on.
     */
    memory_searches_per_hour: z.number().int().min(1).max(100_000).default(600),
  })
  .apply(strict)
export type RunBudgets = z.infer<typeof RunBudgets>

/**
 * A run: one training job's rubric configuration and its step policy.
 * @example RunConfig.parse({ anchor_rubrics: [{ text: 'Correct final answer.' }] })
 */
export const RunConfig = z
  .object({
    /** A note for people reading the file (JSON has no comments); the harness ignores it. */
    $comment: z.string().max(4_000).optional(),
    mode: z.enum(['async', 'sync']).default('async'),
    rubrics_mode: z.enum(['global', 'per_instance']).default('global'),
    anchor_rubrics: z.array(RubricSeed).max(50).default([]),
    adaptive_rubrics: z.array(RubricSeed).max(50).default([]),
    /** Seed adaptive rubrics for named instances (per_instance mode); others start from `adaptive_rubrics`. */
    instance_rubrics: z.record(z.string(), z.array(RubricSeed).max(50)).default({}),
    /**
     * Close a step automatically after this many distinct rollouts; null: by /complete, step advance or idle gap
     * (below).
     */
    rollouts_per_step: z.number().int().positive().nullable().default(null),
    /**
     * Without `rollouts_per_step`: close the collecting step when a rollout arrives whose `metadata.current_step` is
     * past the highest the step holds, so a trainer that sends its step needs no /complete.
     */
    close_on_step_advance: z.boolean().default(true),
    /**
     * Without `rollouts_per_step`: close the collecting step once no rollout has arrived for this many seconds (the gap
     * while the trainer trains between two reward bursts), counted from when a rollout sent just after the last would
     * have been judged (the step's slowest judgement is added); null: never. What closes steps of trainers that send
     * neither /complete nor a step (OpenRLHF, slime, verl).
     */
    close_after_idle_s: z.number().int().min(1).max(86_400).nullable().default(30),
    /** Rubrics are updated on steps 0, N, 2N, … */
    rubric_update_frequency: z.number().int().positive().default(1),
    /**
     * An adaptive criterion whose within-group spread (the pooled standard deviation of its grades, 0..1 scale, among
     * responses to the same input) stays below `retire_below_spread` for this many consecutive closed steps is retired
     * in a new version that says why; anchors never are. null: never.
     */
    retire_after_steps: z.number().int().min(1).max(100).nullable().default(5),
    retire_below_spread: z.number().min(0).max(1).default(0.02),
    /**
     * `relative`: `/score/group`, and `/compat/openrlhf` items that share a prompt, are judged listwise, every response
     * of a group in one call per rubric set (a seeded random order under opaque labels); a failed or malformed group
     * reply falls back to pointwise judging for that group. `pointwise`: every response on its own.
     */
    group_scoring: z.enum(['pointwise', 'relative']).default('pointwise'),
    /** Characters of responses judged in one relative call; a larger group is split into calls of at most this. */
    relative_group_max_chars: z.number().int().min(1_000).max(1_000_000).default(48_000),
    /**
     * Re-judge a sampled share of each closed step's scores with a second model (`agents.auditor`, the scorer's
     * prompt): the step's mean absolute difference and rank correlation between judge and auditor warn of judge drift
     * and of hacking one judge cannot see in itself. 0: no audit.
     */
    audit: z
      .object({ sample: z.number().min(0).max(1).default(0) })
      .apply(strict)
      .default({ sample: 0 }),
    /** Most adaptive criteria in force after an update; above it the least discriminating are retired. null: no cap. */
    max_active_rubrics: z.number().int().min(1).max(50).nullable().default(null),
    chunk_size: z.number().int().positive().max(1_000).default(16),
    /**
     * Durable Objects each instance's step ledger is spread over, by a hash of the rollout id: a run's `/score` rate
     * can reach about this many times what one object serves. null: 8 in `global` mode, 1 in `per_instance` mode (the
     * run's load is already spread over its instances).
     */
    ledger_shards: z.number().int().min(1).max(64).nullable().default(null),
    /**
     * Steps a closed step's rollouts stay in the ledger after its update committed; then they are deleted (aggregates
     * stay).
     */
    ledger_retention_steps: z.number().int().min(0).max(100).default(2),
    /** Write every scored rollout to R2 (the ARCHIVE bucket) as NDJSON, one object per run × step × ledger shard. */
    archive: z.boolean().default(false),
    /** Which rollouts of a closed step get a deep (LLM) analysis; every rollout is scored either way. */
    analysis: z
      .object({
        /**
         * Rollouts analysed per instance and step for coverage (group extremes, score range). null: 32 in `global`, 2
         * in `per_instance`.
         */
        max_per_step: z.number().int().min(0).max(1_000).nullable().default(null),
        /**
         * Rollouts a cheap check marks suspicious analysed on top of `max_per_step`. null: as many as `max_per_step`.
         */
        max_suspicious_per_step: z.number().int().min(0).max(1_000).nullable().default(null),
      })
      .apply(strict)
      .default({ max_per_step: null, max_suspicious_per_step: null }),
    /** Static memory: the last N batch summaries always shown to the updater. */
    static_memory_steps: z.number().int().min(0).max(50).default(3),
    /** Dynamic memory: documents retrieved per query. */
    dynamic_memory_limit_per_query: z.number().int().min(0).max(20).default(3),
    /** Most memory-search queries the QueryGenerator may ask for one update. */
    max_queries: z.number().int().min(1).max(10).default(4),
    grade_max: z.number().int().min(1).max(100).default(10),
    /**
     * What the scorer writes per criterion besides its grade: `none` (the default: a reason is ~20 decoded tokens per
     * criterion per score, read only for the few rollouts analysed each step, which ask the scorer again with reasons)
     * or `short` (one short sentence per criterion on every score).
     */
    reasons: z.enum(['none', 'short']).default('none'),
    /**
     * How the scorer judges a plain answer: `grades` (the default: one call grades every criterion 0..grade_max) or
     * `verdicts` (one call per criterion asks Yes or No, its grade the judge's probability of Yes from the server's
     * `top_logprobs`; a server without them gives Yes 1, No 0). Verdicts cost one call per criterion, mostly a prefix
     * the server has cached, and keep a small judge's signal that its grades lose (BENCHMARKS.md, gsm8k). A trajectory
     * (`rollout.messages`) is always graded in one call. Each verdict counts against `budgets.judge_calls_per_rollout`.
     */
    judging: z.enum(['grades', 'verdicts']).default('grades'),
    locale: z.enum(['en', 'zh']).default('en'),
    agents: z
      .object({
        default: AgentSettings.default(AgentSettings.parse({})),
        ...(Object.fromEntries(AGENT_ROLES.map((role) => [role, PartialAgentSettings.optional()])) as {
          [K in AgentRole]: z.ZodOptional<typeof PartialAgentSettings>
        }),
      })
      .apply(strict)
      .default({ default: AgentSettings.parse({}) }),
    /** Highest number of LLM calls in flight at once, all roles together, within one Worker invocation. */
    max_concurrent_llm_calls: z.number().int().min(1).max(6).default(6),
    /** The longest `/rubric_status/wait` may hold a request. */
    max_wait_s: z.number().int().min(1).max(900).default(300),
    /**
     * Replacements for bundled prompt templates, keyed `<locale>/<name>` (e.g. `en/scorer.system`); they may use only
     * the bundled template's placeholders.
     */
    prompts: z.record(z.string(), z.string().min(1).max(50_000)).default({}),
    /** `open` lets requests without a token use the run; otherwise a run token or the admin token is required. */
    access: z.enum(['token', 'open']).default('token'),
    /** Requests per caller: `standard` (the RATE_LIMITER binding), `high` (RATE_LIMITER_HIGH) or `off` (no limit). */
    rate_limit: z.enum(['standard', 'high', 'off']).default('standard'),
    /**
     * What the run's token can make the server spend, whatever it sends: each budget refuses with a 429 that names its
     * key (docs/security.md, "What one run token can cost").
     */
    budgets: RunBudgets.default(RunBudgets.parse({})),
  })
  .apply(strict)
  .superRefine((config, ctx) => {
    for (const [key, template] of Object.entries(config.prompts)) {
      const bundled = bundledTemplate(key)
      if (bundled === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['prompts', key],
          message: `no prompt "${key}"; one of ${PROMPT_KEYS.join(', ')}`,
        })
        continue
      }
      const allowed = new Set(placeholdersOf(bundled))
      const unknown = placeholdersOf(template).filter((name) => !allowed.has(name))
      if (unknown.length > 0)
        ctx.addIssue({
          code: 'custom',
          path: ['prompts', key],
          message:
            `unknown placeholders ${unknown.map((n) => `{{${n}}}`).join(', ')}; "${key}" offers ` +
            `${[...allowed].map((n) => `{{${n}}}`).join(', ')}`,
        })
      const dropped = [...allowed].filter((name) => name.endsWith('boundary') && !template.includes(`{{${name}}}`))
      if (dropped.length > 0)
        ctx.addIssue({
          code: 'custom',
          path: ['prompts', key],
          message:
            `"${key}" must keep the ${dropped.map((n) => `{{${n}}}`).join(', ')} data markers around ` +
            'untrusted text',
        })
    }
    const seeds = [config.anchor_rubrics, config.adaptive_rubrics, ...Object.values(config.instance_rubrics)]
    if (
      config.anchor_rubrics.length + config.adaptive_rubrics.length === 0 &&
      Object.keys(config.instance_rubrics).length === 0
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['anchor_rubrics'],
        message: 'a run needs at least one anchor or adaptive rubric',
      })
    }
    if (config.judging === 'verdicts') {
      const criteria = Math.max(
        config.anchor_rubrics.length + config.adaptive_rubrics.length,
        ...Object.values(config.instance_rubrics).map((list) => config.anchor_rubrics.length + list.length),
      )
      if (criteria > config.budgets.judge_calls_per_rollout)
        ctx.addIssue({
          code: 'custom',
          path: ['budgets', 'judge_calls_per_rollout'],
          message:
            `judging: verdicts asks each criterion in its own call: ${criteria} criteria need ` +
            `budgets.judge_calls_per_rollout of at least ${criteria} (it is ${config.budgets.judge_calls_per_rollout})`,
        })
    }
    for (const list of seeds) {
      const ids = list.map((seed) => seed.id).filter((id): id is string => id !== undefined)
      const repeated = ids.find((id, index) => ids.indexOf(id) !== index)
      if (repeated)
        ctx.addIssue({ code: 'custom', path: ['anchor_rubrics'], message: `rubric id "${repeated}" is used twice` })
    }
  })
export type RunConfig = z.infer<typeof RunConfig>
export type RunConfigInput = z.input<typeof RunConfig>

/**
 * The ledger shards of each instance of a run (`ledger_shards`, or its mode's default).
 * @example ledgerShardsOf(RunConfig.parse({ anchor_rubrics: [{ text: 'Correct.' }] })) // 8
 */
export function ledgerShardsOf(config: RunConfig): number {
  return config.ledger_shards ?? (config.rubrics_mode === 'global' ? 8 : 1)
}

/**
 * The analysis budget of one instance's step (`analysis`, or its mode's defaults).
 * @example analysisBudgetOf(config) // { coverage: 32, suspicious: 32 }
 */
export function analysisBudgetOf(config: RunConfig): { coverage: number; suspicious: number } {
  const coverage = config.analysis.max_per_step ?? (config.rubrics_mode === 'global' ? 32 : 2)
  return { coverage, suspicious: config.analysis.max_suspicious_per_step ?? coverage }
}

/**
 * The body of `POST /runs`.
 * @example CreateRunRequest.parse({ run_id: 'grpo-0412', config: { mode: 'sync', anchor_rubrics: [{ text: 'Correct.' }]
 *   } })
 */
export const CreateRunRequest = z
  .object({
    run_id: z
      .string()
      .min(1)
      .max(64)
      .regex(/^[a-z0-9][a-z0-9_-]*$/, 'lower-case letters, digits, _ and - only')
      .optional(),
    config: RunConfig,
  })
  .apply(strict)
export type CreateRunRequest = z.infer<typeof CreateRunRequest>

/**
 * The settings one role actually uses: the defaults, then `agents.default`, then the role's own overrides.
 * @example agentSettingsFor(config, 'scorer').model
 */
export function agentSettingsFor(config: RunConfig, role: AgentRole): AgentSettings {
  let byRole = settingsMemo.get(config)
  if (!byRole) settingsMemo.set(config, (byRole = new Map()))
  let settings = byRole.get(role)
  if (!settings)
    byRole.set(
      role,
      (settings = AgentSettings.parse({ ...config.agents.default, ...stripUndefined(config.agents[role] ?? {}) })),
    )
  return settings
}

/** Run configs are parsed once and never changed, so each role's settings are worked out once per config. */
const settingsMemo = new WeakMap<RunConfig, Map<AgentRole, AgentSettings>>()

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>
}
