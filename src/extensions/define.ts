/**
 * What an extension is: a folder `extensions/<name>/` whose `index.ts` (or `.js`)
 * default-exports `defineExtension({...})`. See docs/extensions.md.
 */
import type { ExtensionContext } from './context';
import type { ExtensionSettingDef } from './settings-store';

export type { ExtensionSettingDef } from './settings-store';

/** Extension names: lower-case letters, digits and dashes; they appear in URLs and schema names. */
export const EXTENSION_NAME = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;

export interface ExtensionDefinition {
  /** Unique name; routes mount at `/api/module/<name>`, tables live in schema `ext_<name>` (dashes → underscores). */
  name: string;
  /** The extension's own version (semver), shown in the admin panel and the OpenAPI tags. */
  version: string;
  /** One line for the admin panel. */
  description?: string;
  /** Settings the extension reads; values come from env, basalt.toml, the database or these defaults. */
  settings?: Record<string, ExtensionSettingDef>;
  /**
   * Called once at start, after the extension's migrations ran. Register routes on
   * `ctx.routes`, ensure mail templates, read settings. Throwing marks the extension
   * failed (logged, shown in the admin panel); the platform starts anyway.
   */
  setup(ctx: ExtensionContext): void | Promise<void>;
}

/**
 * Declare an extension. Returns its argument unchanged; it exists for the types.
 *
 * @example
 * ```ts
 * // extensions/hello/index.ts
 * import { defineExtension, t } from 'basalt';
 *
 * export default defineExtension({
 *   name: 'hello',
 *   version: '1.0.0',
 *   settings: { greeting: { kind: 'string', default: 'Hello', description: 'Word used to greet.' } },
 *   setup(ctx) {
 *     ctx.routes.get('/greet/:who', ({ params, request }) =>
 *       ctx.reply(request, { text: `${ctx.settings.get('greeting')}, ${params.who}!` }), {
 *       params: t.Object({ who: t.String({ maxLength: 50 }) }),
 *       response: { 200: ctx.schemas.envelope(t.Object({ text: t.String() })) },
 *       detail: { summary: 'Greet someone' },
 *     });
 *   },
 * });
 * // GET /api/module/hello/greet/Ada → {"success":true,"data":{"text":"Hello, Ada!"},"meta":{…},"errors":[]}
 * ```
 */
export function defineExtension<const D extends ExtensionDefinition>(definition: D): D {
  return definition;
}

/** Why an export is not a usable extension, or undefined when it is. */
export function definitionProblem(def: unknown): string | undefined {
  if (!def || typeof def !== 'object') return 'index must default-export defineExtension({ name, version, setup })';
  const d = def as Partial<ExtensionDefinition>;
  if (typeof d.name !== 'string' || !EXTENSION_NAME.test(d.name) || d.name.length > 40)
    return `name ${JSON.stringify(d.name)} is not valid: use 1-40 lower-case letters, digits and dashes, starting with a letter`;
  if (typeof d.version !== 'string' || !d.version.trim()) return 'version must be a non-empty string such as "1.0.0"';
  if (typeof d.setup !== 'function') return 'setup(ctx) must be a function';
  for (const [key, s] of Object.entries(d.settings ?? {})) {
    if (!/^[a-z][a-z0-9_]*$/.test(key))
      return `setting key '${key}' must be lower-case letters, digits and underscores`;
    if (!s || !['string', 'int', 'bool', 'list'].includes(s.kind))
      return `setting '${key}' needs kind string, int, bool or list`;
  }
  return undefined;
}
