/** The part of `ws` (8.x) bench/rm.ts uses to reach wrangler dev's inspector; the package ships no types. */
declare module 'ws' {
  export default class WebSocket {
    constructor(url: string)
    on(event: 'open', listener: () => void): this
    on(event: 'error', listener: (error: Error) => void): this
    on(event: 'message', listener: (data: Buffer) => void): this
    send(data: string): void
    close(): void
  }
}
