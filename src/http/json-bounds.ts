/**
 * The bound on the shape of a JSON request body (docs/operations.md, "Limits and bad
 * input"): how deep arrays and objects nest (`web.max_json_depth`) and how many
 * elements one array, or members one object, holds (`web.max_json_items`).
 *
 * Checked on the body text before `JSON.parse`, so nothing that walks a parsed value
 * (schema validation, the Database API's query builder, JSON.stringify, PostgreSQL's
 * recursive jsonb parser) ever sees a value nested deeper than the bound. One pass over
 * the text, no recursion, memory proportional to the depth bound: linear in the body
 * whatever its shape. The text need not be valid JSON; `JSON.parse` judges that after.
 */

export interface JsonBounds {
  maxDepth: number;
  maxItems: number;
}

export type JsonShapeProblem = { kind: 'depth'; limit: number } | { kind: 'items'; limit: number };

const QUOTE = 34; // "
const BACKSLASH = 92;
const COMMA = 44;
const OPEN_ARRAY = 91; // [
const CLOSE_ARRAY = 93;
const OPEN_OBJECT = 123; // {
const CLOSE_OBJECT = 125;

/** Commas seen at each open level; reused between calls (the scan is synchronous). */
let commas = new Int32Array(65);

/** The first bound the text breaks, or null when its shape is within both. */
export function jsonShapeProblem(text: string, { maxDepth, maxItems }: JsonBounds): JsonShapeProblem | null {
  if (commas.length < maxDepth + 1) commas = new Int32Array(maxDepth + 1);
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // Skip the string: to the next quote not escaped by an odd run of backslashes.
      for (;;) {
        const q = text.indexOf('"', i + 1);
        if (q === -1) return null; // unterminated: not JSON, JSON.parse says so
        let b = q - 1;
        while (text.charCodeAt(b) === BACKSLASH) b--;
        i = q;
        if ((q - 1 - b) % 2 === 0) break;
      }
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (depth === maxDepth) return { kind: 'depth', limit: maxDepth };
      commas[++depth] = 0;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      if (depth > 0) depth--;
    } else if (c === COMMA && depth > 0) {
      // n commas at one level: n + 1 elements (or members).
      if (++commas[depth]! >= maxItems) return { kind: 'items', limit: maxItems };
    }
  }
  return null;
}

/** A JSON content type: application/json or any +json type (what the JSON areas accept). */
export function isJsonType(contentType: string | null): boolean {
  if (!contentType) return false;
  const semi = contentType.indexOf(';');
  const type = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  return type === 'application/json' || type.endsWith('+json');
}
