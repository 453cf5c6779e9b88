/**
 * `npm run docs:config` writes docs/configuration.md from the zod schemas of a run's config (src/schemas): every key
 * with its type, default and limits as the schema says them, and its meaning from {@link MEANINGS}. A key the schema
 * has and MEANINGS lacks (or the reverse) stops the generator, so the page cannot fall behind the schema;
 * `--check` (run by `npm run docs:check`) fails when the file on disk is not what the schemas give now.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { z } from 'zod'
import { RubricSeed } from '../../src/schemas/rubric.ts'
import { AGENT_ROLES, AgentSettings, CreateRunRequest, RunConfig } from '../../src/schemas/run-config.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const OUTPUT = 'docs/configuration.md'
const WIDTH = 116

/** A JSON Schema node as zod's `toJSONSchema` writes it (the parts the page reads). */
interface JsonNode {
  type?: string | string[]
  enum?: unknown[]
  default?: unknown
  anyOf?: JsonNode[]
  properties?: Record<string, JsonNode>
  additionalProperties?: JsonNode | boolean
  items?: JsonNode
  minimum?: number
  maximum?: number
  exclusiveMinimum?: number
  minLength?: number
  maxLength?: number
  maxItems?: number
  pattern?: string
  format?: string
}

/** What each key means, keyed by its path in the section's schema; the schema gives type, default and limits. */
const MEANINGS: Record<string, Record<string, string>> = {
  run: {
    $comment: 'Free text for the people who read the file (JSON has no comments); the harness ignores it.',
    mode:
      '`async`: `/score` answers at once. `sync`: `/score` waits until its instance’s update of the step is done and ' +
      're-scores on the rubrics it left; that final score is what the ledger, a retry and the archive hold.',
    rubrics_mode:
      '`global`: one rubric instance per run. `per_instance`: one per prompt; the instance id is a hash of ' +
      '`rollout.input` unless the request sends `instance_id`.',
    anchor_rubrics: 'Rubrics (see [Rubric](#rubric)) evolution never changes.',
    adaptive_rubrics: 'The initial evolvable rubrics of every instance.',
    instance_rubrics: '`{instance_id: [rubric…]}`: seed adaptive rubrics for named instances (`per_instance` mode).',
    rollouts_per_step:
      'Close a step after this many distinct rollouts; `null`: on `POST /complete`, on step advance or after the ' +
      'idle gap (the next two keys).',
    close_on_step_advance:
      'Close the collecting step when a rollout’s `metadata.current_step` is past the highest the step holds.',
    close_after_idle_s:
      'Close the collecting step after this many seconds without a new rollout (`null`: never), counted from when a ' +
      'rollout sent just after the last one would have been judged: the gap adds the longest a rollout of this step ' +
      'or the one before took from its request to its record (at most 600 s), so a slow judge does not push a ' +
      'rollout it is still judging into the next step. What closes the steps of trainers that send neither ' +
      '`/complete` nor a step (OpenRLHF, slime, verl).',
    rubric_update_frequency: 'Rubrics are updated on steps 0, N, 2N, …',
    retire_after_steps:
      'An adaptive criterion whose within-group spread stays below `retire_below_spread` for this many consecutive ' +
      'closed steps is retired in a new version that says why; anchors never are. `null`: never.',
    retire_below_spread:
      'The within-group spread (pooled standard deviation of a criterion’s grades among responses to one prompt, ' +
      '0–1 scale) below which a step shows the criterion no longer separates responses.',
    group_scoring:
      '`relative`: `/score/group` and `/compat/openrlhf` items sharing a prompt are judged listwise, one call per ' +
      'group in a seeded order under opaque labels; a failed group reply falls back to pointwise. `pointwise`: ' +
      'every response on its own.',
    relative_group_max_chars: 'Characters of responses judged in one relative call; a larger group is split.',
    'audit.sample':
      'Share of each closed step’s scores re-judged by a second model (`agents.auditor`, with the scorer’s prompt); ' +
      'the step’s mean |judge − auditor| and Spearman correlation appear in `/rubric_status` and the dashboard. ' +
      '0: no audit.',
    max_active_rubrics:
      'Most adaptive criteria in force after an update; above it the least discriminating are retired. `null`: no cap.',
    chunk_size: 'Analyses summarised per chunk when a step is large (then consolidated by the MetaSummarizer).',
    ledger_shards:
      'Durable Objects each instance’s step ledger is spread over, by a hash of the rollout id (one takes about ' +
      '1,000 requests/s). `null`: 8 in `global` mode, 1 in `per_instance` mode.',
    ledger_retention_steps:
      'Later updates a closed step’s ledger rows survive before they are deleted (aggregates stay).',
    archive:
      'Write every scored rollout to the R2 bucket `ARCHIVE` as NDJSON before its step is deleted, for ' +
      '`reward-harness distill` ([lineage.md](lineage.md#distil-a-classifier-rm-from-a-runs-scores)).',
    'analysis.max_per_step':
      'Rollouts of one instance analysed per step for coverage (each group’s best and worst, then a spread over the ' +
      'score range). `null`: 32 in `global` mode, 2 in `per_instance` mode.',
    'analysis.max_suspicious_per_step':
      'Rollouts a cheap check marks suspicious (injection patterns, short answers with high scores, templated ' +
      'answers) analysed on top of `max_per_step`. `null`: as many as `max_per_step`.',
    static_memory_steps: 'The last N step summaries always shown to the updater.',
    dynamic_memory_limit_per_query: 'Documents retrieved per memory-search query.',
    max_queries: 'Most queries the QueryGenerator may ask per update.',
    grade_max: 'The grade scale: every criterion gets an integer 0..`grade_max`.',
    reasons:
      'What the scorer writes per criterion: `none` (a grade alone) or `short` (a reason sentence too). Reasons are ' +
      'most of a judgement’s reply tokens and are read only for the few rollouts a step analyses, which ask again ' +
      'with reasons; see [judge-efficiency.md](judge-efficiency.md).',
    judging:
      'How the scorer judges a plain answer: `grades` (one call grades every criterion 0..`grade_max`) or ' +
      '`verdicts` (one call per criterion asks Yes or No; the grade is the judge’s probability of Yes from the ' +
      'server’s `top_logprobs`, Yes 1 / No 0 from a server without them; the reward reads the probability ' +
      'unrounded). ' +
      'Verdicts cost a call per criterion, mostly a prefix the server has cached, and each counts against ' +
      '`budgets.judge_calls_per_rollout`, which must cover the criteria. A small judge keeps its signal as verdicts ' +
      'where its grades lose it (Qwen2.5-Coder-1.5B on gsm8k through `/score`: 95 % against 55 %, BENCHMARKS.md). A ' +
      'trajectory is graded in one call. Runs on `npm start -- --judge local` judge by verdicts unless they say.',
    locale: 'Prompt locale (`prompts/<locale>/`).',
    'agents.default':
      'The model settings every role starts from ([Agent settings](#agent-settings)); the default is the mock.',
    'agents.<role>': `One role’s overrides of \`agents.default\`, any subset of its keys. Roles: ${AGENT_ROLES.map(
      (role) => `\`${role}\``,
    ).join(', ')}.`,
    max_concurrent_llm_calls:
      'LLM calls in flight at once, all roles together, per Worker invocation (Workers allow 6 open connections).',
    max_wait_s: 'The longest `/rubric_status/wait` or a sync `/score` may hold a request.',
    prompts:
      'A run’s own prompt templates keyed `<locale>/<name>` (e.g. `en/scorer.system`; names are the files in ' +
      '`prompts/en/`); an override may use only the bundled template’s placeholders and must keep `{{boundary}}`.',
    access: '`open` lets requests without a token use the run; `token`: a run token or the admin token is required.',
    rate_limit:
      'Requests per caller: `standard` (the `RATE_LIMITER` binding, 10,000 per 10 s as shipped), `high` ' +
      '(`RATE_LIMITER_HIGH`, 100,000 per 10 s) or `off`. Over it: 429 `rate_limited` with `Retry-After`.',
    'budgets.instances_per_step':
      'Distinct instances one step may touch (`per_instance` mode; each costs an update of its own when the step ' +
      'closes). A rollout of one more is refused with 429 `instance_budget_exceeded` until the step closes; the ' +
      'step’s own instances go on. Raise it for steps of more prompts.',
    'budgets.updates_per_window':
      'Step updates the run may start within `budgets.update_window_s`. Past it `POST /complete` answers 429 ' +
      '`update_budget_exceeded` with `Retry-After` and the step goes on collecting; a step closed by count, a later ' +
      'trainer step or the idle gap closes with its update skipped (no LLM call; `/rubric_status` says ' +
      '`update_skipped`), its rollouts and scores kept.',
    'budgets.update_window_s': 'The sliding window of `budgets.updates_per_window`, in seconds.',
    'budgets.judge_calls_per_rollout':
      'LLM calls one request may spend judging one rollout, every attempt counted: retries, a reply cut at ' +
      '`max_tokens` asked again, a re-judge on rubrics that moved, a sync re-score, a relative group’s call. Spent ' +
      'without a judgement: 429 `judge_budget_exceeded`; a scorer’s `max_attempts` above it is cut to it. What one ' +
      'token can cost in all: [security.md](security.md#what-one-run-token-can-cost).',
    'budgets.memory_searches_per_hour':
      'Memory searches (`GET /memory?q=`, the dashboard’s search) the run’s tokens may make per clock hour, each one ' +
      'embedding its query; a text searched lately reuses its vector and spends nothing, and the admin is not ' +
      'counted. Past it: 429 `memory_search_budget_exceeded` with `Retry-After` (the hour’s end); listing memory ' +
      'without `q` goes on.',
  },
  rubric: {
    id: 'Stable id; filled in when absent.',
    text: 'The criterion, as the judge reads it.',
    weight: 'Its weight in the score.',
    kind:
      '`penalty`: the judge grades how much the response does the bad thing the text names, and the grade lowers ' +
      'the score ([the formula](api.md#how-a-score-is-computed)); absent or `criterion`: graded for how well it is ' +
      'met.',
    metadata: 'Flat key → string, number, boolean or null; kept with the rubric.',
  },
  agent: {
    backend: '`auto` = `openai` when `base_url` is set, else `mock`.',
    model: 'The model name sent to the server (the mock’s own name by default).',
    base_url:
      'Any OpenAI-compatible server (OpenAI, vLLM, Ollama, OpenRouter), ending in `/v1`. No credential in it: a URL ' +
      'with user-info (`u:p@`), a credential query value (`key`, `api_key`, `token`, `access_token`, `password`, ' +
      '`pwd`, `private`, `secret`…) or a key or `rh_` token anywhere in it is refused (400 naming the field); the ' +
      'key goes in `api_key_env`.',
    api_key_env:
      'The *name* of the secret holding the API key (keys never live in config: a run config, a deployment’s `llm` ' +
      'or a lineage manifest with a literal credential is refused naming the field); it must be listed in the var ' +
      '`JUDGE_KEY_NAMES`.',
    headers:
      'Headers sent with every call: a literal, or `{"secret": NAME}` under the same rule as `api_key_env` (e.g. ' +
      'Cloudflare Access service-token headers, [deploy.md](deploy.md#8-a-judge-the-worker-can-reach)). A header ' +
      'whose name says key, token, secret, password, auth or cookie (`x-api-key`, `CF-Access-Client-Secret`) must ' +
      'be `{"secret": NAME}`; a literal one is refused. Configs stored before this rule load with such values ' +
      'redacted (so they are not sent), said once in the log.',
    temperature: 'Sampling temperature.',
    max_tokens:
      'Most tokens a reply may take; a reply cut there is refused, never repaired into a grade. Unset: each call ' +
      'asks for what its reply needs (a judge from its rubric count); set it for a model that thinks first.',
    structured_output:
      '`json_schema` when the endpoint enforces a JSON schema on replies (vLLM, SGLang, OpenAI): judges send the ' +
      'exact schema of their reply (rubric ids, the grade range), so no reply needs a repair call. ' +
      '`json_object_schema` sends it as `{"type": "json_object", "schema": …}` (llama-cpp-python, whose refusal of ' +
      '`json_schema` also switches to it). `json_object` works with every OpenAI-compatible server.',
    seed: 'Sent to servers that take a seed.',
    timeout_ms: 'Per attempt.',
    max_attempts: 'Attempts per call (retries honour `Retry-After`; every attempt is counted in `/llm_calls`).',
    concurrency: 'This role’s calls in flight at once within one Worker invocation.',
  },
  create: {
    run_id: 'The new run’s id (generated when absent).',
  },
}

/** A judge for the scorer role, written out once: what most runs change first. */
const EXAMPLE = [
  '## Example: a vLLM judge with its key in a secret',
  '',
  '```json',
  '{"agents": {"scorer": {"backend": "openai", "base_url": "https://judge.example.com/v1", "model": "Qwen/Qwen3-8B",',
  '                       "api_key_env": "VLLM_KEY"}}}',
  '```',
  '',
  ...wrap(
    'then `wrangler secret put VLLM_KEY --env production` (or a `VLLM_KEY=…` line in `.dev.vars` locally), with ' +
      '`VLLM_KEY` listed in the var `JUDGE_KEY_NAMES`. A Worker reaches public HTTPS hosts only, so a GPU server ' +
      'on a ' +
      'private name needs a Tunnel ([deploy.md](deploy.md#8-a-judge-the-worker-can-reach)).',
    '',
  ),
  '',
]

