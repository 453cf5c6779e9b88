/**
 * RM artifacts offline: export a search output to a content-addressed artifact (export), choose its `__default__`
 * rubric (default-rubric), and check an artifact file before it is deployed (export: readArtifactFile).
 */
export { ArtifactInputError, type ArtifactErrorCode } from './errors.ts'
export {
  bestDefaultRubric,
  criterionKey,
  criterionSupport,
  generality,
  parseDefaultRubricChoice,
  readDefaultRubricFile,
  resolveDefaultRubric,
  type DefaultRubricChoice,
  type DefaultRubricReport,
  type SearchedRubric,
} from './default-rubric.ts'
export {
  buildArtifact,
  checkArtifact,
  exportArtifact,
  formatArtifact,
  MOCK_MAX_TOKENS,
  MOCK_TEMPERATURE,
  readArtifactFile,
  type BuiltArtifact,
  type ExportChecks,
  type ExportResult,
} from './export.ts'
export {
  buildLibraryArtifact,
  exportLibraryArtifact,
  formatLibraryArtifact,
  type LibraryExportOptions,
  type LibraryExportResult,
} from './library-export.ts'
