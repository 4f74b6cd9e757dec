/**
 * The `basalt.users` table: lookups and the public shape of a user record.
 */
import { domainToASCII, domainToUnicode } from 'node:url';
import type { Queryable } from '../../db/engine';
import type { PublicUser } from './model';

export interface UserRow {
  id: string;
  email: string;
  /** null: an account made by a provider or an e-mail code, until a password is set. */
  password_hash: string | null;
  email_verified_at: Date | null;
  disabled_at: Date | null;
  created_at: Date;
}

/** What clients see of a user (never the hash): the `User` schema of model.ts. */
export type { PublicUser };

const COLUMNS = 'id, email, password_hash, email_verified_at, disabled_at, created_at';

export function publicUser(u: UserRow): PublicUser {
  return {
    id: u.id,
    email: u.email,
    email_verified: u.email_verified_at !== null,
    email_verified_at: u.email_verified_at?.toISOString() ?? null,
    created_at: u.created_at.toISOString(),
  };
}

/**
 * A combining dot above (U+0307) on a letter whose own dot it replaces (i, j, …): what
 * lower-casing İ (U+0130) leaves. `vi̇ctim` reads exactly like `victim`, so the dot is
 * dropped and `VİCTIM@…` is the same address as `victim@…` (migration 090).
 */
const SOFT_DOTTED_DOT = /(\p{Soft_Dotted})\u0307/gu;

/**
 * The one spelling an address is stored and looked up under: trimmed, NFKC-normalized
 * (fullwidth `ＢＯＢ` is `bob`, a decomposed `é` is the composed one), lower-cased,
 * without a dot above that only repeats a letter's own (`İ` lower-cases to `i`), and with
 * the domain in its ASCII (punycode) form by IDNA/UTS #46, as browsers convert host names
 * (`bücher.example` is `xn--bcher-kva.example`: one mailbox, one account). A domain IDNA
 * refuses is left as it is, and `emailProblem` then refuses the address.
 * Every way an address comes in — register, login, password/forgot,
 * verify-email/resend, the admin API, the command line — goes through this and
 * `emailProblem` (or `checkEmail`, both at once) before any lookup or uniqueness check,
 * so lookalike spellings are one account (docs/auth.md, E-mail addresses).
 */
export function normalizeEmail(email: string): string {
  const folded = email.trim().normalize('NFKC').toLowerCase().normalize('NFKC').replace(SOFT_DOTTED_DOT, '$1');
  const at = folded.lastIndexOf('@');
  if (at < 0) return folded;
  const ascii = domainToASCII(folded.slice(at + 1));
  return ascii ? folded.slice(0, at + 1) + ascii : folded;
}

/**
 * Scripts a local part or a domain label may not mix (UTS #39's single-script rule over the scripts of
 * UAX #31's recommended list plus Cherokee): `pаypal` with a Cyrillic `а` reads as
 * Latin `paypal`. Characters of no particular script (digits, `.`, `-`, `_`, combining
 * marks: Common and Inherited) go with any; the Han ideographs also go with the
 * Japanese kana, Hangul and Bopomofo (Japanese, Korean and Chinese writing mix them).
 * A letter of a script not listed counts as one script of its own ("other").
 */
const SCRIPTS = [
  'Latin',
  'Greek',
  'Cyrillic',
  'Armenian',
  'Hebrew',
  'Arabic',
  'Syriac',
  'Thaana',
  'Devanagari',
  'Bengali',
  'Gurmukhi',
  'Gujarati',
  'Oriya',
  'Tamil',
  'Telugu',
  'Kannada',
  'Malayalam',
  'Sinhala',
  'Thai',
  'Lao',
  'Tibetan',
  'Myanmar',
  'Georgian',
  'Hangul',
  'Ethiopic',
  'Cherokee',
  'Khmer',
  'Mongolian',
  'Hiragana',
  'Katakana',
  'Bopomofo',
  'Han',
].map((name) => ({ name, re: new RegExp(`\\p{Script_Extensions=${name}}`, 'u') }));
const ANY_SCRIPT = /[\p{Script=Common}\p{Script=Inherited}]/u;
/** UTS #39's augmented sets: writing systems that mix scripts as a matter of course. */
const AUGMENT: Record<string, string[]> = {
  Han: ['Japanese', 'Korean', 'Chinese'],
  Hiragana: ['Japanese'],
  Katakana: ['Japanese'],
  Hangul: ['Korean'],
  Bopomofo: ['Chinese'],
};

/**
 * Whether a normalized address mixes scripts (above) in its local part or within one
 * label of its domain. The domain is stored in its xn-- form, so each label is read in
 * the Unicode it stands for: `xn--pypal-4ve` is `pаypal` with a Cyrillic `а`, the
 * classic look-alike domain. The rule is per label — a Cyrillic name under a Latin
 * top-level domain (`пример.example`) is one script per label and fine — as browsers
 * decide whether to show a host name in Unicode. Checked for new accounts only —
 * register, a sign-up by e-mail code or provider, an administrator's new user or new
 * address: existing accounts keep signing in.
 */
