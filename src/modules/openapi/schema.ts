/**
 * TypeBox (the schemas that validate requests) → OpenAPI 3.1 schema objects (JSON
 * Schema 2020-12), as a client generator wants them:
 *  - Elysia's `t.Integer`/`t.Numeric` (a transform over `string | integer`, so query and
 *    path values can arrive as text) → `integer`/`number` with their bounds;
 *  - `t.Nullable(X)` → `type: [X, "null"]` (3.1 style: no `nullable` keyword);
 *  - unions of literals of one type → `enum`; `t.Record(t.String(), X)` → `additionalProperties: X`;
 *  - a schema with a PascalCase `title` becomes a named component under
 *    `components.schemas` and is referenced with `$ref` (so `User` is one type, not seven).
 *
 * The input is never modified: the document is built once at start (docs/operations.md
 * "The OpenAPI document"), and every output object is new.
 */

/** A JSON Schema object, as far as this converter reads one; every other keyword is carried over as is. */
export interface Schema {
  type?: string | string[];
  format?: string;
  title?: string;
  description?: string;
  const?: unknown;
  enum?: unknown[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  properties?: Record<string, Schema>;
  patternProperties?: Record<string, Schema>;
  required?: string[];
  [keyword: string]: unknown;
}

const COMPONENT_TITLE = /^[A-Z][A-Za-z0-9]*$/;
/** Keywords Elysia or TypeBox add that are not JSON Schema (or not meaningful to a client). */
const DROP = new Set(['nullable', 'error', 'elysiaMeta', 'extension', 'transform']);

export class SchemaConverter {
  /** Named components, in the order first met. */
  readonly components: Record<string, Schema> = {};

  /** `schema` (TypeBox or plain JSON Schema) as an OpenAPI 3.1 schema; named parts become `$ref`s. */
  convert(schema: unknown): Schema {
    return this.walk(plain(schema));
  }

  private walk(s: Schema): Schema {
    if (!s || typeof s !== 'object' || Array.isArray(s)) return s;
    const out = this.simplify(s);
    const title = out.title;
    if (typeof title === 'string' && COMPONENT_TITLE.test(title)) return { $ref: this.component(title, out) };
    return this.children(out);
  }

  /** Register `s` (already simplified) as component `name`; a different schema under a taken name gets a suffix. */
  private component(name: string, s: Schema): string {
    const { title: _t, ...rest } = s;
    const body = this.children(rest);
    let n = name;
    for (let i = 2; this.components[n] && JSON.stringify(this.components[n]) !== JSON.stringify(body); i++)
      n = `${name}${i}`;
    this.components[n] ??= body;
    return `#/components/schemas/${n}`;
  }

  private children(s: Schema): Schema {
    const out: Schema = {};
    for (const [k, v] of Object.entries(s)) {
      if (k === 'properties' || k === 'patternProperties' || k === '$defs') {
        out[k] = Object.fromEntries(
          Object.entries(v as Record<string, Schema>).map(([pk, pv]) => [pk, this.walk(pv as Schema)]),
        );
      } else if (k === 'items' || k === 'additionalProperties' || k === 'not' || k === 'contains') {
        out[k] = typeof v === 'object' && v !== null ? this.walk(v as Schema) : v;
      } else if (k === 'anyOf' || k === 'oneOf' || k === 'allOf' || k === 'prefixItems') {
        out[k] = (v as Schema[]).map((x) => this.walk(x));
      } else out[k] = v;
    }
    return out;
  }

  /** One level of rewriting (children are handled by `walk`). */
  private simplify(input: Schema): Schema {
    let s: Schema = {};
    for (const [k, v] of Object.entries(input)) if (!DROP.has(k)) s[k] = v;
    // Elysia's Integer/Numeric: anyOf [string(format integer|numeric), integer|number] → the number branch.
    if (Array.isArray(s.anyOf) && s.anyOf.length === 2) {
      const str = s.anyOf.find((b) => b.type === 'string' && (b.format === 'integer' || b.format === 'numeric'));
      const num = s.anyOf.find((b) => b.type === 'integer' || b.type === 'number');
      if (str && num) {
        const { anyOf: _a, ...outer } = s;
        s = { ...num, ...outer, type: num.type };
      }
    }
    // Nullable: anyOf [X, {type: null}] → X with "null" in its type (or anyOf without the `nullable` keyword).
    if (Array.isArray(s.anyOf) && s.anyOf.length === 2 && s.anyOf.some((b) => b.type === 'null')) {
      const other = s.anyOf.find((b) => b.type !== 'null') as Schema;
      const { anyOf: _a, ...outer } = s;
      if (
        typeof other.type === 'string' &&
        !other.anyOf &&
        !other.oneOf &&
        !other.allOf &&
        !(typeof other.title === 'string' && COMPONENT_TITLE.test(other.title))
      ) {
        s = { ...other, ...outer, type: [other.type, 'null'] };
        if (Array.isArray(s.enum)) s.enum = [...s.enum, null];
      } else s = { ...outer, anyOf: [other, { type: 'null' }] };
    }
    // A union of literals of one type → enum.
    if (
      Array.isArray(s.anyOf) &&
      s.anyOf.length > 0 &&
      s.anyOf.every((b) => 'const' in b && Object.keys(b).every((k) => k === 'const' || k === 'type'))
    ) {
      const types = new Set(s.anyOf.map((b) => b.type));
      if (types.size === 1) {
        const { anyOf, ...outer } = s;
        s = { type: [...types][0], enum: anyOf.map((b) => b.const), ...outer };
      }
    }
    // t.Record(t.String(), X) → additionalProperties: X.
    if (
      s.patternProperties &&
      Object.keys(s.patternProperties).length === 1 &&
      s.patternProperties['^(.*)$'] &&
      !s.properties
    ) {
      const value = s.patternProperties['^(.*)$'];
      const { patternProperties: _p, ...outer } = s;
      s = { ...outer, additionalProperties: Object.keys(value).length ? value : true };
    }
    // An empty `required` list says nothing.
    if (Array.isArray(s.required) && s.required.length === 0) delete s.required;
    return s;
  }
}

/**
 * Each route schema as it was when the document was first built. Route modules declare
 * their schemas once per process, and Elysia adds `additionalProperties: false` to a
 * route's top-level schemas when it compiles that route on its first request; a second
 * app in the same process (tests, a rebuilt app) would otherwise document what an earlier
 * one's traffic left behind.
 */
const pristine = new WeakMap<object, string>();

/** A plain JSON copy (TypeBox's symbol keys dropped), as first seen. */
export function plain(schema: unknown): Schema {
  if (schema === undefined) return {};
  if (typeof schema !== 'object' || schema === null) return JSON.parse(JSON.stringify(schema));
  let text = pristine.get(schema);
  if (text === undefined) pristine.set(schema, (text = JSON.stringify(schema)));
  return JSON.parse(text);
}

/** True when TypeBox marks the schema optional (e.g. a body declared `t.Optional(...)`). */
export function isOptional(schema: unknown): boolean {
  if (!schema || typeof schema !== 'object') return false;
  return Object.getOwnPropertySymbols(schema).some(
    (k) => k.description === 'TypeBox.Optional' && (schema as Record<symbol, unknown>)[k] === 'Optional',
  );
}
