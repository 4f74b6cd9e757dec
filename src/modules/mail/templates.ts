/**
 * Mail templates: stored in `basalt.mail_templates`, rendered with Liquid.
 *
 * Why Liquid (liquidjs): it was designed for untrusted, user-edited templates
 * (Shopify themes). A template can only read the variables it is given and apply
 * a fixed set of filters; there is no way to run code, reach the prototype chain
 * (ownPropertyOnly) or the file system (includes resolve only from an empty
 * in-memory map). HTML output is escaped by default (outputEscape), and parse,
 * render-time and memory limits bound what one template can cost.
 */
import { Liquid, type Template } from 'liquidjs';
import type { Queryable } from '../../db/engine';
import { PgError } from '../../db/engine';
import { MailErrors } from './errors';
import { checkSubject, MAX_BODY_CHARS, MAX_SUBJECT_CHARS, type MailMessage, type RenderedMail } from './message';

/** A stored template. `subject`, `html` and `text` are Liquid sources. */
export interface MailTemplate {
  name: string;
  subject: string;
  html: string | null;
  text: string | null;
  created_at?: Date;
  updated_at?: Date;
}

/** What `put` and `ensure` take. At least one of html/text. */
export interface TemplateInput {
  name: string;
  subject: string;
  html?: string | null;
  text?: string | null;
}

export const TEMPLATE_NAME = /^[a-z0-9][a-z0-9_.-]{0,99}$/;
const MAX_SOURCE_CHARS = 500_000;

const safe = {
  strictVariables: true,
  // An undefined variable in an {% if %} / {% unless %} condition is false, not an error:
  // that is how a template has optional variables (docs/mail.md, "Templates").
  lenientIf: true,
  strictFilters: true,
  ownPropertyOnly: true,
  // include/render/layout look templates up here only: never on disk.
  templates: {},
  relativeReference: false,
  parseLimit: 2 * MAX_SOURCE_CHARS,
  // Rendering runs in the request; a loop over a huge variable must not hold the process.
  renderLimit: 500,
  memoryLimit: 50_000_000,
  cache: 200,
} as const;
/** HTML parts: every `{{ value }}` is HTML-escaped; `| raw` opts out explicitly. */
const htmlEngine = new Liquid({ ...safe, outputEscape: 'escape' });
/** Subject and text parts: plain text, nothing to escape. */
const textEngine = new Liquid(safe);

type Part = 'subject' | 'html' | 'text';
const engineFor = (part: Part) => (part === 'html' ? htmlEngine : textEngine);

function firstLine(e: unknown): string {
  return String((e as Error)?.message ?? e)
    .split('\n')[0]!
    .slice(0, 300);
}

/** Parse a template part; a syntax error is a 400 naming the part. */
export function compile(part: Part, source: string, field: string = part): Template[] {
  try {
    return engineFor(part).parse(source);
  } catch (e) {
    throw MailErrors.invalid(`Template ${part} does not parse: ${firstLine(e)}`, { [field]: firstLine(e) });
  }
}

/** Top-level variable names a template part reads (for "missing variable" errors). */
function globals(part: Part, tpl: Template[]): string[] {
  try {
    return engineFor(part).globalVariablesSync(tpl);
  } catch {
    return [];
  }
}

// The tags that open and close a conditional block; what lies between is rendered only when its condition holds.
const CONDITIONAL_TAG = /\{%-?\s*(if|unless|endif|endunless)\b[^%]*?-?%\}/g;

/** The source without its {% if %} / {% unless %} blocks (unbalanced tags: the source as it is). */
function withoutConditionals(source: string): string {
  let out = '';
  let depth = 0;
  let from = 0;
  for (const m of source.matchAll(CONDITIONAL_TAG)) {
    if (m[1] === 'if' || m[1] === 'unless') {
      if (depth === 0) out += source.slice(from, m.index);
      depth++;
    } else if (depth > 0 && --depth === 0) from = m.index + m[0].length;
  }
  return depth === 0 ? out + source.slice(from) : source;
}

/**
 * The variables a part cannot render without: those it reads outside every {% if %} /
 * {% unless %} block. One read only inside such a block is optional: a send without it
 * renders (the condition is false); one read inside a block whose condition holds is
 * still named as missing at render time.
 */
