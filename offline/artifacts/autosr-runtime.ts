/**
 * autosr's `runtime_snapshot` (reference autosr.md §1.6, §3.5, §4.1) and this project's artifact runtime, both ways:
 * the seed, the verifier's content extraction, the judge endpoint and model, and the prompt language.
 *
 * What autosr records and this project has no place for (its client timeout, retries and fail-soft) is dropped on
 * import and written as autosr's defaults on export. What this project records and autosr has no place for
 * (temperature, max_tokens) is set on import as autosr's RM server runs (temperature 0; max_tokens the search CLI's
 * default) and dropped on export.
 */
import type { ArtifactRuntime } from '../../src/schemas/artifact.ts'
import type { AutosrRuntimeSnapshot } from '../../src/schemas/autosr-artifact.ts'
import { type ContentExtraction, PromptExtraction } from '../../src/schemas/extraction.ts'
import { issuesOf, pathText } from './issues.ts'
import { endpointOnly } from '../../src/credentials/index.ts'

/** autosr's RM server runs its verifier at temperature 0 (it does not record the search's). */
const AUTOSR_SERVER_TEMPERATURE = 0
/** autosr sends no max_tokens; this project needs one: the search CLI's default `--max-tokens`. */
const IMPORTED_MAX_TOKENS = 2048
/** autosr's separator for joined extraction segments; this project's `answer` extraction always joins with it. */
const DEFAULT_JOIN = '\n\n'

/**
 * autosr's `LLMBackendConfig()` defaults for the client settings this project does not record: what `export --format
 * autosr` writes for them.
 */
const AUTOSR_CLIENT_DEFAULTS = {
  timeout: 30,
  max_retries: 2,
  retry_backoff_base: 0.5,
  retry_backoff_max: 8,
  retry_jitter: 0.2,
  fail_soft: false,
} as const

/** The runtime of an imported artifact, less what the rubrics decide (grade scale, N/A, votes). */
type ImportedRuntime = Omit<ArtifactRuntime, 'grade_max' | 'allow_na' | 'num_votes'>

/**
 * This project's runtime from an autosr runtime snapshot, or every reason it cannot express it (each naming its
 * `runtime_snapshot.…` field). The backend is `openai` (autosr's RM server only runs an LLM verifier).
 * @example const { runtime, issues } = runtimeFromSnapshot(artifact.runtime_snapshot)
 */
export function runtimeFromSnapshot(snapshot: AutosrRuntimeSnapshot): {
  runtime?: ImportedRuntime
  issues: string[]
  notes: string[]
} {
  const issues: string[] = []
  const notes: string[] = []
  const extraction = extractionFromSnapshot(snapshot, issues)
  const { llm } = snapshot
  const locale = localeOf(llm.prompt_language, issues, notes)
  const baseUrl = llm.base_url.trim()
  if (!isHttpUrl(baseUrl))
    issues.push(`runtime_snapshot.llm.base_url: "${baseUrl}" is not an http(s) URL, so no judge can be reached there`)
  const verifierModel = llm.verifier_model?.trim() ? llm.verifier_model.trim() : llm.default_model.trim()
  if (!llm.verifier_model?.trim())
    notes.push(`runtime_snapshot.llm.verifier_model is not set: the default model ${verifierModel} grades`)
  if (issues.length > 0 || extraction === undefined || locale === undefined) return { issues, notes }
  return {
    runtime: {
      backend: 'openai',
      verifier_model: verifierModel,
      base_url: endpointOnly(baseUrl),
      temperature: AUTOSR_SERVER_TEMPERATURE,
      max_tokens: IMPORTED_MAX_TOKENS,
      seed: snapshot.seed,
      locale,
      extraction,
    },
    issues,
    notes,
  }
}

