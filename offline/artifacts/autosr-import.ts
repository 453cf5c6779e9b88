/**
 * `reward-harness import --from autosr`: an autosr RM artifact (reference autosr.md §1.6) becomes this project's
 * content-addressed RM artifact (src/schemas/artifact.ts), with every problem named by its field and the file refused
 * (ArtifactInputError → exit 2) when there is any.
 *
 * - Rubrics: every prompt's rubric, criterion for criterion (ids, texts, weights, types, check points, examples). A
 *   criterion type this project does not know becomes null, the original kept in the rubric's metadata
 *   (`autosr_criterion_types`), as this project's own initializer does with unknown types. autosr's `__default__`
 *   prompt id becomes this project's `__default__` rubric, which also serves prompts the artifact has no rubric for.
 * - Votes and N/A: this project's artifact has one `num_votes` and one `allow_na`; rubrics that disagree are refused.
 * - Grade scale: autosr's verifier grades 0–5, so `grade_max` is 5, unless the rubrics say they were written by
 *   `export --format autosr` (`metadata.reward_harness.grade_max`): then the scale they were searched on comes back.
 * - Runtime: see autosr-runtime.ts. An empty `runtime_snapshot` is refused, as autosr's RM server refuses it.
 * - Provenance: source run and session ids, dataset and config hashes as autosr recorded them; `settings_hash` is the
 *   sha256 of the runtime snapshot's canonical JSON (API keys removed), `search_output_sha256` and
 *   `imported.file_sha256` the sha256 of the imported file, `imported.artifact_id` autosr's artifact id.
 * - Credentials: any field whose name says key, token, secret, password, authorization, cookie or credential, any
 *   value shaped like a bearer token or a provider key, and any URL's user-info and credential query values (see
 *   src/credentials) are removed before anything is read, so they are never copied and never printed; the report
 *   lists where one was found. The recorded `base_url` keeps scheme, host, port and path only.
 */
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { withoutCredentials } from '../../src/credentials/index.ts'
import { canonicalJson, sha256Hex } from '../../src/hash/index.ts'
import {
  ARTIFACT_SCHEMA_VERSION,
  artifactId,
  DEFAULT_RUBRIC_KEY,
  RM_API_VERSION,
  RmArtifact,
  RmArtifactBody,
  LibraryArtifactBody,
  AnyRmArtifact,
  type ArtifactProvenance,
} from '../../src/schemas/artifact.ts'
import { AutosrRmArtifact, looksLikeAutosrArtifact } from '../../src/schemas/autosr-artifact.ts'
import type { SearchRubric } from '../../src/schemas/search-rubric.ts'
import { writeFileAtomic } from '../search/atomic.ts'
import { rubricsFromAutosr } from './autosr-rubrics.ts'
import { runtimeFromSnapshot } from './autosr-runtime.ts'
import { ArtifactInputError, checkJsonSafety } from './errors.ts'
import { formatArtifact, readArtifactFile } from './export.ts'
import { issuesOf, pathText } from './issues.ts'

/** An autosr artifact converted, and what the conversion had to decide. */
export interface ImportedArtifact {
  artifact: RmArtifact
  /** The artifact file's exact text (what `import` writes). */
  text: string
  /** autosr's own artifact id. */
  source_artifact_id: string
  /** Where credentials were found and removed (paths only, never values). */
  dropped_keys: string[]
  /** Decisions worth knowing (a default model, an unknown criterion type, the `__default__` rubric). */
  notes: string[]
}

/**
 * Converts the text of an autosr RM artifact file; `name` names the file in messages. Throws ArtifactInputError
 * listing every problem, each naming its field (e.g. `rubric.p2.grading_protocol.num_votes: …`).
 * @example const { artifact } = await importAutosrArtifact(await readFile('rm_autosr.json', 'utf8'), { name: 'f' })
 */
async function importAutosrArtifact(text: string, options: { name: string }): Promise<ImportedArtifact> {
  const { name } = options
  const { value: document, dropped } = withoutCredentials(parseJson(text, name))
  const parsed = AutosrRmArtifact.safeParse(document)
  if (!parsed.success)
    throw refused(
      name,
      issuesOf(parsed.error, (path) => pathText(path)),
    )
  const autosr = parsed.data
  const issues: string[] = []
  const notes: string[] = []
  const snapshot = autosr.runtime_snapshot
  if (snapshot === undefined)
    issues.push(
      "runtime_snapshot: empty, so nothing says which judge grades, with which seed and extraction (autosr's RM " +
        'server refuses such an artifact too): export it again from a search output that has its run manifest',
    )
  const runtime = snapshot === undefined ? undefined : runtimeFromSnapshot(snapshot)
  issues.push(...(runtime?.issues ?? []))
  notes.push(...(runtime?.notes ?? []))
  const rubrics = rubricsFromAutosr(autosr.rubric)
  issues.push(...rubrics.issues)
  notes.push(...rubrics.notes)
  if (issues.length > 0 || runtime?.runtime === undefined || rubrics.value === undefined) throw refused(name, issues)

  const body = RmArtifactBody.safeParse({
    schema_version: ARTIFACT_SCHEMA_VERSION,
    kind: 'rubric',
    created_at_utc: autosr.created_at_utc,
    provenance: await provenanceOf(autosr, snapshot, text),
    rubrics: rubrics.value.rubrics,
    runtime: { ...runtime.runtime, ...rubrics.value.protocol },
    scoring_policy: { score: 'weighted_mean_of_grades', normalization: { method: 'identity', range: [0, 1] } },
    compatibility: { artifact_type: 'rm', min_rm_api_version: RM_API_VERSION },
  })
  if (!body.success)
    throw refused(
      name,
      issuesOf(body.error, (path) => `(converted) ${pathText(path)}`),
    )
  const artifact = RmArtifact.parse({ artifact_id: await artifactId(body.data), ...body.data })
  return {
    artifact,
    text: formatArtifact(artifact),
    source_artifact_id: autosr.artifact_id,
    dropped_keys: dropped,
    notes: [...notes, ...defaultRubricNote(artifact.rubrics)],
  }
}

