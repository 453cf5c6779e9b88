import { escapeXml } from './escape.ts'
import {
  type ChartFrame,
  PALETTE,
  axes,
  bottomMargin,
  frameSize,
  isFiniteNumber,
  leftMargin,
  legend,
  noDataChart,
  openSvg,
  px,
} from './frame.ts'
import { formatTick, formatValue, linearScale, niceDomain, validDomain } from './scale.ts'

interface ChartPoint {
  x: number
  y: number
}

export interface ChartSeries {
  name: string
  points: ChartPoint[]
  /** Optional colour (any SVG colour); defaults to the next palette colour. */
  color?: string
  /** `line` (default) joins the points; `points` draws markers only, e.g. events over a line. */
  mode?: 'line' | 'points'
  /** Draws the line dashed, so a secondary series (e.g. "best so far") stays visible over the one it equals. */
  dashed?: boolean
}

/** Markers on line series stop being drawn past this many points, where they would only blur the line. */
const MAX_MARKED_POINTS = 60

/**
 * Line chart, one polyline per series, axes with ticks, legend. Non-finite points are skipped;
 * when every x is an integer (generations, iterations) the x ticks are integers.
 * @example
 * lineChart({ title: 'Objective per generation', xLabel: 'generation',
 *   series: [{ name: 'best', points: [{ x: 0, y: 0.5 }, { x: 1, y: 0.7 }] }] })
 */
export function lineChart(options: ChartFrame & { series: ChartSeries[]; yDomain?: [number, number] }): string {
  const series = (options.series ?? []).map((entry, index) => ({
    name: String(entry.name ?? ''),
    colour: entry.color ?? PALETTE[index % PALETTE.length]!,
    mode: entry.mode === 'points' ? ('points' as const) : ('line' as const),
    dashed: entry.dashed === true,
    points: (entry.points ?? [])
      .filter((point) => isFiniteNumber(point?.x) && isFiniteNumber(point?.y))
      .sort((a, b) => a.x - b.x),
  }))
  const all = series.flatMap((entry) => entry.points)
  if (all.length === 0) return noDataChart('line', options)

  const { width, height } = frameSize(options)
  const xs = all.map((point) => point.x)
  const ys = all.map((point) => point.y)
  const integers = xs.every(Number.isInteger)
  const x = niceDomain(Math.min(...xs), Math.max(...xs), { integers, count: Math.max(2, Math.floor(width / 80)) })
  const givenY = validDomain(options.yDomain)
  const y = givenY
    ? niceDomain(Math.min(givenY[0], ...ys), Math.max(givenY[1], ...ys), { exact: true })
    : niceDomain(Math.min(...ys), Math.max(...ys))

  const top = 34
  const legendBlock = legend(
    series.map((entry) => ({
      name: entry.name,
      colour: entry.colour,
      shape: entry.mode === 'points' ? 'dot' : entry.dashed ? 'dashed' : 'line',
    })),
    width,
    top,
  )
  const yTickLabels = y.ticks.map((tick) => formatTick(tick, y.step))
  const area = {
    left: leftMargin(yTickLabels, options.yLabel),
    top: top + legendBlock.height + 8,
    right: width - 20,
    bottom: height - bottomMargin(options.xLabel),
  }
  const xScale = linearScale(x.domain, [area.left, area.right])
  const yScale = linearScale(y.domain, [area.bottom, area.top])

  const parts = [
    openSvg('line', options, width, height),
    legendBlock.svg,
    axes({
      area,
      height,
      xLabel: options.xLabel,
      yLabel: options.yLabel,
      xTicks: x.ticks.map((tick) => ({ at: xScale(tick), label: formatTick(tick, x.step) })),
      yTicks: y.ticks.map((tick, index) => ({ at: yScale(tick), label: yTickLabels[index]! })),
    }),
  ]
  for (const entry of series) if (entry.points.length > 0) parts.push(seriesSvg(entry, xScale, yScale))
  parts.push('</svg>')
  return parts.join('')
}

type Scale = (value: number) => number
type DrawnSeries = Required<Omit<ChartSeries, 'color'>> & { colour: string }

/** One series as an SVG group: its line (unless points only), and markers where they stay readable. */
function seriesSvg(entry: DrawnSeries, xScale: Scale, yScale: Scale): string {
  const colour = escapeXml(entry.colour)
  const name = escapeXml(entry.name)
  const parts = [`<g data-series="${name}">`]
  if (entry.mode === 'line' && entry.points.length > 1) {
    const d = entry.points
      .map((point, index) => `${index === 0 ? 'M' : 'L'}${px(xScale(point.x))} ${px(yScale(point.y))}`)
      .join('')
    const dash = entry.dashed ? ' stroke-dasharray="7 5"' : ''
    parts.push(
      `<path d="${d}" fill="none" stroke="${colour}" stroke-width="2.5"${dash} ` +
        'stroke-linejoin="round" stroke-linecap="round"/>',
    )
  }
  if (entry.mode === 'points' || entry.points.length <= MAX_MARKED_POINTS) {
    const radius = entry.mode === 'points' ? 5 : 3
    for (const point of entry.points) {
      const label = `${name}: ${escapeXml(formatValue(point.y))} at ${escapeXml(formatValue(point.x))}`
      parts.push(
        `<circle cx="${px(xScale(point.x))}" cy="${px(yScale(point.y))}" r="${radius}" fill="${colour}" ` +
          `stroke="#ffffff" stroke-width="1.5"><title>${label}</title></circle>`,
      )
    }
  }
  parts.push('</g>')
  return parts.join('')
}
