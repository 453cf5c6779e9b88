/**
 * Every match of an RE2 pattern in a text, in one backward and one forward pass: work linear in the text for all the
 * matches together. Calling `find()` again after each match (what RE2's own iterators do) is linear per match, but
 * each search may scan to the end of the text before it settles (`x(.*y)?` on a text of `x`s asks "is there a `y`
 * later?" at every `x`), so all the matches cost O(n²·m).
 *
 * The backward pass marks, for every position and instruction of the compiled program, whether a match can still be
 * completed from there. The forward pass then follows, from the leftmost position where one can start, the
 * highest-priority path that can complete: the path RE2's Pike VM would settle on, reached without looking past the
 * match's end. The results are RE2's, group for group (a property test compares them on random patterns and texts).
 *
 * It reads re2js's compiled program (`RE2JS.re2().prog`: the instruction set of Go's regexp/syntax); re2js is pinned
 * in package.json, and an unexpected program shape throws rather than guess.
 */
import type { RE2JS } from 're2js'

/** One match: where it starts and ends (UTF-16 offsets) and each group's text (undefined when it took no part). */
export interface RegexMatch {
  start: number
  end: number
  groups: (string | undefined)[]
}

/**
 * What a search cost, in instruction visits (and one per character for RE2's first search): at most about 3 per
 * instruction-character of the text.
 */
export interface SearchWork {
  steps: number
}

/** The instruction opcodes of re2js's `Inst` (Go's regexp/syntax `InstOp`, numbered from 1). */
const ALT = 1
const ALT_MATCH = 2
const CAPTURE = 3
const EMPTY_WIDTH = 4
const FAIL = 5
const MATCH = 6
const NOP = 7
const RUNE = 8
const RUNE1 = 9
const RUNE_ANY = 10
const RUNE_ANY_NOT_NL = 11

/** The empty-width conditions (`^ $ \A \z \b \B` and their multi-line forms), as re2js's `Utils.EMPTY_*` bits. */
const BEGIN_LINE = 1
const END_LINE = 2
const BEGIN_TEXT = 4
const END_TEXT = 8
const WORD_BOUNDARY = 16
const NO_WORD_BOUNDARY = 32

/** The parts of a compiled instruction read here. */
interface Inst {
  op: number
  out: number
  arg: number
  runes: Int32Array
  matchRune(rune: number): boolean
}

/** A program prepared for the two passes: each instruction's opcode, successors and argument in typed arrays. */
interface Plan {
  inst: Inst[]
  ops: Int32Array
  outs: Int32Array
  args: Int32Array
  start: number
  numCap: number
  /** The instructions that consume a character. */
  runePcs: Int32Array
  /** The instructions that always complete a match where they stand. */
  matchPcs: Int32Array
  /** For each instruction, the empty-width instructions that lead to it. */
  predecessors: Int32Array[]
}

const plans = new WeakMap<RE2JS, Plan>()

/**
 * The backward pass's table, kept between searches and grown as needed: a fresh one of up to 200 KB per extraction
 * was most of the garbage collector's work. A search is synchronous, so no two share it at once.
 */
let table = new Uint8Array(0)

/**
 * All matches of `regex` in `text`, as RE2 finds them one after another (after an empty match the next search starts
 * one character on), with `work.steps` counting the instruction visits.
 * @example allMatches(RE2JS.compile('Q: (\\w+)'), 'Q: one Q: two').map((match) => match.groups[1]) // ['one', 'two']
 */
export function allMatches(regex: RE2JS, text: string, work: SearchWork = { steps: 0 }): RegexMatch[] {
  const plan = planOf(regex)
  // One search of RE2's own first (a literal prefix is found by indexOf): most texts have no match at all.
  work.steps += text.length
  if (!regex.matcher(text).find()) return []
  const viable = completable(plan, text, work)
  const size = plan.ops.length
  const matches: RegexMatch[] = []
  const walker = new PathWalker(plan, text, viable, work)
  let from = 0
  while (from <= text.length) {
    let start = from
    while (viable[start * size + plan.start] === 0) {
      work.steps++
      if (start === text.length) return matches
      start += widthAt(text, start)
    }
    const caps = walker.walk(start)
    const groups = new Array<string | undefined>(caps.length / 2)
    for (let group = 0; group < groups.length; group++) {
      const begin = caps[2 * group]!
      const end = caps[2 * group + 1]!
      groups[group] = begin < 0 || end < 0 ? undefined : text.slice(begin, end)
    }
    matches.push({ start, end: caps[1]!, groups })
    from = caps[1]!
    if (caps[0] === caps[1]) from += from < text.length ? widthAt(text, from) : 1
  }
  return matches
}

