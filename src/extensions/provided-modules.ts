/**
 * Packages the platform lends to extensions. An extension imports them by name
 * and gets the platform's own copy, bundled in the executable: the folder beside
 * `basalt` needs no node_modules, and `elysia` is the very instance the routes
 * are mounted on. Documented in docs/extensions.md ("What you can import").
 *
 * Only packages whose CommonJS export is a plain object are lent this way: a virtual
 * module is seen by every later `require` in the process, and Bun cannot scope it to
 * extension files (runtime `onResolve` does not fire for bare specifiers). `busboy`,
 * whose export is a function, is re-exported by `basalt` instead.
 */
import { plugin } from 'bun';
import * as elysia from 'elysia';
import * as typebox from '@sinclair/typebox';
import * as fileType from 'file-type';
import * as api from './api';

export const PROVIDED_MODULES: Record<string, Record<string, unknown>> = {
  basalt: api,
  elysia,
  '@sinclair/typebox': typebox,
  'file-type': fileType,
};

let registered = false;

/** Register the virtual modules once per process (before the first extension import). */
export function provideModules(): void {
  if (registered) return;
  registered = true;
  plugin({
    name: 'basalt-extension-modules',
    setup(build) {
      for (const [specifier, exports] of Object.entries(PROVIDED_MODULES))
        build.module(specifier, () => ({ exports, loader: 'object' }));
    },
  });
}
