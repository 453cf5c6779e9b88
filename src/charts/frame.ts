import { escapeXml } from './escape.ts'

/** Title, size and axis labels every chart takes. */
export interface ChartFrame {
  title: string
  width?: number
  height?: number
  xLabel?: string
  yLabel?: string
}

/** Which builder drew an svg; written to its `data-chart` attribute. */
export type ChartKind = 'line' | 'bar' | 'histogram'

/** The pixel box the data is drawn in. */
export interface PlotArea {
  left: number
  top: number
  right: number
  bottom: number
}

/** Okabe–Ito colours: distinguishable with the common colour-vision deficiencies. */
export const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#D55E00', '#CC79A7', '#56B4E9', '#8C6D00', '#000000'] as const

const DEFAULT_WIDTH = 640
const DEFAULT_HEIGHT = 320
const FONT_SIZE = 12
const TITLE_SIZE = 14
const TEXT_COLOUR = '#1f2937'
const MUTED_COLOUR = '#6b7280'
const GRID_COLOUR = '#e5e7eb'

/**
 * A pixel coordinate with at most 2 decimals, so output is short and stable.
 * @example px(1 / 3) // '0.33'
 */
export function px(value: number): string {
  const rounded = Math.round(value * 100) / 100
  return String(Object.is(rounded, -0) ? 0 : rounded)
}

/**
 * A rough width of `text` in a sans-serif font; enough to lay out legends and margins without a DOM.
 * @example textWidth('accuracy') // 53
 */
