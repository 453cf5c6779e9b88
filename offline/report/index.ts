/**
 * `reward-harness report`: one self-contained HTML file (inline CSS and SVG charts, no scripts, no URLs)
 * from a search output, an evolution log or bench results, detected from the content.
 */
export { detectReportInput, KIND_LABELS } from './detect.ts'
export { writeReport } from './render.ts'
