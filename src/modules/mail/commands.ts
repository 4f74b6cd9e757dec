/**
 * Mail commands: `basalt templates put|list|show|delete` and `basalt mail test`.
 * Templates are validated (name, subject, Liquid syntax) exactly as the admin
 * panel validates them.
 */
import { readFileSync, existsSync } from 'node:fs';
import { operand, printList, UsageError, type Command } from '../../cli/command';
import { AppError } from '../../http/errors';
import { CLI_ACTOR } from '../admin/audit';
import { deleteTemplate, putTemplate } from '../admin/changes';

function readPart(path: unknown, flag: string): string | undefined {
  if (path === undefined) return undefined;
  if (typeof path !== 'string' || !existsSync(path)) throw new UsageError(`${flag}: no such file '${String(path)}'`);
  return readFileSync(path, 'utf8');
}

/** AppErrors (bad template, SMTP refusal) are one clear line, exit code 1. */
function explain(e: unknown): never {
  if (e instanceof AppError) {
    const fields = (e.extra.details?.fields ?? {}) as Record<string, string>;
    const detail = Object.entries(fields)
      .map(([k, v]) => `${k}: ${v}`)
      .join('; ');
    throw new Error(detail && !e.message.includes(detail) ? `${e.message} (${detail})` : e.message);
  }
  throw e;
}

export const mailCommands: Command[] = [
  {
    name: 'templates put',
    usage: 'basalt templates put NAME --subject S [--html FILE] [--text FILE]',
    summary: 'Create or replace a mail template (Liquid; HTML output is escaped).',
    options: { subject: { type: 'string' }, html: { type: 'string' }, text: { type: 'string' } },
    platform: { migrate: false },
    async run({ platform, positionals, values, io }) {
      const name = operand(positionals, 'templates put needs a NAME');
      if (typeof values.subject !== 'string') throw new UsageError('templates put needs --subject');
      const html = readPart(values.html, '--html');
      const text = readPart(values.text, '--text');
      if (html === undefined && text === undefined) throw new UsageError('give --html FILE, --text FILE or both');
      const { created } = await putTemplate(platform!, CLI_ACTOR, {
        name,
        subject: values.subject,
        html: html ?? null,
        text: text ?? null,
      }).catch(explain);
      io.out(`template ${name} ${created ? 'created' : 'updated'}`);
    },
  },
  {
    name: 'templates list',
    usage: 'basalt templates list [--json]',
    summary: 'List mail templates.',
    options: { json: { type: 'boolean' } },
    platform: { migrate: false },
    async run({ platform, values, io }) {
      const list = await platform!.services.mail.templates.list();
      printList(io, list, {
        json: values.json,
        empty: 'no templates',
        print: (t) => {
          const parts = [t.html ? 'html' : '', t.text ? 'text' : ''].filter(Boolean).join('+');
          io.out(`${t.name.padEnd(24)} ${parts.padEnd(9)} ${t.updated_at?.toISOString() ?? ''}  ${t.subject}`);
        },
      });
    },
  },
  {
    name: 'templates show',
    usage: 'basalt templates show NAME',
    summary: "Print a template's subject, text and html.",
    platform: { migrate: false },
    async run({ platform, positionals, io }) {
      const name = operand(positionals, 'templates show needs a NAME');
      const t = await platform!.services.mail.templates.get(name);
      if (!t) throw new Error(`no mail template named '${name}'`);
      io.out(`subject: ${t.subject}`);
      if (t.text) io.out(`--- text ---\n${t.text}`);
      if (t.html) io.out(`--- html ---\n${t.html}`);
    },
  },
  {
    name: 'templates delete',
    usage: 'basalt templates delete NAME',
    summary: 'Delete a mail template.',
    platform: { migrate: false },
    async run({ platform, positionals, io }) {
      const name = operand(positionals, 'templates delete needs a NAME');
      await deleteTemplate(platform!, CLI_ACTOR, name).catch((e) => {
        throw e instanceof AppError && e.status === 404 ? new Error(`no mail template named '${name}'`) : e;
      });
      io.out(`template ${name} deleted`);
    },
  },
  {
    name: 'mail test',
    usage: 'basalt mail test TO',
    summary: 'Send a test message to TO now with the configured SMTP server.',
    platform: { migrate: false },
    async run({ platform, positionals, io }) {
      const to = operand(positionals, 'mail test needs a recipient address');
      const r = await platform!.services.mail.testSend(to).catch(explain);
      io.out(`sent: ${r.messageId} (job ${r.jobId})`);
    },
  },
];