/** The program of `regex`, checked and indexed once per compiled pattern. */
function planOf(regex: RE2JS): Plan {
  const known = plans.get(regex)
  if (known) return known
  const re2 = regex.re2() as unknown as { prog: unknown; longest: unknown }
  const prog = re2.prog as { inst: Inst[]; start: number; numCap: number; numLb: number }
  const shaped =
    Array.isArray(prog?.inst) &&
    prog.inst[0]?.op === FAIL &&
    Number.isInteger(prog.start) &&
    prog.numLb === 0 &&
    !re2.longest &&
    prog.inst.every((inst) => inst.op >= ALT && inst.op <= RUNE_ANY_NOT_NL)
  if (!shaped) throw new Error(`allMatches: re2js compiled "${regex.pattern()}" to a program it does not know`)
  const predecessors = prog.inst.map(() => [] as number[])
  const runePcs: number[] = []
  const matchPcs: number[] = []
  prog.inst.forEach((inst, pc) => {
    if (inst.op === MATCH) matchPcs.push(pc)
    else if (inst.op >= RUNE) runePcs.push(pc)
    else if (inst.op !== FAIL) {
      predecessors[inst.out]!.push(pc)
      if (inst.op === ALT || inst.op === ALT_MATCH) predecessors[inst.arg]!.push(pc)
    }
  })
  const plan: Plan = {
    inst: prog.inst,
    ops: Int32Array.from(prog.inst, (inst) => inst.op),
    outs: Int32Array.from(prog.inst, (inst) => inst.out),
    args: Int32Array.from(prog.inst, (inst) => inst.arg),
    start: prog.start,
    numCap: Math.max(2, prog.numCap),
    runePcs: Int32Array.from(runePcs),
    matchPcs: Int32Array.from(matchPcs),
    predecessors: predecessors.map((list) => Int32Array.from(list)),
  }
  plans.set(regex, plan)
  return plan
}

/**
 * The backward pass: `viable[pos * size + pc]` is 1 when instruction `pc` at `pos` can still complete a match over
 * the text from `pos` on (a character instruction: when it takes the character at `pos` and its successor can).
 */
function completable(plan: Plan, text: string, work: SearchWork): Uint8Array {
  const { ops, outs, args, runePcs, matchPcs, predecessors } = plan
  const size = ops.length
  const cells = (text.length + 1) * size
  if (table.length < cells) table = new Uint8Array(Math.max(cells, 2 * table.length))
  const viable = table
  viable.fill(0, 0, cells)
  const pending = new Int32Array(size)
  for (let pos = text.length; pos >= 0; pos--) {
    const base = pos * size
    const context = contextAt(text, pos)
    let count = 0
    for (let i = 0; i < matchPcs.length; i++) {
      viable[base + matchPcs[i]!] = 1
      pending[count++] = matchPcs[i]!
    }
    if (pos < text.length) {
      const rune = runeAt(text, pos)
      const next = (pos + (rune > 0xffff ? 2 : 1)) * size
      for (let i = 0; i < runePcs.length; i++) {
        const pc = runePcs[i]!
        if (viable[next + outs[pc]!] === 1 && takes(plan, pc, rune)) {
          viable[base + pc] = 1
          pending[count++] = pc
        }
      }
    }
    work.steps += runePcs.length + count
    while (count > 0) {
      const into = predecessors[pending[--count]!]!
      for (let i = 0; i < into.length; i++) {
        const from = into[i]!
        if (viable[base + from] === 1) continue
        if (ops[from] === EMPTY_WIDTH && (args[from]! & ~context) !== 0) continue
        viable[base + from] = 1
        pending[count++] = from
        work.steps++
      }
    }
  }
  return viable
}

/**
 * The forward pass over one match: from a start position, RE2's order of exploring alternatives (a thread's first
 * branch before its second, each instruction once per position), entering only instructions that can complete.
 */
class PathWalker {
  readonly #stamp: Int32Array
  #generation = 0
  /** Alternatives and captures to restore: at most two entries of each kind per instruction and position. */
  readonly #stack: Int32Array
  /** The captures of the match being walked, written in place. */
  readonly #caps: Int32Array

