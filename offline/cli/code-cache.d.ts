/** See code-cache.js. */
export declare function codeCacheFile(bundle: URL, argv: string[]): string
export declare function loadWithCodeCache(
  bundle: URL,
  cacheFile: string,
): { exports: Record<string, unknown>; cached: boolean; save: () => void }
