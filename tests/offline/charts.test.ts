import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { barChart, histogram, lineChart } from '../../src/charts/index.ts'
import { escapeXml } from '../../src/charts/escape.ts'
import { binValues } from '../../src/charts/histogram.ts'
import { niceDomain } from '../../src/charts/scale.ts'

/** Checks that every tag opened is closed in order (enough to catch broken markup from string building). */
function expectWellFormed(svg: string): void {
  const stack: string[] = []
  for (const match of svg.matchAll(/<(\/?)([a-zA-Z][\w:-]*)([^>]*?)(\/?)>/g)) {
    const [, closing, name, , selfClosing] = match
    if (selfClosing) continue
    if (closing) expect(stack.pop(), `closing </${name}>`).toBe(name)
    else stack.push(name!)
  }
  expect(stack).toEqual([])
  expect(svg.replace(/<[^>]*>/g, '')).not.toMatch(/[<>]/)
  expect(svg).not.toMatch(/&(?!(amp|lt|gt|quot|#39);)/)
}

const count = (svg: string, pattern: RegExp) => svg.match(pattern)?.length ?? 0
/** The `d` of each drawn series line (axes and grid paths sit in the axes group, which has no stroke-linejoin). */
const seriesPaths = (svg: string) =>
  [...svg.matchAll(/<path d="([^"]+)"[^>]*stroke-linejoin/g)].map((match) => match[1]!)
const rectHeights = (svg: string) =>
  [...svg.matchAll(/<rect x="[^"]+" y="[^"]+" width="[^"]+" height="([^"]+)"[^>]*fill-opacity/g)].map((match) =>
    Number(match[1]),
  )

const HOSTILE = `<script>alert("x")</script> & 'quoted'`

describe('chart frame', () => {
  it.each([
    ['line', lineChart({ title: 'Objective', series: [{ name: 'best', points: [{ x: 0, y: 1 }] }] })],
    ['bar', barChart({ title: 'Objective', bars: [{ label: 'a', value: 1 }] })],
    ['histogram', histogram({ title: 'Objective', values: [1, 2] })],
  ])('a %s chart is a complete accessible svg with a title', (kind, svg) => {
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" viewBox="0 0 640 320" /)
    expect(svg).toContain(`role="img" data-chart="${kind}" aria-label="Objective"`)
    expect(svg).toContain('<title>Objective</title>')
    expect(svg.endsWith('</svg>')).toBe(true)
    expectWellFormed(svg)
  })

  it('escapes every text it writes: title, axis labels, series names, bar labels', () => {
    const charts = [
      lineChart({
        title: HOSTILE,
        xLabel: HOSTILE,
        yLabel: HOSTILE,
        series: [
          {
            name: HOSTILE,
            points: [
              { x: 0, y: 0 },
              { x: 1, y: 1 },
            ],
          },
        ],
      }),
      barChart({ title: HOSTILE, xLabel: HOSTILE, bars: [{ label: HOSTILE, value: 0.5, low: 0.4, high: 0.6 }] }),
      histogram({ title: HOSTILE, yLabel: HOSTILE, values: [0.2] }),
      lineChart({ title: HOSTILE, series: [] }),
    ]
    for (const svg of charts) {
      expect(svg).not.toContain('<script')
      expect(svg).toContain('&lt;script&gt;alert(&quot;x&quot;)')
      expectWellFormed(svg)
    }
    expect(escapeXml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;')
  })

  it('honours a custom size', () => {
    const svg = barChart({ title: 't', width: 400, height: 200, bars: [{ label: 'a', value: 1 }] })
    expect(svg).toContain('viewBox="0 0 400 200" width="400" height="200"')
  })

  it.each([
    ['no series', lineChart({ title: 'Empty', series: [] })],
    ['series without points', lineChart({ title: 'Empty', series: [{ name: 'a', points: [] }] })],
    [
      'only non-finite points',
      lineChart({
        title: 'Empty',
        series: [
          {
            name: 'a',
            points: [
              { x: Number.NaN, y: 1 },
              { x: 1, y: Infinity },
            ],
          },
        ],
      }),
    ],
    ['no bars', barChart({ title: 'Empty', bars: [] })],
    ['bars without values', barChart({ title: 'Empty', bars: [{ label: 'a', value: Number.NaN }] })],
    ['no values', histogram({ title: 'Empty', values: [] })],
  ])('says "No data" for %s, in a full frame', (_case, svg) => {
    expect(svg).toContain('data-no-data="true"')
    expect(svg).toContain('>No data</text>')
    expect(svg).toContain('<title>Empty</title>')
    expect(svg).not.toContain('data-series')
    expectWellFormed(svg)
  })
})

describe('lineChart', () => {
  const series = [
    {
      name: 'best',
      points: [
        { x: 2, y: 0.9 },
        { x: 0, y: 0.5 },
        { x: 1, y: 0.7 },
      ],
    },
    {
      name: 'mean',
      points: [
        { x: 0, y: 0.3 },
        { x: 1, y: Number.NaN },
        { x: 2, y: 0.6 },
      ],
    },
  ]

  it('draws one line per series through its points in x order, skipping non-finite points', () => {
    const svg = lineChart({ title: 'Objective', series })
    const [best, mean] = seriesPaths(svg)
    expect(seriesPaths(svg)).toHaveLength(2)
    const bestYs = [...best!.matchAll(/[ML][\d.]+ ([\d.]+)/g)].map((match) => Number(match[1]))
    expect(bestYs).toHaveLength(3)
    // Higher objective is drawn higher up (smaller pixel y), in x order 0, 1, 2.
    expect(bestYs[0]).toBeGreaterThan(bestYs[1]!)
    expect(bestYs[1]).toBeGreaterThan(bestYs[2]!)
    expect(mean!.match(/[ML]/g)).toHaveLength(2)
    expect(svg).not.toMatch(/NaN|Infinity/)
    expect(count(svg, /<circle/g)).toBe(5)
  })

  it('has a legend naming each series, and integer ticks for generations', () => {
    const svg = lineChart({ title: 'Objective', xLabel: 'generation', series })
    expect(svg).toMatch(/data-part="legend".*>best<.*>mean</)
    const xTicks = [...svg.matchAll(/text-anchor="middle" fill="#6b7280">([^<]+)</g)].map((match) => match[1])
    expect(xTicks).toEqual(['0', '1', '2'])
    expect(svg).toContain('>generation</text>')
  })

  it('keeps a given y domain such as [0, 1] for accuracies', () => {
    const svg = lineChart({
      title: 'Accuracy',
      yDomain: [0, 1],
      series: [
        {
          name: 'a',
          points: [
            { x: 0, y: 0.5 },
            { x: 1, y: 0.6 },
          ],
        },
      ],
    })
    const yTicks = [...svg.matchAll(/text-anchor="end" fill="#6b7280">([^<]+)</g)].map((match) => match[1])
    expect(yTicks).toEqual(['0.0', '0.2', '0.4', '0.6', '0.8', '1.0'])
  })

  it('draws points-mode series as markers only, in their own colour', () => {
    const svg = lineChart({
      title: 'Accuracy',
      series: [
        {
          name: 'accuracy',
          points: [
            { x: 0, y: 0.5 },
            { x: 1, y: 0.6 },
          ],
        },
        { name: 'rolled back', mode: 'points', color: '#D55E00', points: [{ x: 1, y: 0.6 }] },
      ],
    })
    expect(seriesPaths(svg)).toHaveLength(1)
    expect(svg).toMatch(/<g data-series="rolled back"><circle [^>]*r="5" fill="#D55E00"/)
  })

  it('draws a dashed series dashed, in the legend too', () => {
    const svg = lineChart({
      title: 'Best',
      series: [
        {
          name: 'best so far',
          dashed: true,
          points: [
            { x: 0, y: 0.5 },
            { x: 1, y: 0.6 },
          ],
        },
      ],
    })
    expect(svg).toMatch(/<g data-series="best so far"><path [^>]*stroke-dasharray="7 5"/)
    expect(svg).toMatch(/data-part="legend"><path [^>]*stroke-dasharray="7 5"/)
  })

  it('draws a single point as a marker', () => {
    const svg = lineChart({ title: 'One', series: [{ name: 'a', points: [{ x: 3, y: 0.25 }] }] })
    expect(count(svg, /<circle/g)).toBe(1)
    expect(svg).not.toContain('data-no-data')
  })
})

describe('barChart', () => {
  it('draws bar heights in proportion to the values, from zero', () => {
    const svg = barChart({
      title: 'Accuracy',
      yDomain: [0, 1],
      bars: [
        { label: 'a', value: 1 },
        { label: 'b', value: 0.5 },
      ],
    })
    const [full, half] = rectHeights(svg)
    expect(full! / half!).toBeCloseTo(2, 1)
  })

  it('draws a whisker from low to high around each bar that has an interval, and labels the bars', () => {
    const svg = barChart({
      title: 'Accuracy',
      yDomain: [0, 1],
      bars: [
        { label: 'natural', value: 0.8, low: 0.7, high: 0.9 },
        { label: 'adversarial', value: 0.4 },
      ],
    })
    const whiskers = [...svg.matchAll(/data-part="whisker" d="M([\d.]+) ([\d.]+)V([\d.]+)/g)]
    expect(whiskers).toHaveLength(1)
    const [, , lowY, highY] = whiskers[0]!.map(Number)
    expect(lowY).toBeGreaterThan(highY!)
    expect(svg).toContain('<title>natural: 0.8 [0.7, 0.9]</title>')
    expect(svg).toContain('>adversarial</text>')
    expect(count(svg, /<rect [^>]*fill-opacity/g)).toBe(2)
  })

  it('shows a bar without a value as n/a next to the others', () => {
    const svg = barChart({
      title: 'Accuracy',
      bars: [
        { label: 'a', value: 0.5 },
        { label: 'b', value: Number.NaN },
      ],
    })
    expect(svg).toMatch(/<g data-bar="b"><text[^>]*>n\/a<\/text><\/g>/)
    expect(svg).not.toMatch(/NaN/)
  })

  it('grows negative bars down from zero', () => {
    const svg = barChart({
      title: 'Delta',
      bars: [
        { label: 'up', value: 0.2 },
        { label: 'down', value: -0.2 },
      ],
    })
    const ys = [...svg.matchAll(/<rect x="[^"]+" y="([^"]+)"[^>]*fill-opacity/g)].map((match) => Number(match[1]))
    const [upHeight, downHeight] = rectHeights(svg)
    expect(upHeight).toBeCloseTo(downHeight!, 1)
    expect(ys[1]).toBeCloseTo(ys[0]! + upHeight!, 1)
  })
})

describe('histogram', () => {
  it('bins values with the last bin closed and leaves out-of-domain values out', () => {
    expect(binValues([0, 0.1, 0.5, 0.99, 1, 1.5, -0.1, Number.NaN], 2, [0, 1])).toEqual({ counts: [2, 3], skipped: 3 })
  })

  it('draws one rect per non-empty bin and says how many values it left out', () => {
    const svg = histogram({ title: 'Scores', values: [0.05, 0.06, 0.95, 2], bins: 10, domain: [0, 1] })
    expect(rectHeights(svg)).toHaveLength(2)
    const [twice, once] = rectHeights(svg)
    expect(twice! / once!).toBeCloseTo(2, 1)
    expect(svg).toContain('n = 3, 1 outside [0, 1] or not numbers, not shown')
  })

  it("uses the values' own range when no domain is given, and copes with identical values", () => {
    const svg = histogram({ title: 'Same', values: [3, 3, 3] })
    expect(rectHeights(svg)).toHaveLength(1)
    expect(svg).toContain('n = 3<')
  })

  it('says so when no value falls inside the domain', () => {
    expect(histogram({ title: 'Out', values: [5], domain: [0, 1] })).toContain('No values inside [0, 1]')
  })
})

describe('scale', () => {
  it('widens a domain to nice ticks', () => {
    expect(niceDomain(0.13, 0.87)).toMatchObject({ domain: [0, 1], ticks: [0, 0.2, 0.4, 0.6, 0.8, 1] })
    expect(niceDomain(0, 3, { integers: true }).ticks).toEqual([0, 1, 2, 3])
  })

  it('gives a lone whole step an axis that starts at it, with no negative tick', () => {
    expect(niceDomain(0, 0, { integers: true })).toMatchObject({ domain: [0, 1], ticks: [0, 1] })
    expect(niceDomain(-2, -2, { integers: true }).ticks).toEqual([-3, -2, -1])
  })
})

describe('properties', () => {
  const anyNumber = fc.oneof(fc.double(), fc.integer({ min: -1000, max: 1000 }), fc.constant(0))
  const text = fc.string({ maxLength: 30 })

  it('any line chart is well-formed svg with no NaN/Infinity coordinates', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ name: text, points: fc.array(fc.record({ x: anyNumber, y: anyNumber }), { maxLength: 12 }) }),
          { maxLength: 4 },
        ),
        text,
        (series, title) => {
          const svg = lineChart({ title, series })
          expectWellFormed(svg)
          expect(svg.replace(/<title>[^<]*<\/title>|>[^<]*</g, '')).not.toMatch(/NaN|Infinity/)
        },
      ),
      { numRuns: 300 },
    )
  })

  it('any bar chart or histogram is well-formed svg with no NaN/Infinity coordinates', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            label: text,
            value: anyNumber,
            low: fc.option(anyNumber, { nil: undefined }),
            high: fc.option(anyNumber, { nil: undefined }),
          }),
          { maxLength: 8 },
        ),
        fc.array(anyNumber, { maxLength: 30 }),
        (bars, values) => {
          for (const svg of [barChart({ title: 'b', bars }), histogram({ title: 'h', values })]) {
            expectWellFormed(svg)
            expect(svg.replace(/<title>[^<]*<\/title>|>[^<]*</g, '')).not.toMatch(/NaN|Infinity/)
          }
        },
      ),
      { numRuns: 300 },
    )
  })
})
