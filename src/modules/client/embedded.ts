/**
 * The JS client (clients/js) embedded in the executable: null in a checkout, where it is
 * bundled at first request (./bundle.ts); build.ts compiles the executable with this module
 * replaced by one that imports the built files (Bun.build `files`), as the panel's.
 */
export interface EmbeddedClient {
  js: string;
  dts: string;
}

export const embeddedClient: EmbeddedClient | null = null;
