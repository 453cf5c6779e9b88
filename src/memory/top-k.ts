/**
 * The best `k` of a stream of scored items, in O(n log k) with a bounded min-heap whose root is the worst kept.
 * Equal scores are ordered by `tieBreak` (negative when `a` ranks first), so results never depend on insertion order.
 * @example const top = new TopK(2, (a, b) => a - b); top.push(0.9, 7); top.push(0.2, 3); top.push(0.5, 1); top.sorted()
 *   // [{ item: 7, score: 0.9 }, { item: 1, score: 0.5 }]
 */
export class TopK {
  readonly #scores: Float64Array
  readonly #items: Int32Array
  #size = 0

  constructor(
    readonly k: number,
    private readonly tieBreak: (a: number, b: number) => number,
  ) {
    this.#scores = new Float64Array(Math.max(0, k))
    this.#items = new Int32Array(Math.max(0, k))
  }

  /** Offers one item; kept only while it ranks among the best `k` seen. */
  push(score: number, item: number): void {
    if (this.#size < this.k) {
      this.#scores[this.#size] = score
      this.#items[this.#size] = item
      this.#siftUp(this.#size++)
    } else if (this.k > 0 && this.#ranksAfter(this.#scores[0]!, this.#items[0]!, score, item)) {
      this.#scores[0] = score
      this.#items[0] = item
      this.#siftDown(0)
    }
  }

  /** The kept items, best first. */
  sorted(): { item: number; score: number }[] {
    const kept = Array.from({ length: this.#size }, (_, i) => ({ item: this.#items[i]!, score: this.#scores[i]! }))
    return kept.sort((a, b) => b.score - a.score || this.tieBreak(a.item, b.item))
  }

  /** Whether (scoreA, itemA) ranks after (scoreB, itemB). */
  #ranksAfter(scoreA: number, itemA: number, scoreB: number, itemB: number): boolean {
    return scoreA < scoreB || (scoreA === scoreB && this.tieBreak(itemA, itemB) > 0)
  }

  #worse(i: number, j: number): boolean {
    return this.#ranksAfter(this.#scores[i]!, this.#items[i]!, this.#scores[j]!, this.#items[j]!)
  }

  #swap(i: number, j: number): void {
    const score = this.#scores[i]!
    const item = this.#items[i]!
    this.#scores[i] = this.#scores[j]!
    this.#items[i] = this.#items[j]!
    this.#scores[j] = score
    this.#items[j] = item
  }

  #siftUp(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!this.#worse(i, parent)) return
      this.#swap(i, parent)
      i = parent
    }
  }

  #siftDown(i: number): void {
    for (;;) {
      const left = 2 * i + 1
      const right = left + 1
      let worst = i
      if (left < this.#size && this.#worse(left, worst)) worst = left
      if (right < this.#size && this.#worse(right, worst)) worst = right
      if (worst === i) return
      this.#swap(i, worst)
      i = worst
    }
  }
}
