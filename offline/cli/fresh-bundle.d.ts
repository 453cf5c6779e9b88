/** See fresh-bundle.js. */
export declare function freshBundleEntry(bundleDir: URL): URL | undefined
