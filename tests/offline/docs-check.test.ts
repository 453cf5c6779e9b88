/**
 * The static half of `npm run docs:check`: every relative link and anchor of README.md and docs/ resolves, the
 * configuration reference is what the schemas give, the README stays a front door, and a dead link is caught.
 * (The blocks themselves run in CI against npm start: `npm run docs:check`.)
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { renderConfigDocs } from '../../offline/dev/config-docs.ts'
import { DOC_ORDER, deadLinks, docBlocks, docFiles, headingAnchors } from '../../offline/dev/docs-check.ts'
import { ROOT } from '../support/child.ts'

const scratch = mkdtempSync(join(tmpdir(), 'rh-docs-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('the docs', () => {
  it('have no dead relative link or anchor, and the configuration reference is current', () => {
    expect(deadLinks(ROOT, docFiles(ROOT))).toEqual([])
    expect(readFileSync(join(ROOT, 'docs/configuration.md'), 'utf8')).toBe(renderConfigDocs())
  })

  it('keep the README to a front door: at most 200 lines, none over 160 characters in it or in docs/', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n')
    expect(readme.length).toBeLessThanOrEqual(200)
    for (const file of docFiles(ROOT))
      for (const [index, line] of readFileSync(join(ROOT, file), 'utf8').split('\n').entries())
        expect(line.length, `${file}:${index + 1}`).toBeLessThanOrEqual(160)
  })

  it('run README.md first, then the declared order, then any other doc', () => {
    const files = docFiles(ROOT)
    expect(files.slice(0, DOC_ORDER.length)).toEqual(DOC_ORDER)
    expect(files).toContain('docs/deploy.md')
    // Blocks that need a GPU or a Cloudflare account are marked, and only those are skipped.
    const deploy = docBlocks('docs/deploy.md', readFileSync(join(ROOT, 'docs/deploy.md'), 'utf8'))
    expect(deploy.length).toBeGreaterThan(0)
    expect(deploy.every((block) => block.skipped)).toBe(true)
  })
})

describe('the link checker', () => {
  it('fails on a missing file and on an anchor the target lacks, and ignores links inside code', () => {
    mkdirSync(join(scratch, 'docs'), { recursive: true })
    writeFileSync(join(scratch, 'docs/a.md'), '# Title\n\n## How a score is computed\n')
    writeFileSync(
      join(scratch, 'README.md'),
      [
        '[ok](docs/a.md#how-a-score-is-computed) [ok too](#title) [web](https://example.com/x.md)',
        '[gone](docs/nope.md) [bad anchor](docs/a.md#nope)',
        '`[in code](docs/also-nope.md)`',
        '```sh',
        'echo "[in a block](docs/also-nope.md)"',
        '```',
        '# Title',
      ].join('\n'),
    )
    expect(deadLinks(scratch, ['README.md', 'docs/a.md'])).toEqual([
      'README.md:2: docs/nope.md (no such file)',
      'README.md:2: docs/a.md#nope (no heading #nope in docs/a.md)',
    ])
  })

  it("gives headings GitHub's anchors", () => {
    expect([
      ...headingAnchors('# What `GET /` answers\n## Run a trainer: `reward-harness train`\n## A\n## A\n'),
    ]).toEqual(['what-get--answers', 'run-a-trainer-reward-harness-train', 'a', 'a-1'])
  })
})