/** One documented key: its path and what the schema says of it. */
interface KeyDoc {
  path: string
  schema: JsonNode
}

/**
 * The keys of an object schema, nested objects flattened with `.` (maps and arrays stay one key). `agents` is one
 * key for its defaults and one for all roles, which share one shape (documented under Agent settings).
 */
function keysOf(node: JsonNode, prefix = ''): KeyDoc[] {
  return Object.entries(node.properties ?? {}).flatMap(([name, child]) => {
    const path = `${prefix}${name}`
    if (path === 'agents')
      return [
        { path: 'agents.default', schema: child.properties!.default! },
        { path: 'agents.<role>', schema: { type: 'object' } },
      ]
    return child.properties && !child.additionalProperties ? keysOf(child, `${path}.`) : [{ path, schema: child }]
  })
}

/**
 * The type and limits of a schema node in words, e.g. `integer 1–86400 or null`.
 * @example typeOf({ type: 'integer', minimum: 1, maximum: 50 }) // 'integer 1–50'
 */
export function typeOf(node: JsonNode): string {
  if (node.anyOf) return node.anyOf.map(typeOf).join(' or ')
  if (node.enum) return node.enum.map((value) => `\`${String(value)}\``).join(' │ ')
  const type = Array.isArray(node.type) ? node.type.join(' │ ') : (node.type ?? 'any')
  if (type === 'integer' || type === 'number') {
    const above = node.exclusiveMinimum
    const low =
      node.minimum !== undefined && node.minimum > Number.MIN_SAFE_INTEGER
        ? node.minimum
        : above !== undefined && type === 'integer'
          ? above + 1
          : undefined
    const high = node.maximum === undefined || node.maximum >= Number.MAX_SAFE_INTEGER ? undefined : node.maximum
    if (low === undefined)
      return `${type}${above === undefined ? '' : ` > ${above}`}${high === undefined ? '' : `, at most ${high}`}`
    return `${type} ${low}${high === undefined ? ' or more' : `–${high}`}`
  }
  if (type === 'string') {
    const limits = [
      node.format === 'uri' ? 'an http(s) URL' : undefined,
      node.maxLength === undefined ? undefined : `${node.minLength ?? 0}–${node.maxLength} chars`,
      node.pattern ? `matching \`${node.pattern}\`` : undefined,
    ].filter(Boolean)
    return ['string', ...limits].join(', ')
  }
  if (type === 'array') return `list${node.maxItems === undefined ? '' : ` of at most ${node.maxItems}`}`
  if (type === 'object') return node.additionalProperties ? 'map' : 'object'
  return type
}

