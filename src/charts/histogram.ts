import { bin } from 'd3-array'
import { escapeXml } from './escape.ts'
import {
  type ChartFrame,
  PALETTE,
  axes,
  bottomMargin,
  frameSize,
  isFiniteNumber,
  leftMargin,
  noDataChart,
  openSvg,
  px,
} from './frame.ts'
import { formatTick, formatValue, isDegenerate, linearScale, niceDomain, validDomain } from './scale.ts'

const DEFAULT_BINS = 10

/**
 * Counts `values` into `bins` equal bins (d3's `bin`) over `domain` (the last bin includes its upper edge).
 * Values outside the domain or not finite are returned as `skipped`, not forced into an edge bin.
 * @example binValues([0, 0.5, 1], 2, [0, 1]) // { counts: [1, 2], skipped: 0 }
 * @internal
 */
export function binValues(
  values: number[],
  bins: number,
  domain: [number, number],
): { counts: number[]; skipped: number } {
  const [low, high] = domain
  const inside = values.filter((value) => isFiniteNumber(value) && value >= low && value <= high)
  const width = (high - low) / bins
  const edges = Array.from({ length: bins - 1 }, (_, index) => low + width * (index + 1))
  const counts = new Array<number>(bins).fill(0)
  // d3 drops edges that float rounding puts on the domain's ends; their values then land in the nearest bin kept.
  bin()
    .domain([low, high])
    .thresholds(edges)(inside)
    .forEach((group, index) => {
      counts[Math.min(index, bins - 1)]! += group.length
    })
  return { counts, skipped: values.length - inside.length }
}

/**
 * Histogram of values (e.g. scores in [0,1]) in `bins` bins (default 10) over `domain` (default:
 * the values' own range), or of `counts` already binned in equal bins over `domain`. Values outside the domain are
 * left out and said so under the title.
 * @example histogram({ title: 'Scores', values: [0.1, 0.4, 0.45, 0.9], bins: 5, domain: [0, 1], xLabel: 'score' })
 */
export function histogram(
  options: ChartFrame &
    ({ values: number[]; bins?: number; domain?: [number, number] } | { counts: number[]; domain: [number, number] }),
): string {
  const binned =
    'counts' in options
      ? binnedCounts(options.counts, options.domain)
      : binnedValues(options.values, options.bins, options.domain)
  if (!binned) return noDataChart('histogram', options)
  const { counts, skipped, domain, bins } = binned
  const shown = counts.reduce((sum, count) => sum + count, 0)
  if (shown === 0)
    return noDataChart('histogram', options, `No values inside [${formatValue(domain[0])}, ${formatValue(domain[1])}]`)

  const { width, height } = frameSize(options)
  const y = niceDomain(0, Math.max(...counts), { integers: true })
  const x = niceDomain(domain[0], domain[1], { exact: true, count: Math.max(2, Math.floor(width / 80)) })
  const yTickLabels = y.ticks.map((tick) => formatTick(tick, y.step))
  const area = {
    left: leftMargin(yTickLabels, options.yLabel),
    top: 54,
    right: width - 20,
    bottom: height - bottomMargin(options.xLabel),
  }
  const xScale = linearScale(domain, [area.left, area.right])
  const yScale = linearScale(y.domain, [area.bottom, area.top])
  const binWidth = (domain[1] - domain[0]) / bins

  const parts = [
    openSvg('histogram', options, width, height),
    `<text x="${px(width / 2)}" y="38" text-anchor="middle" fill="#6b7280">${escapeXml(
      `n = ${shown}` +
        (skipped > 0
          ? `, ${skipped} outside [${formatValue(domain[0])}, ${formatValue(domain[1])}] or not numbers, not shown`
          : ''),
    )}</text>`,
    axes({
      area,
      height,
      xLabel: options.xLabel,
      yLabel: options.yLabel,
      xTicks: x.ticks.map((tick) => ({ at: xScale(tick), label: formatTick(tick, x.step) })),
      yTicks: y.ticks.map((tick, index) => ({ at: yScale(tick), label: yTickLabels[index]! })),
    }),
  ]
  counts.forEach((count, index) => {
    if (count === 0) return
    const from = domain[0] + binWidth * index
    const left = xScale(from)
    const right = xScale(from + binWidth)
    const topY = yScale(count)
    parts.push(
      `<rect x="${px(left + 0.5)}" y="${px(topY)}" width="${px(Math.max(1, right - left - 1))}" ` +
        `height="${px(area.bottom - topY)}" fill="${PALETTE[0]}" fill-opacity="0.85">` +
        `<title>${escapeXml(`${binLabel(from, from + binWidth, index === bins - 1)}: ${count}`)}</title></rect>`,
    )
  })
  parts.push('</svg>')
  return parts.join('')
}

type Binned = { counts: number[]; skipped: number; domain: [number, number]; bins: number }

function binnedValues(
  values: number[] | undefined,
  requestedBins: number | undefined,
  requestedDomain: [number, number] | undefined,
): Binned | undefined {
  const finite = (values ?? []).filter(isFiniteNumber)
  if (finite.length === 0) return undefined
  const bins = Number.isInteger(requestedBins) && requestedBins! >= 1 ? Math.min(requestedBins!, 200) : DEFAULT_BINS
  let domain = validDomain(requestedDomain) ?? [Math.min(...finite), Math.max(...finite)]
  if (isDegenerate(domain[0], domain[1])) domain = niceDomain(domain[0], domain[1]).domain
  return { ...binValues(values ?? [], bins, domain), domain, bins }
}

function binnedCounts(counts: number[], requestedDomain: [number, number]): Binned | undefined {
  const domain = validDomain(requestedDomain)
  if (
    !domain ||
    counts.length === 0 ||
    counts.length > 200 ||
    !counts.every((count) => Number.isInteger(count) && count >= 0)
  )
    return undefined
  return { counts, skipped: 0, domain, bins: counts.length }
}

/** A bin as an interval: half-open, except the last, which holds its upper edge. */
function binLabel(from: number, to: number, last: boolean): string {
  return `[${formatValue(from)}, ${formatValue(to)}${last ? ']' : ')'}`
}