/**
 * Reads an autosr artifact file, converts it and writes this project's artifact atomically to `out`.
 * @example const { artifact } = await importAutosrFile({ file: 'rm_autosr.json', out: 'out/rm.json' })
 */
export async function importAutosrFile(options: { file: string; out: string }): Promise<ImportedArtifact> {
  const imported = await importAutosrArtifact(await readText(options.file), { name: options.file })
  await writeFileAtomic(options.out, imported.text)
  return imported
}

/**
 * An artifact file as deploy uploads it: this project's artifact, checked (schema and content address), without the
 * credentials a hand edit may have left in it (then under the id of what is left); or an autosr artifact, converted
 * exactly as `import --from autosr` converts it. `dropped_credentials` lists where credentials were (never their
 * values).
 * @example const { artifact, converted_from } = await readDeployableArtifact('rm_autosr.json')
 */
export async function readDeployableArtifact(path: string): Promise<{
  artifact: AnyRmArtifact
  dropped_credentials: string[]
  converted_from?: { format: 'autosr'; artifact_id: string }
}> {
  let text: string
  let document: unknown
  try {
    text = await readFile(path, 'utf8')
    document = JSON.parse(stripBom(text))
  } catch {
    // Unreadable or not JSON: this project's reader says so in its own words.
    return withoutArtifactCredentials(await readArtifactFile(path))
  }
  if (!looksLikeAutosrArtifact(document)) return withoutArtifactCredentials(await readArtifactFile(path))
  const imported = await importAutosrArtifact(text, { name: path })
  return {
    artifact: imported.artifact,
    dropped_credentials: imported.dropped_keys,
    converted_from: { format: 'autosr', artifact_id: imported.source_artifact_id },
  }
}

/** A checked artifact without its credentials, re-addressed when any went (its content changed). */
async function withoutArtifactCredentials(
  artifact: AnyRmArtifact,
): Promise<{ artifact: AnyRmArtifact; dropped_credentials: string[] }> {
  const { artifact_id: _id, ...body } = artifact
  const { value, dropped } = withoutCredentials(body)
  if (dropped.length === 0) return { artifact, dropped_credentials: [] }
  const cleanBody = (body.kind === 'library' ? LibraryArtifactBody : RmArtifactBody).parse(value)
  const artifact_id = await artifactId(cleanBody)
  return { artifact: AnyRmArtifact.parse({ artifact_id, ...cleanBody }), dropped_credentials: dropped }
}

async function provenanceOf(
  autosr: AutosrRmArtifact,
  snapshot: AutosrRmArtifact['runtime_snapshot'],
  text: string,
): Promise<ArtifactProvenance> {
  const fileSha256 = createHash('sha256').update(text, 'utf8').digest('hex')
  return {
    source_run_id: autosr.source_run_id,
    source_session_id: autosr.source_session_id,
    dataset_sha256: autosr.dataset_hash,
    config_hash: autosr.config_hash,
    settings_hash: await sha256Hex(canonicalJson(snapshot ?? {})),
    search_output_sha256: fileSha256,
    imported: { format: 'autosr', artifact_id: autosr.artifact_id, file_sha256: fileSha256 },
  }
}

function defaultRubricNote(rubrics: Record<string, SearchRubric>): string[] {
  return Object.hasOwn(rubrics, DEFAULT_RUBRIC_KEY)
    ? [
        `rubric.${DEFAULT_RUBRIC_KEY}: autosr served it only for prompt_id "${DEFAULT_RUBRIC_KEY}"; here it also ` +
          'scores every prompt the artifact has no rubric for',
      ]
    : []
}

function refused(name: string, issues: readonly string[]): ArtifactInputError {
  return new ArtifactInputError(
    'invalid_autosr_artifact',
    `refusing to import ${name}: ${issues.length === 1 ? 'a problem' : `${issues.length} problems`} with the autosr ` +
      'artifact',
    issues,
  )
}

function parseJson(text: string, name: string): unknown {
  let document: unknown
  try {
    document = JSON.parse(stripBom(text))
  } catch (error) {
    throw new ArtifactInputError(
      'invalid_json',
      `${name}: not a JSON file (${error instanceof Error ? error.message : String(error)})`,
    )
  }
  if (typeof document !== 'object' || document === null || Array.isArray(document))
    throw new ArtifactInputError('invalid_autosr_artifact', `${name}: expected an autosr RM artifact (a JSON object)`)
  checkJsonSafety(document, name)
  return document
}

async function readText(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8')
  } catch (error) {
    throw new ArtifactInputError(
      'unreadable_file',
      `${file}: cannot read the file (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    )
  }
}

function stripBom(text: string): string {
  return text.startsWith('\uFEFF') ? text.slice(1) : text
}
