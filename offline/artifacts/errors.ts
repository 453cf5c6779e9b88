/**
 * The one error of the artifact tools: an input that cannot become (or is not) a valid RM artifact. The CLI turns
 * it into exit code 2, with every problem listed.
 */
import { jsonHazard } from '../../src/json-hazard/index.ts'
import { UsageError } from '../../src/usage-error/index.ts'

/** What went wrong, as a stable code a script can branch on. */
export type ArtifactErrorCode =
  | 'unreadable_file'
  | 'invalid_json'
  /** Nested past MAX_JSON_DEPTH, or holding a prototype key or a lone surrogate: refused before anything reads it. */
  | 'unsafe_json'
  | 'invalid_search_output'
  | 'missing_manifest'
  | 'invalid_manifest'
  | 'manifest_mismatch'
  | 'invalid_rubric'
  | 'invalid_default_rubric'
  | 'invalid_artifact'
  | 'artifact_id_mismatch'
  | 'invalid_library'
  | 'invalid_option'
  | 'invalid_autosr_artifact'
  | 'autosr_artifact'

/**
 * A search output, default rubric, artifact file or autosr artifact that export, import or deploy refuses; `issues`
 * lists every problem, each naming its place (e.g. `best_rubrics[1] (prompt_id "p2").rubric.criteria[0].weight: …`).
 * @example throw new ArtifactInputError('missing_manifest', 'out/best.json has no run_manifest', [])
 */
export class ArtifactInputError extends UsageError {
  override name = 'ArtifactInputError'
  declare readonly code: ArtifactErrorCode
  /** @example new ArtifactInputError('invalid_json', 'a.json: not JSON').code // 'invalid_json' */
  constructor(code: ArtifactErrorCode, message: string, issues: readonly string[] = []) {
    super(message, { code, issues })
  }
}

/**
 * Throws `unsafe_json` for a parsed file that recursive code must not walk (nesting past MAX_JSON_DEPTH, a prototype
 * key, a lone surrogate), naming the file and the limit.
 * @example checkJsonSafety(JSON.parse(text), 'rm_autosr.json')
 */
export function checkJsonSafety(document: unknown, name: string): void {
  const hazard = jsonHazard(document, true, name)
  if (hazard) throw new ArtifactInputError('unsafe_json', hazard)
}
