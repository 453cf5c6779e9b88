/**
 * Upload validation of an RM artifact (rubric or library kind): the schema (`AnyRmArtifact`), the content address
 * (`verifyArtifactId`), and what serving needs beyond the schema (an RM API version this Worker speaks, unique
 * criterion ids per rubric), and no credential anywhere in it (src/credentials: by name and by shape; `deploy` drops
 * them before uploading). Every problem is named by its path, so the exporter (or a person) knows what to fix; a
 * credential's value is never echoed.
 */
import { type HeldSecrets, withoutCredentials } from '../../src/credentials/index.ts'
import { AppError } from '../../src/errors/index.ts'
import { AnyRmArtifact, artifactId, RM_API_VERSION } from '../../src/schemas/artifact.ts'

/** One problem with an uploaded artifact: where (`rubrics.p1.criteria.0.weight`) and what. */
interface ArtifactProblem {
  path: string
  message: string
}

/**
 * Parses and checks an uploaded artifact; throws `AppError('invalid_artifact')` whose details list every problem.
 * @example const artifact = await parseArtifactUpload(await c.req.json(), heldSecrets(c.env))
 */
export async function parseArtifactUpload(raw: unknown, held: HeldSecrets = {}): Promise<AnyRmArtifact> {
  const parsed = AnyRmArtifact.safeParse(raw)
  if (!parsed.success) {
    throw invalid(
      parsed.error.issues.map((issue) => ({
        path: issue.path.map(String).join('.') || '(body)',
        message: issue.message,
      })),
    )
  }
  const artifact = parsed.data
  const problems = servingProblems(artifact)
  for (const path of withoutCredentials(artifact, '', held).dropped)
    problems.push({
      path,
      message: 'looks like a credential, which an artifact must not carry: remove it (reward-harness deploy does)',
    })
  const { artifact_id: claimed, ...body } = artifact
  const actual = await artifactId(body)
  if (claimed !== actual) {
    const mismatch = `does not match the artifact's content, which hashes to ${actual}`
    problems.push({ path: 'artifact_id', message: `${mismatch}: the artifact was changed after export` })
  }
  if (problems.length > 0) throw invalid(problems)
  return artifact
}

/**
 * What the schema cannot say but serving needs: an RM API version this Worker speaks, unique criterion ids.
 * @example servingProblems(artifact) // [] for a servable artifact
 */
function servingProblems(artifact: AnyRmArtifact): ArtifactProblem[] {
  const problems: ArtifactProblem[] = []
  const wanted = artifact.compatibility.min_rm_api_version
  if (!/^\d+(\.\d+)*$/.test(wanted)) {
    problems.push({
      path: 'compatibility.min_rm_api_version',
      message: `"${wanted}" is not a version such as "${RM_API_VERSION}"`,
    })
  } else if (compareVersions(wanted, RM_API_VERSION) > 0) {
    problems.push({
      path: 'compatibility.min_rm_api_version',
      message: `the artifact needs RM API ${wanted}; this Worker serves ${RM_API_VERSION}`,
    })
  }
  if (artifact.kind === 'library') {
    const tools = artifact.entries.filter((entry) => entry.kind === 'tool' && !entry.when_to_use)
    for (const tool of tools)
      problems.push({ path: `entries.${tool.name}.when_to_use`, message: 'a tool entry needs when_to_use' })
    return problems
  }
  for (const [promptId, rubric] of Object.entries(artifact.rubrics)) {
    const ids = rubric.criteria.map((criterion) => criterion.criterion_id)
    const repeated = ids.find((id, index) => ids.indexOf(id) !== index)
    if (repeated !== undefined)
      problems.push({ path: `rubrics.${promptId}.criteria`, message: `criterion id "${repeated}" is used twice` })
  }
  return problems
}

/**
 * Compares dotted numeric versions: negative, 0 or positive as `a` is older, equal or newer.
 * @example compareVersions('1.10', '1.9') // 1
 */
function compareVersions(a: string, b: string): number {
  const left = a.split('.').map(Number)
  const right = b.split('.').map(Number)
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    const delta = (left[i] ?? 0) - (right[i] ?? 0)
    if (delta !== 0) return delta
  }
  return 0
}

function invalid(problems: ArtifactProblem[]): AppError {
  const summary = problems
    .slice(0, 3)
    .map((problem) => `${problem.path}: ${problem.message}`)
    .join('; ')
  const more = problems.length > 3 ? ` (and ${problems.length - 3} more)` : ''
  return new AppError('invalid_artifact', `the artifact is not valid — ${summary}${more}`, { details: problems })
}
