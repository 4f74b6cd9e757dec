/**
 * `basalt logs tail|search|show`: the request log (docs/logs.md), through the same service as
 * the admin API's Logs screen; inside the serving process over the management socket when the
 * embedded engine is held by `basalt serve`.
 */
import { operand, UsageError, type Command } from '../../cli/command';
import { STATUS_CLASSES, type LogEntry, type LogFilter, type StatusClass } from './store';

const line = (e: LogEntry) =>
  [
    e.at.toISOString(),
    String(e.status),
    e.method.padEnd(6),
    `${e.duration_ms.toFixed(1)}ms`.padStart(9),
    e.path.length > 100 ? `${e.path.slice(0, 99)}…` : e.path,
    e.user_email ? `user=${e.user_email}` : e.user_id ? `user=${e.user_id}` : '',
    e.key_label ? `key=${e.key_label}` : '',
    `id=${e.request_id}`,
    e.error ? `${e.error.code}${e.error.cause ? `: ${e.error.cause.message.split('\n')[0]!.slice(0, 120)}` : ''}` : '',
  ]
    .filter(Boolean)
    .join('  ');

function limitOf(v: unknown, fallback: number): number {
  const n = v === undefined ? fallback : Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 500) throw new UsageError('the number of entries must be 1-500');
  return n;
}

function dateOf(v: unknown, flag: string): Date | undefined {
  if (v === undefined) return undefined;
  const s = String(v);
  // `15m`, `2h`, `1d`: that long ago.
  const ago = /^(\d{1,6})([mhd])$/.exec(s);
  if (ago) return new Date(Date.now() - Number(ago[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[ago[2] as 'm']);
  const d = new Date(s);
  if (Number.isNaN(d.getTime()))
    throw new UsageError(`${flag} must be a date-time (2026-11-29T10:00:00Z) or 15m, 2h, 1d`);
  return d;
}

const FILTERS = {
  since: { type: 'string' },
  until: { type: 'string' },
  status: { type: 'string' },
  area: { type: 'string' },
  path: { type: 'string' },
  key: { type: 'string' },
  user: { type: 'string' },
  json: { type: 'boolean' },
} as const;

function filterOf(values: Record<string, unknown>): LogFilter {
  const status = values.status as string | undefined;
  if (status !== undefined && !(STATUS_CLASSES as readonly string[]).includes(status))
    throw new UsageError(`--status must be one of ${STATUS_CLASSES.join(', ')}`);
  return {
    since: dateOf(values.since, '--since'),
    until: dateOf(values.until, '--until'),
    status: status as StatusClass | undefined,
    area: values.area as string | undefined,
    path: values.path as string | undefined,
    key: values.key as string | undefined,
    user: values.user as string | undefined,
  };
}

const FILTER_USAGE =
  '[--since T] [--until T] [--status 2xx|3xx|4xx|5xx|error] [--area A] [--path PREFIX] [--key ID|NAME] [--user ID|EMAIL] [--json]';

export const logCommands: Command[] = [
  {
    name: 'logs tail',
    usage: `basalt logs tail [-n N] ${FILTER_USAGE}`,
    summary: 'The latest requests of the request log, oldest first (default 20).',
    options: { ...FILTERS, lines: { type: 'string', short: 'n' } },
    platform: { migrate: false },
    async run({ platform, values, io }) {
      const { entries } = await platform!.services.logs.search({
        ...filterOf(values),
        limit: limitOf(values.lines, 20),
      });
      entries.reverse();
      if (values.json) return io.out(JSON.stringify(entries, null, 2));
      if (!entries.length) return io.out('no requests logged');
      for (const e of entries) io.out(line(e));
    },
  },
  {
    name: 'logs search',
    usage: `basalt logs search ${FILTER_USAGE} [--limit N]`,
    summary: 'Requests of the request log matching the filters, newest first (T: a date-time, or 15m, 2h, 1d ago).',
    options: { ...FILTERS, limit: { type: 'string' } },
    platform: { migrate: false },
    async run({ platform, values, io }) {
      const { entries } = await platform!.services.logs.search({
        ...filterOf(values),
        limit: limitOf(values.limit, 100),
      });
      if (values.json) return io.out(JSON.stringify(entries, null, 2));
      if (!entries.length) return io.out('no requests match');
      for (const e of entries) io.out(line(e));
    },
  },
  {
    name: 'logs show',
    usage: 'basalt logs show REQUEST_ID [--json]',
    summary: "One request: its row, its error's cause and what administrators changed in it.",
    options: { json: { type: 'boolean' } },
    platform: { migrate: false },
    async run({ platform, positionals, values, io }) {
      const id = operand(positionals, 'logs show needs a REQUEST_ID');
      const detail = await platform!.services.logs.detail(id);
      if (values.json) {
        io.out(JSON.stringify(detail, null, 2));
        return detail.entries.length ? 0 : 1;
      }
      if (!detail.entries.length) {
        io.err(`no request ${id} in the request log`);
        return 1;
      }
      for (const e of detail.entries) {
        io.out(line(e));
        if (e.ip) io.out(`  ip: ${e.ip}  area: ${e.area}`);
        if (e.error) io.out(`  error: ${e.error.code}: ${e.error.message}`);
        if (e.error?.cause) io.out(`  cause: ${e.error.cause.stack ?? e.error.cause.message}`);
      }
      for (const a of detail.audit)
        io.out(`  audit: ${a.at.toISOString()} ${a.action} ${a.target ?? ''} by ${a.admin_email ?? 'cli'}`);
      return 0;
    },
  },
];
