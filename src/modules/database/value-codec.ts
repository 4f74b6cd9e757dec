/**
 * JSON values ⇄ Postgres values, chosen by the catalog type of the column, the same
 * on both engines (docs/database.md, "Value representation").
 *
 * Input: every value is sent as one text bind parameter and cast in SQL
 * (`$1::text::integer`, `$2::text::jsonb`, `$3::text::bytea`), so neither driver's
 * own guesses about JS types play a part and both engines see identical input. The
 * cast type comes from the catalog, never from the request. Values the common
 * types cannot hold are refused here, before the database, so the error can name
 * the column even inside a transaction.
 *
 * Output: int8/numeric as strings (no precision loss), timestamps as ISO 8601
 * strings (read through `to_json`, which keeps microseconds), json as JSON, bytea as
 * base64, arrays as arrays (read as their text form and parsed here, because the
 * external driver's array parser turns NULL elements into "NULL"/NaN).
 */
import type { Column, ValueKind } from './catalog-types';
import { quoteIdent } from '../../db/engine';

export class ValueError extends Error {}

const INT = /^[+-]?\d+$/;
const NUM = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;
const UUID = /^\{?[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\}?$/i;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const SPECIAL_FLOAT = /^[+-]?(nan|infinity|inf)$/i;

/** One scalar (or array element) → its Postgres text input form. */
function scalarText(kind: ValueKind, v: unknown, col: Column): string {
  switch (kind) {
    case 'json':
      return JSON.stringify(v);
    case 'int':
    case 'bigint':
      if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
      if (typeof v === 'string' && INT.test(v.trim())) return v.trim();
      throw new ValueError('expects an integer (a JSON number, or a string of digits for values beyond 2^53)');
    case 'float':
      if (typeof v === 'number') return String(v);
      if (typeof v === 'string' && (NUM.test(v.trim()) || SPECIAL_FLOAT.test(v.trim()))) return v.trim();
      throw new ValueError('expects a number');
    case 'numeric':
      if (typeof v === 'number' && Number.isFinite(v)) return String(v);
      if (typeof v === 'string' && (NUM.test(v.trim()) || /^nan$/i.test(v.trim()))) return v.trim();
      throw new ValueError('expects a decimal number (a JSON number or a numeric string such as "12.50")');
    case 'bool':
      if (typeof v === 'boolean') return v ? 'true' : 'false';
      throw new ValueError('expects true or false');
    case 'uuid':
      if (typeof v === 'string' && UUID.test(v)) return v;
      throw new ValueError('expects a UUID string');
    case 'bytea':
      if (typeof v === 'string' && BASE64.test(v)) return '\\x' + Buffer.from(v, 'base64').toString('hex');
      throw new ValueError('expects base64 text (standard alphabet, padded)');
    case 'text':
      if (typeof v === 'string') {
        if (col.maxLength !== null && !col.isArray && [...v].length > col.maxLength)
          throw new ValueError(`is longer than ${col.maxLength} characters`);
        return v;
      }
      if (typeof v === 'number' || typeof v === 'boolean') return String(v);
      throw new ValueError('expects a string');
    default:
      // dates, times, enums, network types...: Postgres parses the text and names the problem.
      if (typeof v === 'string') return v;
      if (typeof v === 'number' || typeof v === 'boolean') return String(v);
      throw new ValueError('expects a string');
  }
}

/** Postgres array literal: every element quoted, NULL bare; nested arrays for more dimensions. */
function arrayLiteral(kind: ValueKind, v: unknown[], col: Column): string {
  const parts = v.map((e) => {
    if (e === null) return 'NULL';
    if (Array.isArray(e) && kind !== 'json') return arrayLiteral(kind, e, col);
    return '"' + scalarText(kind, e, col).replace(/\\/g, '\\\\').replace(/"/g, '\\"') + '"';
  });
  return '{' + parts.join(',') + '}';
}

/** A JSON value for `col` → the text bind parameter (null stays SQL NULL). */
export function encodeValue(col: Column, v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (col.isArray) {
    if (!Array.isArray(v)) throw new ValueError('expects an array');
    return arrayLiteral(col.kind, v, col);
  }
  return scalarText(col.kind, v, col);
}

/** `$n::text::<type>`: the bind parameter cast to the column's type (type name from the catalog). */
export function castParam(n: number, col: Column, asArrayOf = false): string {
  return `$${n}::text::${col.castType}${asArrayOf ? '[]' : ''}`;
}

/** Encode a list for `in`/`not_in`: one array parameter of the column's type. */
export function encodeList(col: Column, values: unknown[]): string {
  return arrayLiteral(col.kind, values, col);
}

/**
 * The select-list expression that reads `col` in the form `decodeValue` expects.
 * Plain column reference for most types, so the statement stays simple.
 */
export function selectExpr(col: Column): string {
  const q = quoteIdent(col.name);
  if (col.isArray) return needsTextArray(col.kind) ? `${q}::text AS ${q}` : `${q}`;
  switch (col.kind) {
    case 'timestamptz':
      return `(to_json(${q} AT TIME ZONE 'UTC') #>> '{}') AS ${q}`;
    case 'timestamp':
    case 'date':
      return `(to_json(${q}) #>> '{}') AS ${q}`;
    default:
      return q;
  }
}

/**
 * The SQL expression of `col`'s value (read as `ref`) inside JSON built by the statement (a
 * related row of `expand`, docs/database.md "Relations"): already in the API's representation
 * where JSON can carry it (int8 and numeric as strings, timestamps as ISO 8601 in UTC, bytea as
 * base64), arrays as their text form for `decodeExpand` to parse as top-level arrays are.
 */
export function jsonValue(col: Column, ref: string): string {
  if (col.isArray) return `${ref}::text`;
  switch (col.kind) {
    case 'bigint':
    case 'numeric':
    case 'other':
      return `${ref}::text`;
    case 'bytea':
      return `translate(encode(${ref}, 'base64'), chr(10), '')`;
    case 'timestamptz':
      return `CASE WHEN isfinite(${ref}) THEN (to_json(${ref} AT TIME ZONE 'UTC') #>> '{}') || 'Z' ELSE ${ref}::text END`;
    case 'timestamp':
    case 'date':
      return `(to_json(${ref}) #>> '{}')`;
    default:
      return ref;
  }
}

/** Minimal view of the query builder's `NestedDecode` (kept here so the codec imports nothing of the builder). */
interface Nested {
  arrays: readonly Column[];
  relations: readonly { name: string; many: boolean; decode: Nested }[];
}

/** A row's `expand` object as the statement built it → the API's representation, in place. */
export function decodeExpand(decode: Nested, expand: unknown): unknown {
  if (typeof expand !== 'object' || expand === null) return expand;
  const e = expand as Record<string, unknown>;
  for (const rel of decode.relations) {
    const v = e[rel.name];
    const rows = rel.many ? (Array.isArray(v) ? v : []) : v ? [v] : [];
    for (const row of rows as Record<string, unknown>[]) {
      for (const c of rel.decode.arrays) row[c.name] = decodeValue(c, row[c.name]);
      if (rel.decode.relations.length) decodeExpand(rel.decode, row.expand);
    }
  }
  return expand;
}

/** The running size of a bounded answer's rows (`boundAnswer`), beside the rows' own columns. */
const RUNNING = '"basalt answer bytes"';
/** What a failed bound puts in the database's error (an integer cast of this text), for `answerLimitOf`. */
const OVER = 'db.max_response_bytes';
const OVER_RE = /db\.max_response_bytes (\d+) < \d+/;
/** Kinds whose value prints in at most this many characters: counted as that, not measured. */
const FIXED: Partial<Record<ValueKind, number>> = {
  int: 11,
  bigint: 22,
  float: 24,
  bool: 5,
  uuid: 38,
  timestamptz: 36,
  timestamp: 36,
  date: 16,
};

/**
 * The bytes the value of `col` (read as `ref`, its select-list output) adds to the answer, as a
 * SQL expression, or a number when its kind prints short. Measured on the value's text without
 * reading it where Postgres can (`octet_length` of text and bytea takes the stored length, not
 * the compressed one, and detoasts nothing); other kinds through their text form.
 */
function valueBytes(col: Column, ref: string): string | number {
  if (!col.isArray) {
    const fixed = FIXED[col.kind];
    if (fixed !== undefined) return fixed;
    if (col.kind === 'bytea') return `(octet_length(${ref}) + 2) / 3 * 4`; // base64
    if (col.kind === 'text' && col.castType === 'character') return `octet_length(${ref})`;
  }
  // Arrays are selected as text already; text, varchar, citext: no conversion.
  return `octet_length(${ref}::text)`;
}

/**
 * `sql` (a write with RETURNING, whose rows have `columns`) bounded to `maxBytes` bytes (the
 * database's count of the answer's JSON: names, values' text, punctuation): a running sum of
 * each row's size beside the rows, and the statement fails at the first row that would pass
 * it, so no more than the bound is ever sent or held, on either engine, and the write fails as
 * a whole: nothing is written. (A select is bounded as it is read instead: query-builder.ts.) The failure is recognized by `answerLimitOf`. Escapes in JSON strings (quotes,
 * control characters) are not counted. docs/database.md, "Answer size".
 */
export function boundAnswer(sql: string, columns: readonly Column[], maxBytes: number): string {
  let fixed = 2; // {} per row, then "name": and a comma per value
  const measured: string[] = [];
  for (const c of columns) {
    fixed += c.name.length + 4;
    const v = valueBytes(c, `a.${c.quoted}`);
    if (typeof v === 'number') fixed += v;
    else measured.push(`coalesce(${v}, 0)`);
  }
  // A row's size as int4, so its running sum is int8 (a sum of int8 would be numeric, slower).
  const size = [String(fixed), ...measured].join(' + ');
  const list = columns.map((c) => `b.${c.quoted}`).join(', ');
  // The setting's integer, written into the text: no bind parameter (a write may already use all
  // 65,535), and a value the settings schema checked, never a request's.
  const limit = `${Math.trunc(maxBytes)}::int8`;
  const rows = /^\s*SELECT\b/i.test(sql) ? `(${sql}) a` : 'a';
  const ctx = rows === 'a' ? `WITH a AS (${sql}) ` : '';
  return (
    `${ctx}SELECT ${list} FROM (SELECT a.*, sum(${size}) OVER (ROWS UNBOUNDED PRECEDING) AS ${RUNNING} FROM ${rows}) b` +
    ` WHERE CASE WHEN b.${RUNNING} <= ${limit} THEN true ELSE ('${OVER} ' || ${limit} || ' < ' || b.${RUNNING})::int4 IS NULL END`
  );
}

/** The limit a statement of `boundAnswer` failed on, or undefined for any other error. */
export function answerLimitOf(err: { code: string; message: string }): number | undefined {
  if (err.code !== '22P02') return undefined;
  const m = OVER_RE.exec(err.message);
  return m ? Number(m[1]) : undefined;
}

// Arrays are read as text and parsed here (see the file comment); all of them, for one path.
function needsTextArray(_kind: ValueKind): boolean {
  return true;
}

/** Kinds whose driver value already is the API representation. */
const PASS_THROUGH = new Set<ValueKind>(['int', 'bigint', 'numeric', 'bool', 'text', 'json', 'uuid', 'other']);

/** Result rows → JSON values, in place: only the columns whose driver value is not the API representation are touched. */
export function decodeRows<R extends Record<string, unknown>>(columns: readonly Column[], rows: R[]): R[] {
  for (const c of columns) {
    if (!c.isArray && PASS_THROUGH.has(c.kind)) continue;
    for (const r of rows) (r as Record<string, unknown>)[c.name] = decodeValue(c, r[c.name]);
  }
  return rows;
}

/** Output of one column → JSON. */
export function decodeValue(col: Column, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (col.isArray) return typeof v === 'string' ? parseArrayText(v).map((e) => decodeArrayElement(col.kind, e)) : v;
  switch (col.kind) {
    case 'bytea':
      return Buffer.from(v as Uint8Array).toString('base64');
    case 'timestamptz':
      return typeof v === 'string' && /^\d/.test(v) ? v + 'Z' : v;
    case 'float':
      return typeof v === 'number' && !Number.isFinite(v) ? String(v) : v;
    default:
      if (v instanceof Date) return v.toISOString();
      if (v instanceof Uint8Array) return Buffer.from(v).toString('base64');
      return v;
  }
}

type Parsed = string | null | Parsed[];

function decodeArrayElement(kind: ValueKind, e: Parsed): unknown {
  if (e === null) return null;
  if (Array.isArray(e)) return e.map((x) => decodeArrayElement(kind, x));
  switch (kind) {
    case 'int':
      return Number(e);
    case 'float': {
      const n = Number(e);
      return Number.isFinite(n) ? n : e;
    }
    case 'bool':
      return e === 't' || e === 'true';
    case 'json':
      return JSON.parse(e);
    case 'bytea':
      return Buffer.from(e.slice(2), 'hex').toString('base64');
    case 'timestamptz':
      return isoFromPgText(e);
    case 'timestamp':
      return /^\d/.test(e) ? e.replace(' ', 'T') : e;
    default:
      return e;
  }
}

const PG_TSTZ = /^(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+)?([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?$/;
const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/**
 * A timestamptz element as Postgres prints it in the session time zone
 * (`2024-01-02 08:34:05.12+05:30`) → ISO 8601 UTC (`2024-01-02T03:04:05.12Z`), as
 * scalar timestamptz columns come back. Array elements cannot be read through
 * `AT TIME ZONE 'UTC'`, so the offset is applied here; the fraction is kept as
 * printed (microseconds). `infinity` and BC dates are returned as printed.
 */
function isoFromPgText(s: string): string {
  const m = PG_TSTZ.exec(s);
  if (!m) return s;
  const offset = (m[8] === '-' ? -1 : 1) * (Number(m[9]) * 3600 + Number(m[10] ?? 0) * 60 + Number(m[11] ?? 0));
  const d = new Date(0);
  // setUTCFullYear, not Date.UTC: Date.UTC maps years 0–99 to 1900–1999.
  d.setUTCFullYear(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  d.setUTCHours(Number(m[4]), Number(m[5]), Number(m[6]) - offset, 0);
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}${m[7] ?? ''}Z`;
}

/** Parse Postgres array text output (`{a,"b c",NULL,{1,2}}`) into nested string arrays. */
export function parseArrayText(text: string): Parsed[] {
  let i = 0;
  // Arrays with explicit bounds print as `[0:2]={...}`.
  if (text[0] === '[') i = text.indexOf('=') + 1;
  const parse = (): Parsed[] => {
    const out: Parsed[] = [];
    i++; // '{'
    while (i < text.length) {
      const c = text[i];
      if (c === '}') {
        i++;
        return out;
      }
      if (c === ',') {
        i++;
        continue;
      }
      if (c === '{') {
        out.push(parse());
        continue;
      }
      if (c === '"') {
        let s = '';
        i++;
        while (i < text.length && text[i] !== '"') {
          if (text[i] === '\\') i++;
          s += text[i++];
        }
        i++;
        out.push(s);
        continue;
      }
      let j = i;
      while (j < text.length && text[j] !== ',' && text[j] !== '}') j++;
      const raw = text.slice(i, j);
      out.push(raw === 'NULL' ? null : raw);
      i = j;
    }
    return out;
  };
  return parse();
}