function defaultOf(node: JsonNode): string {
  if (node.default === undefined) return 'none'
  return `\`${JSON.stringify(node.default)}\``
}

/** Words wrapped to {@link WIDTH} columns, continuation lines indented by `indent` (two spaces in a list item). */
function wrap(text: string, indent = '  '): string[] {
  const lines: string[] = []
  let line = ''
  for (const word of text.split(' ')) {
    if (line && line.length + word.length + 1 > WIDTH) {
      lines.push(line)
      line = `${indent}${word}`
    } else line = line ? `${line} ${word}` : word
  }
  return [...lines, line]
}

function section(name: string, title: string, intro: string, node: JsonNode): string[] {
  const meanings = MEANINGS[name]!
  const keys = keysOf(node)
  const missing = keys.filter((key) => !(key.path in meanings)).map((key) => key.path)
  const stale = Object.keys(meanings).filter((path) => !keys.some((key) => key.path === path))
  if (missing.length > 0 || stale.length > 0)
    throw new Error(
      `config-docs: ${name}: ${missing.length ? `no meaning for ${missing.join(', ')}` : ''}` +
        `${stale.length ? ` meanings for keys the schema lacks: ${stale.join(', ')}` : ''} (add them to MEANINGS)`,
    )
  return [
    `## ${title}`,
    '',
    ...wrap(intro, ''),
    '',
    ...keys.flatMap((key) =>
      wrap(`- **\`${key.path}\`**: ${typeOf(key.schema)}; default ${defaultOf(key.schema)}. ${meanings[key.path]}`),
    ),
    '',
  ]
}

