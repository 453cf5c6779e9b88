/**
 * `reward-harness export --format autosr`: this project's rubric artifact (built from a search output, or read from an
 * artifact file) written as an autosr RM artifact (reference autosr.md §1.6) that autosr's RM server loads and serves
 * unchanged: every key it requires, non-blank ids and hashes, a complete `runtime_snapshot` with the ten `llm` keys.
 *
 * autosr's server only runs an LLM verifier, so the snapshot must name a judge: `--llm-base-url` (else the endpoint an
 * imported artifact recorded) and `--llm-model` (else the artifact's verifier model, unless it was searched on the
 * mock backend, whose model no judge serves). The grade scales are stated in `scoring_policy.grade_scale` and in every
 * rubric's `metadata.reward_harness`; `__default__` is written as a plain prompt id (autosr has no fallback rubric).
 */
import { readFile } from 'node:fs/promises'
import type { RmArtifact } from '../../src/schemas/artifact.ts'
import { AutosrRmArtifact } from '../../src/schemas/autosr-artifact.ts'
import { writeFileAtomic } from '../search/atomic.ts'
import { AUTOSR_DEFAULT_NOTE, gradeScale, rubricToAutosr } from './autosr-rubrics.ts'
import { snapshotFromRuntime } from './autosr-runtime.ts'
import { ArtifactInputError } from './errors.ts'
import { buildArtifact, readArtifactFile } from './export.ts'
import { issuesOf, pathText } from './issues.ts'

/** The judge autosr's RM server is to call, from the flags (each optional where the artifact names one). */
export interface AutosrJudgeFlags {
  llmBaseUrl?: string
  llmModel?: string
}

/** What `export --format autosr` wrote. */
export interface AutosrExportResult {
  /** The artifact converted (this project's), whose id the autosr artifact keeps. */
  artifact: RmArtifact
  /** The autosr artifact written. */
  autosr: Record<string, unknown>
  out: string
  notes: string[]
}

/**
 * The autosr artifact of one of this project's rubric artifacts, as a JSON document, and its file text.
 * @example const { text } = toAutosrArtifact(artifact, { llmBaseUrl: 'https://api.openai.com/v1', llmModel: 'gpt-4o' })
 */
function toAutosrArtifact(
  artifact: RmArtifact,
  flags: AutosrJudgeFlags,
): { document: Record<string, unknown>; text: string; notes: string[] } {
  const judge = judgeOf(artifact, flags)
  const { runtime, provenance } = artifact
  const document = {
    schema_version: '1.0',
    artifact_id: artifact.artifact_id,
    created_at_utc: artifact.created_at_utc,
    source_session_id: provenance.source_session_id,
    source_run_id: provenance.source_run_id,
    dataset_hash: provenance.dataset_sha256,
    config_hash: provenance.config_hash,
    rubric: Object.fromEntries(
      Object.entries(artifact.rubrics).map(([promptId, rubric]) => [
        promptId,
        rubricToAutosr(rubric, runtime.num_votes),
      ]),
    ),
    scoring_policy: {
      policy_version: '1.0',
      // What autosr writes when it does not know them: this project's objective lives in its run manifest.
      objective: {},
      search: { mode: 'unknown' },
      score_key: 'best_objective_scores',
      score: 'weighted_mean_of_grades',
      grade_scale: gradeScale(runtime.grade_max),
      source: {
        format: 'reward-harness',
        artifact_id: artifact.artifact_id,
        settings_hash: provenance.settings_hash,
        search_output_sha256: provenance.search_output_sha256,
        ...(provenance.imported ? { imported: provenance.imported } : {}),
      },
    },
    normalization: { method: 'identity', score_range: [0, 1] },
    compatibility: { artifact_type: 'rm', min_rm_api_version: '1.0', output_schema: 'reward_score_v1' },
    runtime_snapshot: snapshotFromRuntime(runtime, judge),
  }
  const loaded = AutosrRmArtifact.safeParse(document)
  if (!loaded.success || loaded.data.runtime_snapshot === undefined)
    throw new Error(
      `export --format autosr built an artifact autosr would not load: ${
        loaded.success ? 'runtime_snapshot: empty' : issuesOf(loaded.error, pathText).join('; ')
      }`,
    )
  const notes = Object.hasOwn(artifact.rubrics, '__default__') ? [AUTOSR_DEFAULT_NOTE] : []
  return { document, text: `${JSON.stringify(document, null, 2)}\n`, notes }
}

/**
 * Exports an autosr artifact from a search output (built as `export` builds this project's) or from an artifact file,
 * written atomically to `out`.
 * @example await exportAutosrArtifact({ artifact: 'out/rm.json', out: 'out/rm-autosr.json', llmBaseUrl, llmModel })
 */
export async function exportAutosrArtifact(
  options: AutosrJudgeFlags & {
    searchOutput?: string
    artifact?: string
    out: string
    defaultRubric?: string
    checkDatasetFile?: boolean
  },
): Promise<AutosrExportResult> {
  const artifact = await sourceArtifact(options)
  const { document, text, notes } = toAutosrArtifact(artifact, options)
  await writeFileAtomic(options.out, text)
  return { artifact, autosr: document, out: options.out, notes }
}

async function sourceArtifact(options: {
  searchOutput?: string
  artifact?: string
  defaultRubric?: string
  checkDatasetFile?: boolean
}): Promise<RmArtifact> {
  if (options.artifact !== undefined) {
    const artifact = await readArtifactFile(options.artifact)
    if (artifact.kind !== 'rubric')
      throw new ArtifactInputError(
        'invalid_option',
        `--artifact ${options.artifact}: a library artifact has no rubrics, so autosr cannot serve it`,
      )
    return artifact
  }
  const file = options.searchOutput!
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message
    throw new ArtifactInputError('unreadable_file', `--search-output ${file}: cannot read the file (${reason})`)
  }
  const built = await buildArtifact(text, {
    name: file,
    ...(options.defaultRubric === undefined ? {} : { defaultRubric: options.defaultRubric }),
    ...(options.checkDatasetFile === undefined ? {} : { checkDatasetFile: options.checkDatasetFile }),
  })
  return built.artifact
}

/** The endpoint and model autosr's RM server is to grade with; every missing or bad one is named. */
function judgeOf(artifact: RmArtifact, flags: AutosrJudgeFlags): { base_url: string; model: string } {
  const { runtime } = artifact
  const issues: string[] = []
  const baseUrl = flags.llmBaseUrl ?? runtime.base_url
  if (baseUrl === undefined)
    issues.push(
      "--llm-base-url: required: the artifact names no judge endpoint, and autosr's RM server calls the one in " +
        'runtime_snapshot.llm.base_url (e.g. https://api.openai.com/v1)',
    )
  else if (!/^https?:\/\/[^/\s]+/.test(baseUrl)) issues.push(`--llm-base-url "${baseUrl}": expected an http(s) URL`)
  const model = flags.llmModel?.trim() || (runtime.backend === 'openai' ? runtime.verifier_model : undefined)
  if (model === undefined)
    issues.push(
      `--llm-model: required: the artifact was searched on the mock backend, so its verifier model ` +
        `("${runtime.verifier_model}") is no model a judge serves`,
    )
  if (issues.length > 0 || baseUrl === undefined || model === undefined)
    throw new ArtifactInputError(
      'invalid_option',
      "export --format autosr: autosr's RM server grades with an LLM only, so the artifact must name one",
      issues,
    )
  return { base_url: baseUrl, model }
}