function textWidth(text: string, fontSize = FONT_SIZE): number {
  let units = 0
  for (const char of text)
    units += /[\u1100-\uffff]/.test(char) ? 1 : /[ilj.,:;'|!]/.test(char) ? 0.3 : /[A-Z0-9mw]/.test(char) ? 0.68 : 0.55
  return Math.ceil(units * fontSize)
}

/**
 * Cuts `text` to fit `maxWidth` pixels, ending in an ellipsis when it had to cut.
 * @example fitText('a very long label', 40) // 'a very…'
 */
export function fitText(text: string, maxWidth: number, fontSize = FONT_SIZE): string {
  if (textWidth(text, fontSize) <= maxWidth) return text
  const chars = [...text]
  while (chars.length > 1 && textWidth(`${chars.join('')}…`, fontSize) > maxWidth) chars.pop()
  return `${chars.join('')}…`
}

/**
 * Width and height the frame asks for, with silly values replaced by the defaults.
 * @example frameSize({ title: 't', width: -5 }) // { width: 640, height: 320 }
 */
export function frameSize(frame: ChartFrame): { width: number; height: number } {
  const usable = (value: number | undefined, fallback: number, min: number) =>
    value !== undefined && Number.isFinite(value) && value >= min ? value : fallback
  return { width: usable(frame.width, DEFAULT_WIDTH, 160), height: usable(frame.height, DEFAULT_HEIGHT, 120) }
}

/**
 * The opening `<svg>` tag with its accessible name and `<title>`, plus the chart title text.
 * @example openSvg('line', { title: 'Objective' }, 640, 320)
 */
export function openSvg(kind: ChartKind, frame: ChartFrame, width: number, height: number): string {
  const title = escapeXml(frame.title)
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" ` +
    `role="img" data-chart="${kind}" aria-label="${title}" font-family="system-ui, -apple-system, 'Segoe UI', ` +
    `sans-serif" font-size="${FONT_SIZE}">` +
    `<title>${title}</title>` +
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>` +
    `<text x="${px(width / 2)}" y="22" text-anchor="middle" font-size="${TITLE_SIZE}" font-weight="600" ` +
    `fill="${TEXT_COLOUR}">${escapeXml(fitText(frame.title, width - 16, TITLE_SIZE))}</text>`
  )
}

/**
 * A whole chart saying there is nothing to draw, in the same frame as a real one.
 * @example noDataChart('bar', { title: 'Accuracy' })
 */
export function noDataChart(kind: ChartKind, frame: ChartFrame, message = 'No data'): string {
  const { width, height } = frameSize(frame)
  return (
    openSvg(kind, frame, width, height) +
    `<g data-no-data="true"><rect x="16" y="36" width="${width - 32}" height="${height - 52}" rx="6" fill="#f9fafb" ` +
    `stroke="${GRID_COLOUR}" stroke-dasharray="4 4"/>` +
    `<text x="${px(width / 2)}" y="${px(36 + (height - 52) / 2 + 5)}" text-anchor="middle" fill="${MUTED_COLOUR}" ` +
    `font-size="14">${escapeXml(message)}</text></g></svg>`
  )
}

/** One tick: its pixel position along the axis and its label. */
export interface Tick {
  at: number
  label: string
}

/**
 * Axis lines, tick labels, horizontal grid lines and the axis titles around `area`.
 * @example axes({ area, xTicks: [{ at: 60, label: '0' }], yTicks: [{ at: 200, label: '0.5' }], xLabel: 'generation' })
 */
export function axes(options: {
  area: PlotArea
  xTicks: Tick[]
  yTicks: Tick[]
  xLabel?: string
  yLabel?: string
  height: number
}): string {
  const { area, xTicks, yTicks } = options
  const parts: string[] = ['<g data-part="axes">']
  for (const tick of yTicks) {
    parts.push(
      `<path d="M${px(area.left)} ${px(tick.at)}H${px(area.right)}" stroke="${GRID_COLOUR}" stroke-width="1"/>`,
    )
    parts.push(
      `<text x="${px(area.left - 6)}" y="${px(tick.at + 4)}" text-anchor="end" ` +
        `fill="${MUTED_COLOUR}">${escapeXml(tick.label)}</text>`,
    )
  }
  parts.push(
    `<path d="M${px(area.left)} ${px(area.top)}V${px(area.bottom)}H${px(area.right)}" fill="none" ` +
      `stroke="${MUTED_COLOUR}" stroke-width="1"/>`,
  )
  for (const tick of xTicks) {
    parts.push(`<path d="M${px(tick.at)} ${px(area.bottom)}v4" stroke="${MUTED_COLOUR}" stroke-width="1"/>`)
    parts.push(
      `<text x="${px(tick.at)}" y="${px(area.bottom + 17)}" text-anchor="middle" ` +
        `fill="${MUTED_COLOUR}">${escapeXml(tick.label)}</text>`,
    )
  }
  if (options.xLabel) {
    parts.push(
      `<text x="${px((area.left + area.right) / 2)}" y="${px(options.height - 8)}" text-anchor="middle" ` +
        `fill="${TEXT_COLOUR}">${escapeXml(fitText(options.xLabel, area.right - area.left))}</text>`,
    )
  }
  if (options.yLabel) {
    const middle = (area.top + area.bottom) / 2
    parts.push(
      `<text x="14" y="${px(middle)}" text-anchor="middle" transform="rotate(-90 14 ${px(middle)})" ` +
        `fill="${TEXT_COLOUR}">${escapeXml(fitText(options.yLabel, area.bottom - area.top))}</text>`,
    )
  }
  parts.push('</g>')
  return parts.join('')
}

/**
 * Left margin wide enough for the widest y tick label (and the rotated y title).
 * @example leftMargin(['0.0', '0.5', '1.0'], 'accuracy') // 56
 */
export function leftMargin(yTickLabels: string[], yLabel: string | undefined): number {
  const widest = Math.max(0, ...yTickLabels.map((label) => textWidth(label)))
  return Math.max(36, widest + 14) + (yLabel ? 20 : 0)
}

/**
 * Bottom margin for the x tick labels (and the x title).
 * @example bottomMargin('generation') // 46
 */
export function bottomMargin(xLabel: string | undefined): number {
  return 26 + (xLabel ? 20 : 0)
}

/** A legend entry: a name and the colour drawn for it. */
export interface LegendItem {
  name: string
  colour: string
  shape: 'line' | 'dashed' | 'dot'
}

/**
 * Legend rows under the title, wrapping when a row is full. Returns the markup and the height used.
 * @example legend([{ name: 'best', colour: '#0072B2', shape: 'line' }], 640, 34)
 */
export function legend(items: LegendItem[], width: number, top: number): { svg: string; height: number } {
  if (items.length === 0) return { svg: '', height: 0 }
  const rowHeight = 18
  const maxItemWidth = Math.min(220, width - 32)
  const parts: string[] = ['<g data-part="legend">']
  let x = 16
  let row = 0
  for (const item of items) {
    const label = fitText(item.name || '(unnamed)', maxItemWidth - 24)
    const itemWidth = 24 + textWidth(label) + 16
    if (x + itemWidth > width - 16 && x > 16) {
      row++
      x = 16
    }
    const y = top + row * rowHeight + 10
    const colour = escapeXml(item.colour)
    parts.push(
      item.shape !== 'dot'
        ? `<path d="M${px(x)} ${px(y - 4)}h18" stroke="${colour}" ` +
            `stroke-width="2.5"${item.shape === 'dashed' ? ' stroke-dasharray="7 5"' : ''}/>`
        : `<circle cx="${px(x + 9)}" cy="${px(y - 4)}" r="4" fill="${colour}"/>`,
    )
    parts.push(`<text x="${px(x + 24)}" y="${px(y)}" fill="${TEXT_COLOUR}">${escapeXml(label)}</text>`)
    x += itemWidth
  }
  parts.push('</g>')
  return { svg: parts.join(''), height: (row + 1) * rowHeight }
}

/** Beyond this magnitude a value is treated like NaN: no real metric gets there, and spans would overflow. */
const MAX_MAGNITUDE = 1e100

/**
 * True for numbers a chart can place: finite and within ±MAX_MAGNITUDE.
 * @example isFiniteNumber(Number.NaN) // false
 */
export function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && Math.abs(value) <= MAX_MAGNITUDE
}