/**
 * The text of docs/configuration.md as the schemas give it now.
 * @example writeFileSync('docs/configuration.md', renderConfigDocs())
 */
export function renderConfigDocs(): string {
  const schema = (type: z.ZodType) => z.toJSONSchema(type, { io: 'input', unrepresentable: 'any' }) as JsonNode
  return [
    '# Configuration reference',
    '',
    '<!-- Generated by `npm run docs:config` from src/schemas (run-config.ts, rubric.ts); do not edit by hand. -->',
    '',
    ...wrap(
      'A run’s config is the body of `POST /runs` (`{run_id?, config}`) and, for the default run, ' +
        '`config/default-run.json`. Every key is optional except that a run needs at least one anchor or adaptive ' +
        'rubric; a value out of range is a 400 `invalid_request` naming the field. Limits are inclusive.',
      '',
    ),
    '',
    ...wrap(
      'Unknown keys are refused, at every depth, wherever a person writes a configuration (a run config, a ' +
        'deployment’s `llm`, an `--online-run` file, an endpoints file, a search config): a 400 `invalid_request` ' +
        'or exit 2 naming the key and the nearest known one (`unknown key "rollout_per_step" (did you mean ' +
        'rollouts_per_step?)`). What the harness stored itself (a run config in D1 from an earlier version) loads ' +
        'with the keys this version does not know dropped. A `$comment` string is allowed and ignored.',
      '',
    ),
    '',
    ...section('run', 'Run config', 'The keys of `config`; nested objects are written with `.`.', schema(RunConfig)),
    ...section(
      'rubric',
      'Rubric',
      'One entry of `anchor_rubrics`, `adaptive_rubrics` or `instance_rubrics`.',
      schema(RubricSeed),
    ),
    ...section(
      'agent',
      'Agent settings',
      'The keys of `agents.default` and of each `agents.<role>`: a role uses the defaults below, then ' +
        '`agents.default`, then its own keys.',
      schema(AgentSettings),
    ),
    ...section(
      'create',
      'POST /runs',
      'The request body that creates a run.',
      schema(z.object({ run_id: CreateRunRequest.shape.run_id })),
    ),
    ...EXAMPLE,
  ].join('\n')
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const path = `${ROOT}${OUTPUT}`
  const text = renderConfigDocs()
  if (process.argv.includes('--check')) {
    if (readFileSync(path, 'utf8') !== text) {
      console.error(`${OUTPUT} is not what the schemas give now: run npm run docs:config and commit it`)
      process.exit(1)
    }
  } else writeFileSync(path, text)
}