export function mixedScriptAddress(email: string): boolean {
  const at = email.lastIndexOf('@');
  if (mixesScripts(email.slice(0, at))) return true;
  const domain = email.slice(at + 1);
  // A domain IDNA refuses is refused by emailProblem before it gets here; read it as it is then.
  return (domainToUnicode(domain) || domain).split('.').some(mixesScripts);
}

/** Whether `text` (a local part or one domain label) mixes scripts that no writing system mixes. */
export function mixesScripts(text: string): boolean {
  let common: Set<string> | undefined;
  for (const ch of text) {
    const own = SCRIPTS.filter((s) => s.re.test(ch)).flatMap((s) => [s.name, ...(AUGMENT[s.name] ?? [])]);
    if (!own.length && ANY_SCRIPT.test(ch)) continue;
    const set = new Set(own.length ? own : ['other']);
    common = common ? new Set([...common].filter((s) => set.has(s))) : set;
    if (!common.size) return true;
  }
  return false;
}

/** Control characters (C0, DEL, C1): never part of an address; NUL would not even reach the database. */
const CONTROL = /\p{Cc}/u;
/**
 * Characters that render as nothing or reorder text: zero-width spaces and joiners,
 * soft hyphen, BOM, bidi controls, variation selectors, tags, fillers. They would make
 * two different-looking spellings of one address, so they are refused, not stripped.
 */
const INVISIBLE = /[\p{Cf}\p{Default_Ignorable_Code_Point}\p{Zl}\p{Zp}\p{Co}\p{Cn}]/u;
const WHITESPACE = /\s/u;
/** Dot-atom local part: no quoting, comments or escapes (the characters only those need). */
const LOCAL = /^[^\s@"(),:;<>[\]\\.]+(?:\.[^\s@"(),:;<>[\]\\.]+)*$/u;
/** A domain label: letters (any script), digits, inner hyphens. No address literals (`[127.0.0.1]`). */
const LABEL = /^[\p{L}\p{N}](?:[\p{L}\p{M}\p{N}-]*[\p{L}\p{M}\p{N}])?$/u;

/**
 * The problem with a normalized address (`normalizeEmail`), or undefined when it is
 * acceptable. Deliberately loose about what mail servers accept (the mailbox is proven
 * by the verification mail) and strict about what makes two spellings of one address.
 */
export function emailProblem(normalized: string): string | undefined {
  if (!normalized) return 'is required';
  if ([...normalized].length > 254) return 'must be at most 254 characters';
  if (CONTROL.test(normalized)) return 'must not contain control characters';
  if (!normalized.isWellFormed()) return 'must be valid Unicode text (no lone surrogates)';
  if (INVISIBLE.test(normalized))
    return 'must not contain invisible or formatting characters (zero-width spaces, soft hyphens, direction marks)';
  if (WHITESPACE.test(normalized)) return 'must not contain spaces';
  const at = normalized.lastIndexOf('@');
  const local = normalized.slice(0, at);
  const labels = normalized.slice(at + 1).split('.');
  const shaped =
    at > 0 &&
    [...local].length <= 64 &&
    LOCAL.test(local) &&
    labels.length >= 2 &&
    labels.every((l) => l.length <= 63 && LABEL.test(l)) &&
    !/^\d+$/.test(labels[labels.length - 1]!);
  if (!shaped) return 'must be an e-mail address like name@example.com';
  if (domainToASCII(labels.join('.')) !== labels.join('.'))
    return 'must have a valid domain name (internationalized domains are converted to their xn-- form)';
  return undefined;
}

export type EmailCheck = { ok: true; email: string } | { ok: false; problem: string };

/** `normalizeEmail` then `emailProblem`: the normalized address, or the problem to answer (422 naming the field). */
export function checkEmail(raw: string): EmailCheck {
  const email = normalizeEmail(raw);
  const problem = emailProblem(email);
  return problem ? { ok: false, problem } : { ok: true, email };
}

export async function userByEmail(q: Queryable, email: string): Promise<UserRow | undefined> {
  return (await q.query<UserRow>(`SELECT ${COLUMNS} FROM basalt.users WHERE email = $1`, [email])).rows[0];
}

export async function userById(q: Queryable, id: string): Promise<UserRow | undefined> {
  return (await q.query<UserRow>(`SELECT ${COLUMNS} FROM basalt.users WHERE id = $1`, [id])).rows[0];
}

export async function insertUser(q: Queryable, email: string, passwordHash: string): Promise<UserRow> {
  const { rows } = await q.query<UserRow>(
    `INSERT INTO basalt.users (email, password_hash) VALUES ($1, $2) RETURNING ${COLUMNS}`,
    [email, passwordHash],
  );
  return rows[0]!;
}

export async function setPasswordHash(q: Queryable, id: string, hash: string): Promise<void> {
  await q.query('UPDATE basalt.users SET password_hash = $2, updated_at = now() WHERE id = $1', [id, hash]);
}

export async function markVerified(q: Queryable, id: string): Promise<UserRow | undefined> {
  const { rows } = await q.query<UserRow>(
    `UPDATE basalt.users SET email_verified_at = coalesce(email_verified_at, now()), updated_at = now() WHERE id = $1 RETURNING ${COLUMNS}`,
    [id],
  );
  return rows[0];
}