function requiredGlobals(part: Part, source: string, parsed: Template[]): string[] {
  const stripped = withoutConditionals(source);
  if (stripped === source) return globals(part, parsed);
  try {
    return globals(part, engineFor(part).parse(stripped));
  } catch {
    return globals(part, parsed);
  }
}

async function renderPart(
  part: Part,
  tpl: Template[],
  vars: Record<string, unknown>,
  template: string,
): Promise<string> {
  let out: string;
  try {
    out = String(await engineFor(part).render(tpl, vars));
  } catch (e) {
    // A nested property the template reads (user.name) but the variables lack, or a limit.
    const msg = firstLine(e);
    const undef = /undefined variable: ([^,\s]+)/.exec(msg);
    if (undef) throw MailErrors.missingVariables([undef[1]!]);
    throw MailErrors.invalid(`Template '${template}' could not be rendered: ${msg}`, { [`template.${part}`]: msg });
  }
  if (out.length > MAX_BODY_CHARS)
    throw MailErrors.invalid(`The rendered ${part} is larger than ${MAX_BODY_CHARS} characters.`, {
      [part]: 'too large after rendering',
    });
  return out;
}

/** Render a validated message into what will be sent; inline parts pass through untouched. */
export async function renderMessage(msg: MailMessage, tpl: MailTemplate | undefined): Promise<RenderedMail> {
  if (!tpl) return { to: msg.to, subject: msg.subject!, text: msg.text || undefined, html: msg.html || undefined };
  const vars = msg.variables ?? {};
  const parts: [Part, Template[], string][] = [];
  if (msg.subject === undefined)
    parts.push(['subject', compile('subject', tpl.subject, 'template.subject'), tpl.subject]);
  if (tpl.html) parts.push(['html', compile('html', tpl.html, 'template.html'), tpl.html]);
  if (tpl.text) parts.push(['text', compile('text', tpl.text, 'template.text'), tpl.text]);
  // Name every missing variable at once, not one per attempt; optional ones (read only under {% if %}) may be left out.
  const missing = new Set<string>();
  for (const [part, parsed, source] of parts)
    for (const n of requiredGlobals(part, source, parsed)) if (!Object.hasOwn(vars, n)) missing.add(n);
  if (missing.size) throw MailErrors.missingVariables([...missing].sort());
  const out: Partial<Record<Part, string>> = {};
  for (const [part, parsed] of parts) out[part] = await renderPart(part, parsed, vars, tpl.name);
  const subject = msg.subject ?? out.subject!.trim();
  const fields: Record<string, string> = {};
  // A variable could carry CR/LF into the subject header: refuse rather than fold it.
  checkSubject(subject, fields);
  if (fields.subject) throw MailErrors.invalid(`The rendered subject is not valid: ${fields.subject}.`, fields);
  return { to: msg.to, subject, html: out.html, text: out.text, template: tpl.name };
}

/** The top-level variables a template's parts read, sorted (the admin panel lists them). Parts that do not parse are skipped. */
export function templateVariables(tpl: Pick<MailTemplate, 'subject' | 'html' | 'text'>): string[] {
  const names = new Set<string>();
  for (const part of ['subject', 'html', 'text'] as const) {
    const source = tpl[part];
    if (!source) continue;
    try {
      for (const n of globals(part, compile(part, source))) names.add(n);
    } catch {}
  }
  return [...names].sort();
}

/** Of templateVariables, those read only inside {% if %} / {% unless %} blocks: a send may leave them out. */
export function optionalTemplateVariables(tpl: Pick<MailTemplate, 'subject' | 'html' | 'text'>): string[] {
  const required = new Set<string>();
  for (const part of ['subject', 'html', 'text'] as const) {
    const source = tpl[part];
    if (!source) continue;
    try {
      for (const n of requiredGlobals(part, source, compile(part, source))) required.add(n);
    } catch {}
  }
  return templateVariables(tpl).filter((n) => !required.has(n));
}

