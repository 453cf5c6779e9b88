/**
 * Dependency-free SVG chart builders (strings in, strings out) for the offline reports and the
 * Worker dashboard alike: `lineChart`, `barChart`, `histogram`. Every chart is a complete
 * `<svg role="img" data-chart="line|bar|histogram" aria-label=…>` with a `<title>`, all text
 * XML-escaped, and a readable "No data" state for empty input.
 */
export { barChart } from './bar.ts'

export { histogram } from './histogram.ts'

export { lineChart } from './line.ts'
