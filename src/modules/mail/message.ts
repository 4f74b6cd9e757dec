/**
 * What a message is before it becomes a job: the shape callers give, the limits it
 * must respect, and the checks that keep a header from being forged.
 */
import { MailErrors } from './errors';

/** A message to send: a template with variables, or inline subject + text/html. */
export interface MailMessage {
  /** Recipient addresses (bare addr-spec, e.g. `ada@example.com`); 1..mail.max_recipients. */
  to: string[];
  /** Subject; overrides the template's subject. Required without a template. */
  subject?: string;
  /** Plain-text body (sent as is, not a template). */
  text?: string;
  /** HTML body (sent as is, not a template). */
  html?: string;
  /** Name of a stored template (rendered with Liquid). */
  template?: string;
  /** Template variables; every variable the template uses must be present. */
  variables?: Record<string, unknown>;
}

/** A message after validation and rendering: exactly what the SMTP server will get. */
export interface RenderedMail {
  to: string[];
  subject: string;
  text?: string;
  html?: string;
  template?: string;
}

/** RFC 5322 allows 998 characters per header line; a subject never needs more. */
export const MAX_SUBJECT_CHARS = 998;
/** Inline bodies and rendered output, each part (the JSON body limit also applies to requests). */
export const MAX_BODY_CHARS = 2_000_000;

// The addr-spec subset mail servers actually accept (same grammar as the WHATWG
// e-mail input type): dot-atom local part, LDH domain labels. No display names, no
// quoted local parts, no comments: nothing that could smuggle a second address or a header.
const LOCAL = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
const LABEL = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;

/** Whether `addr` is a single deliverable address (`local@domain`), RFC 5321 lengths included. */
export function isValidAddress(addr: string): boolean {
  if (typeof addr !== 'string' || addr.length > 254) return false;
  const at = addr.lastIndexOf('@');
  if (at <= 0 || at === addr.length - 1) return false;
  const local = addr.slice(0, at);
  const domain = addr.slice(at + 1);
  if (local.length > 64 || !LOCAL.test(local)) return false;
  const labels = domain.split('.');
  return labels.every((l) => LABEL.test(l));
}

/** CR or LF in a header value would start a new header (header injection). */
export function hasLineBreak(s: string): boolean {
  return /[\r\n]/.test(s);
}

/**
 * Check the parts of a message that do not depend on a template. Throws a 400
 * `validation_error` naming the field.
 */
export function checkMessage(msg: MailMessage, maxRecipients: number): void {
  const fields: Record<string, string> = {};
  if (!Array.isArray(msg.to) || msg.to.length === 0) fields.to = 'give at least one recipient address';
  else if (msg.to.length > maxRecipients)
    fields.to = `at most ${maxRecipients} recipients per message (mail.max_recipients)`;
  else {
    msg.to.forEach((a, i) => {
      if (!isValidAddress(a))
        fields[`to.${i}`] = `'${String(a).slice(0, 80)}' is not a valid e-mail address (expected local@domain)`;
    });
  }
  if (msg.subject !== undefined) checkSubject(msg.subject, fields);
  const inline = msg.text !== undefined || msg.html !== undefined;
  if (msg.template !== undefined && inline) fields.template = 'give either a template or text/html, not both';
  if (msg.template === undefined) {
    if (!inline) fields.text = 'give a template, or text and/or html';
    if (msg.subject === undefined && inline) fields.subject = 'required when no template is used';
    if (msg.variables !== undefined) fields.variables = 'variables are only used with a template';
  }
  for (const part of ['text', 'html'] as const) {
    const v = msg[part];
    if (v !== undefined && (typeof v !== 'string' || v.length > MAX_BODY_CHARS))
      fields[part] = `must be a string of at most ${MAX_BODY_CHARS} characters`;
  }
  if (inline && !msg.text && !msg.html) fields.text = 'the message body is empty';
  if (
    msg.variables !== undefined &&
    (typeof msg.variables !== 'object' || msg.variables === null || Array.isArray(msg.variables))
  ) {
    fields.variables = 'must be an object of name → value';
  }
  const first = Object.entries(fields)[0];
  if (first) throw MailErrors.invalid(`Invalid mail request: ${first[0]}: ${first[1]}.`, fields);
}

/** A subject must fit one header line and carry no line break. */
export function checkSubject(subject: string, fields: Record<string, string>, field = 'subject'): void {
  if (typeof subject !== 'string' || subject.trim() === '') fields[field] = 'must be a non-empty string';
  else if (hasLineBreak(subject)) fields[field] = 'must not contain line breaks (CR or LF)';
  else if (subject.length > MAX_SUBJECT_CHARS) fields[field] = `at most ${MAX_SUBJECT_CHARS} characters`;
}