/** Check a template before it is stored: name, subject, sizes, and that every part parses. */
export function checkTemplate(input: TemplateInput): void {
  const fields: Record<string, string> = {};
  if (typeof input.name !== 'string' || !TEMPLATE_NAME.test(input.name))
    fields.name = 'lowercase letters, digits, _ . - (1-100 characters, starting with a letter or digit)';
  if (typeof input.subject !== 'string' || input.subject.trim() === '') fields.subject = 'required';
  else if (/[\r\n]/.test(input.subject)) fields.subject = 'must not contain line breaks';
  else if (input.subject.length > MAX_SUBJECT_CHARS) fields.subject = `at most ${MAX_SUBJECT_CHARS} characters`;
  if (!input.html && !input.text) fields.html = 'give html, text or both';
  for (const part of ['html', 'text'] as const) {
    const v = input[part];
    if (v != null && (typeof v !== 'string' || v.length > MAX_SOURCE_CHARS))
      fields[part] = `must be a string of at most ${MAX_SOURCE_CHARS} characters`;
  }
  const first = Object.entries(fields)[0];
  if (first) throw MailErrors.invalid(`Invalid template: ${first[0]}: ${first[1]}.`, fields);
  compile('subject', input.subject);
  if (input.html) compile('html', input.html);
  if (input.text) compile('text', input.text);
}

/** The stored templates (one table; every instance sees edits at once). */
export interface TemplateStore {
  /** The template, or undefined. */
  get(name: string): Promise<MailTemplate | undefined>;
  /** Create or replace; validated and parsed first (400 validation_error on a bad template). */
  put(input: TemplateInput): Promise<MailTemplate>;
  list(): Promise<MailTemplate[]>;
  /** Insert if absent, never overwrite (defaults an operator may have edited). Returns whether it was inserted. */
  ensure(input: TemplateInput): Promise<boolean>;
  /** Remove; returns whether it existed. */
  delete(name: string): Promise<boolean>;
  /** Render `variables` into a stored template without sending (admin preview). 404 template_not_found. */
  preview(name: string, variables: Record<string, unknown>): Promise<Pick<RenderedMail, 'subject' | 'html' | 'text'>>;
  /** Check and render a template that is not stored (yet): the editor's live preview. */
  render(
    input: TemplateInput,
    variables: Record<string, unknown>,
  ): Promise<Pick<RenderedMail, 'subject' | 'html' | 'text'>>;
}

const COLUMNS = 'name, subject, html, text, created_at, updated_at';

export function templateStore(db: Queryable): TemplateStore {
  const store: TemplateStore = {
    async get(name) {
      if (typeof name !== 'string' || !TEMPLATE_NAME.test(name)) return undefined;
      const { rows } = await db.query<MailTemplate>(`SELECT ${COLUMNS} FROM basalt.mail_templates WHERE name = $1`, [
        name,
      ]);
      return rows[0];
    },
    async put(input) {
      checkTemplate(input);
      const { rows } = await db.query<MailTemplate>(
        `INSERT INTO basalt.mail_templates (name, subject, html, text) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name) DO UPDATE SET subject = EXCLUDED.subject, html = EXCLUDED.html, text = EXCLUDED.text, updated_at = now()
         RETURNING ${COLUMNS}`,
        [input.name, input.subject, input.html || null, input.text || null],
      );
      return rows[0]!;
    },
    async list() {
      return (await db.query<MailTemplate>(`SELECT ${COLUMNS} FROM basalt.mail_templates ORDER BY name`)).rows;
    },
    async ensure(input) {
      checkTemplate(input);
      try {
        const r = await db.query(
          'INSERT INTO basalt.mail_templates (name, subject, html, text) VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING',
          [input.name, input.subject, input.html || null, input.text || null],
        );
        return r.rowCount > 0;
      } catch (e) {
        if (e instanceof PgError && e.code === '23505') return false;
        throw e;
      }
    },
    async delete(name) {
      return (await db.query('DELETE FROM basalt.mail_templates WHERE name = $1', [name])).rowCount > 0;
    },
    async preview(name, variables) {
      const tpl = await store.get(name);
      if (!tpl) throw MailErrors.templateNotFound(name);
      const r = await renderMessage({ to: [], template: name, variables }, tpl);
      return { subject: r.subject, html: r.html, text: r.text };
    },
    async render(input, variables) {
      checkTemplate(input);
      const tpl: MailTemplate = {
        name: input.name,
        subject: input.subject,
        html: input.html ?? null,
        text: input.text ?? null,
      };
      const r = await renderMessage({ to: [], template: input.name, variables }, tpl);
      return { subject: r.subject, html: r.html, text: r.text };
    },
  };
  return store;
}