/** The prompt and candidate extraction of a snapshot, or undefined with the reasons pushed to `issues`. */
function extractionFromSnapshot(snapshot: AutosrRuntimeSnapshot, issues: string[]): ContentExtraction | undefined {
  const place = 'runtime_snapshot.extraction'
  const { strategy, tag_name: tag, pattern, join_separator: join } = snapshot.extraction
  const kind = strategy.trim().toLowerCase()
  let prompt: unknown
  if (kind === 'identity') prompt = { kind: 'identity' }
  else if (kind === 'tag' || kind === 'xml') prompt = { kind: 'tag', tag, join }
  else if (kind === 'regex') {
    if (pattern === null || pattern === '') issues.push(`${place}.pattern: the regex strategy needs a pattern`)
    else prompt = { kind: 'regex', pattern, join }
  } else
    issues.push(
      `${place}.strategy: "${strategy}" is not a prompt extraction this project can express ` +
        '(identity, tag, xml, regex)',
    )
  const parsed = prompt === undefined ? undefined : PromptExtraction.safeParse(prompt)
  if (parsed && !parsed.success)
    issues.push(...issuesOf(parsed.error, (path) => `${place}.${snapshotKey(pathText(path))}`))

  const candidatePlace = 'runtime_snapshot.candidate_extraction'
  const candidate = snapshot.candidate_extraction
  const candidateKind = candidate.strategy.trim().toLowerCase()
  if (candidateKind !== 'answer' && candidateKind !== 'identity')
    issues.push(
      `${candidatePlace}.strategy: "${candidate.strategy}" is not a candidate extraction this project can express ` +
        '(answer, identity)',
    )
  else if (candidateKind === 'answer' && candidate.join_separator !== DEFAULT_JOIN)
    issues.push(
      `${candidatePlace}.join_separator: ${JSON.stringify(candidate.join_separator)}: this project joins <answer> ` +
        `segments with ${JSON.stringify(DEFAULT_JOIN)} only`,
    )
  if (!parsed?.success || (candidateKind !== 'answer' && candidateKind !== 'identity')) return undefined
  return { prompt: parsed.data, candidate: { kind: candidateKind } }
}

/** This project's name of a prompt-extraction field → autosr's. */
function snapshotKey(key: string): string {
  return key === 'tag' ? 'tag_name' : key === 'join' ? 'join_separator' : key
}

/** autosr's prompt language as this project's locale: `en` or `zh`; none means autosr's built-in English prompts. */
function localeOf(language: string | null, issues: string[], notes: string[]): 'en' | 'zh' | undefined {
  if (language === null) {
    notes.push(
      'runtime_snapshot.llm.prompt_language is null (autosr then uses its built-in English prompts): locale en',
    )
    return 'en'
  }
  const locale = language.trim().toLowerCase()
  if (locale === 'en' || locale === 'zh') return locale
  issues.push(
    `runtime_snapshot.llm.prompt_language: "${language}" is not a language this project has verifier prompts for ` +
      '(en, zh)',
  )
  return undefined
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text)
    return url.protocol === 'http:' || url.protocol === 'https:'
  } catch {
    return false
  }
}

/** A complete autosr runtime snapshot, as `export --format autosr` writes it. */
export interface AutosrSnapshotOut {
  seed: number
  extraction: { strategy: string; tag_name: string; pattern: string | null; join_separator: string }
  candidate_extraction: { strategy: string; join_separator: string }
  llm: {
    base_url: string
    timeout: number
    max_retries: number
    retry_backoff_base: number
    retry_backoff_max: number
    retry_jitter: number
    fail_soft: boolean
    default_model: string
    verifier_model: string
    prompt_language: string
  }
}

/**
 * The autosr runtime snapshot of this project's runtime, with the judge (endpoint and model) autosr's RM server is to
 * call; the client settings this project does not record are autosr's defaults.
 * @example snapshotFromRuntime(artifact.runtime, { base_url: 'https://api.openai.com/v1', model: 'gpt-4o-mini' })
 */
export function snapshotFromRuntime(
  runtime: ArtifactRuntime,
  judge: { base_url: string; model: string },
): AutosrSnapshotOut {
  const prompt = runtime.extraction.prompt
  const extraction =
    prompt.kind === 'identity'
      ? { strategy: 'identity', tag_name: 'content', pattern: null, join_separator: DEFAULT_JOIN }
      : prompt.kind === 'tag'
        ? { strategy: 'tag', tag_name: prompt.tag, pattern: null, join_separator: prompt.join }
        : { strategy: 'regex', tag_name: 'content', pattern: prompt.pattern, join_separator: prompt.join }
  return {
    seed: runtime.seed,
    extraction,
    candidate_extraction: { strategy: runtime.extraction.candidate.kind, join_separator: DEFAULT_JOIN },
    llm: {
      base_url: judge.base_url,
      ...AUTOSR_CLIENT_DEFAULTS,
      default_model: judge.model,
      verifier_model: judge.model,
      prompt_language: runtime.locale,
    },
  }
}
