/**
 * RM artifacts offline: export a search output to a content-addressed artifact (export), choose its `__default__`
 * rubric (default-rubric), and check an artifact file before it is deployed (export: readArtifactFile). autosr's
 * artifacts both ways: import (autosr-import) and export --format autosr (autosr-export), through the rubric and
 * runtime mappings (autosr-rubrics, autosr-runtime).
 */
export { ArtifactInputError } from './errors.ts'
export {
  bestDefaultRubric,
  criterionKey,
  generality,
  parseDefaultRubricChoice,
  type SearchedRubric,
} from './default-rubric.ts'
export { buildArtifact } from './export.ts'
