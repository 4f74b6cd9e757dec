import pkg from '../package.json' with { type: 'json' };

/** The platform version: package.json's, also OpenAPI `info.version` and `basalt version`. */
export const VERSION: string = pkg.version;
