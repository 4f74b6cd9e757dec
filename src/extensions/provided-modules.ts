/**
 * Packages the platform lends to extensions. An extension imports them by name
 * and gets the platform's own copy, bundled in the executable: the folder beside
 * `basalt` needs no node_modules, and `elysia` is the very instance the routes
 * are mounted on. Documented in docs/extensions.md ("What you can import").
 */
import { plugin } from 'bun';
import * as elysia from 'elysia';
import * as typebox from '@sinclair/typebox';
import * as fileType from 'file-type';
import busboy from 'busboy';
import * as api from './api';

export const PROVIDED_MODULES: Record<string, Record<string, unknown>> = {
  basalt: api,
  elysia,
  '@sinclair/typebox': typebox,
  'file-type': fileType,
  busboy: { default: busboy },
};

let registered = false;

/** Register the virtual modules once per process (before the first extension import). */
export function provideModules(): void {
  if (registered) return;
  registered = true;
  plugin({
    name: 'basalt-extension-modules',
    setup(build) {
      for (const [specifier, exports] of Object.entries(PROVIDED_MODULES)) build.module(specifier, () => ({ exports, loader: 'object' }));
    },
  });
}