  constructor(
    private readonly plan: Plan,
    private readonly text: string,
    private readonly viable: Uint8Array,
    private readonly work: SearchWork,
  ) {
    this.#stamp = new Int32Array(plan.ops.length)
    this.#stack = new Int32Array(4 * plan.ops.length + 4)
    this.#caps = new Int32Array(plan.numCap)
  }

  /** The capture positions of the match that starts at `start` (which the backward pass found can start one). */
  walk(start: number): Int32Array {
    const caps = this.#caps.fill(-1)
    caps[0] = start
    let pos = start
    let pc = this.plan.start
    for (;;) {
      const terminal = this.#settle(pc, pos, caps)
      if (this.plan.ops[terminal] === MATCH) {
        caps[1] = pos
        return caps
      }
      pc = this.plan.outs[terminal]!
      pos += widthAt(this.text, pos)
    }
  }

  /**
   * The first instruction that matches or takes the character at `pos` and can complete, in RE2's order from `pc`;
   * the captures on the way to it are written into `caps`.
   */
  #settle(from: number, pos: number, caps: Int32Array): number {
    const { ops, outs, args, numCap } = this.plan
    const base = pos * ops.length
    const context = contextAt(this.text, pos)
    const stack = this.#stack
    let top = 0
    const generation = ++this.#generation
    let pc = from
    for (;;) {
      while (pc !== 0 && this.#stamp[pc] !== generation) {
        this.#stamp[pc] = generation
        this.work.steps++
        if (this.viable[base + pc] === 0) break
        const op = ops[pc]!
        if (op === MATCH || op >= RUNE) return pc
        if (op === ALT || op === ALT_MATCH) {
          stack[top++] = args[pc]!
          stack[top++] = 0
          pc = outs[pc]!
        } else if (op === CAPTURE) {
          const slot = args[pc]!
          if (slot < numCap) {
            stack[top++] = -slot - 1
            stack[top++] = caps[slot]!
            caps[slot] = pos
          }
          pc = outs[pc]!
        } else if (op === EMPTY_WIDTH) pc = (args[pc]! & ~context) === 0 ? outs[pc]! : 0
        else pc = op === NOP ? outs[pc]! : 0
      }
      if (top === 0) throw new Error('allMatches: no completable path from a completable instruction')
      const restore = stack[--top]!
      const entry = stack[--top]!
      if (entry < 0) {
        caps[-entry - 1] = restore
        pc = 0
      } else pc = entry
    }
  }
}

function takes(plan: Plan, pc: number, rune: number): boolean {
  switch (plan.ops[pc]) {
    case RUNE:
      return plan.inst[pc]!.matchRune(rune)
    case RUNE1:
      return rune === plan.inst[pc]!.runes[0]
    case RUNE_ANY:
      return true
    default:
      return rune !== 10
  }
}

/** The code point at `pos`, as re2js's UTF-16 input reads it (a lone surrogate is itself). */
function runeAt(text: string, pos: number): number {
  const high = text.charCodeAt(pos)
  if (high < 0xd800 || high > 0xdbff || pos + 1 >= text.length) return high
  const low = text.charCodeAt(pos + 1)
  return low >= 0xdc00 && low <= 0xdfff ? (high - 0xd800) * 1024 + (low - 0xdc00) + 0x10000 : high
}

function widthAt(text: string, pos: number): number {
  return runeAt(text, pos) > 0xffff ? 2 : 1
}

function isWordUnit(unit: number): boolean {
  return (unit >= 97 && unit <= 122) || (unit >= 65 && unit <= 90) || (unit >= 48 && unit <= 57) || unit === 95
}

/** Which empty-width conditions hold at `pos`, from the code units on either side (as re2js's `context`). */
function contextAt(text: string, pos: number): number {
  const before = pos > 0 ? text.charCodeAt(pos - 1) : -1
  const after = pos < text.length ? text.charCodeAt(pos) : -1
  let flags = 0
  if (before < 0) flags |= BEGIN_TEXT | BEGIN_LINE
  if (before === 10) flags |= BEGIN_LINE
  if (after < 0) flags |= END_TEXT | END_LINE
  if (after === 10) flags |= END_LINE
  flags |= isWordUnit(before) !== isWordUnit(after) ? WORD_BOUNDARY : NO_WORD_BOUNDARY
  return flags
}
