import { escapeXml } from './escape.ts'
import {
  type ChartFrame,
  PALETTE,
  axes,
  bottomMargin,
  fitText,
  frameSize,
  isFiniteNumber,
  leftMargin,
  noDataChart,
  openSvg,
  px,
} from './frame.ts'
import { formatTick, formatValue, linearScale, niceDomain, validDomain } from './scale.ts'

export interface ChartBar {
  label: string
  value: number
  /** Lower end of the confidence interval, drawn as a whisker with `high`. */
  low?: number
  high?: number
}

const WHISKER_COLOUR = '#111827'

/**
 * Bars with optional confidence-interval whiskers (low/high). Bars grow from 0 (or the domain
 * edge nearest 0); a bar whose value is not a number is left as an empty slot labelled "n/a".
 * @example barChart({ title: 'Accuracy', yDomain: [0, 1], bars: [{ label: 'natural', value: 0.8, low: 0.7, high: 0.88
 *   }] })
 */
export function barChart(options: ChartFrame & { bars: Array<ChartBar>; yDomain?: [number, number] }): string {
  const bars = (options.bars ?? []).map((bar) => ({
    label: String(bar?.label ?? ''),
    value: isFiniteNumber(bar?.value) ? bar.value : undefined,
    low: isFiniteNumber(bar?.low) ? bar.low : undefined,
    high: isFiniteNumber(bar?.high) ? bar.high : undefined,
  }))
  if (bars.length === 0 || bars.every((bar) => bar.value === undefined)) return noDataChart('bar', options)

  const { width, height } = frameSize(options)
  const extent = bars.flatMap((bar) => [bar.value, bar.low, bar.high]).filter(isFiniteNumber)
  const givenY = validDomain(options.yDomain)
  const y = givenY
    ? niceDomain(Math.min(givenY[0], ...extent), Math.max(givenY[1], ...extent), { exact: true })
    : niceDomain(Math.min(0, ...extent), Math.max(0, ...extent))
  const yTickLabels = y.ticks.map((tick) => formatTick(tick, y.step))
  const area = {
    left: leftMargin(yTickLabels, options.yLabel),
    top: 40,
    right: width - 16,
    bottom: height - bottomMargin(options.xLabel),
  }
  const yScale = linearScale(y.domain, [area.bottom, area.top])
  const band = (area.right - area.left) / bars.length
  const barWidth = Math.min(72, band * 0.62)
  const baseline = yScale(Math.min(Math.max(0, y.domain[0]), y.domain[1]))
  const showValues = band >= 28

  const parts = [
    openSvg('bar', options, width, height),
    axes({
      area,
      height,
      xLabel: options.xLabel,
      yLabel: options.yLabel,
      xTicks: bars.map((bar, index) => ({ at: area.left + band * (index + 0.5), label: fitText(bar.label, band - 4) })),
      yTicks: y.ticks.map((tick, index) => ({ at: yScale(tick), label: yTickLabels[index]! })),
    }),
  ]
  bars.forEach((bar, index) => {
    const centre = area.left + band * (index + 0.5)
    const colour = PALETTE[0]
    const label = escapeXml(bar.label)
    parts.push(`<g data-bar="${label}">`)
    if (bar.value === undefined) {
      parts.push(`<text x="${px(centre)}" y="${px(baseline - 6)}" text-anchor="middle" fill="#6b7280">n/a</text></g>`)
      return
    }
    const valueY = yScale(bar.value)
    const interval =
      bar.low !== undefined && bar.high !== undefined ? ` [${formatValue(bar.low)}, ${formatValue(bar.high)}]` : ''
    parts.push(
      `<rect x="${px(centre - barWidth / 2)}" y="${px(Math.min(valueY, baseline))}" width="${px(barWidth)}" ` +
        `height="${px(Math.max(1, Math.abs(baseline - valueY)))}" rx="2" fill="${colour}" fill-opacity="0.85">` +
        `<title>${label}: ${escapeXml(formatValue(bar.value) + interval)}</title></rect>`,
    )
    let labelY = Math.min(valueY, baseline)
    if (bar.low !== undefined || bar.high !== undefined) {
      const lowY = yScale(bar.low ?? bar.value)
      const highY = yScale(bar.high ?? bar.value)
      const cap = Math.min(14, barWidth / 3)
      parts.push(
        `<path data-part="whisker" d="M${px(centre)} ${px(lowY)}V${px(highY)}M${px(centre - cap / 2)} ` +
          `${px(lowY)}h${px(cap)}M${px(centre - cap / 2)} ${px(highY)}h${px(cap)}" stroke="${WHISKER_COLOUR}" ` +
          `stroke-width="1.5" fill="none"/>`,
      )
      labelY = Math.min(labelY, highY, lowY)
    }
    if (showValues) {
      parts.push(
        `<text x="${px(centre)}" y="${px(Math.max(area.top - 2, labelY - 6))}" text-anchor="middle" ` +
          `fill="#1f2937">${escapeXml(formatValue(bar.value))}</text>`,
      )
    }
    parts.push('</g>')
  })
  parts.push('</svg>')
  return parts.join('')
}
