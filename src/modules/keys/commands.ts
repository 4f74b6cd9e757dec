/**
 * `basalt keys create|list|revoke` (README.md, Command line). The created key is printed once;
 * only its hash is stored.
 */
import type { Command } from '../../cli/command';
import { operand, printList, UsageError } from '../../cli/command';
import type { KeyInfo, KeyType } from './model';
import { CLI_ACTOR } from '../admin/audit';
import { createKey, revokeKey } from '../admin/changes';

const DURATION = /^(\d+)([smhdw])$/;
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** `--expires`: an ISO date-time, or a duration from now such as 30d, 12h, 2w. */
export function parseExpires(v: string, now = Date.now()): Date {
  const m = DURATION.exec(v.trim());
  if (m) return new Date(now + Number(m[1]) * UNIT_MS[m[2]!]!);
  const d = new Date(v);
  if (Number.isNaN(d.getTime()))
    throw new UsageError(
      `--expires '${v}' is neither an ISO date-time (2030-01-31T00:00:00Z) nor a duration (30d, 12h, 2w)`,
    );
  return d;
}

const csv = (v: unknown): string[] | undefined =>
  typeof v === 'string'
    ? v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : undefined;

function when(d: Date | null): string {
  return d ? d.toISOString().replace(/\.\d{3}Z$/, 'Z') : '-';
}

function line(k: KeyInfo): string {
  const perms = k.type === 'public' ? (k.site ? 'site key' : '-') : k.permissions.join(',');
  return [
    k.id,
    k.type.padEnd(7),
    k.display.padEnd(15),
    k.status.padEnd(7),
    (k.service ?? '-').padEnd(14),
    perms.padEnd(24),
    k.tables.join(',') || '-',
    `expires ${when(k.expires_at)}`,
    `last used ${when(k.last_used_at)}`,
    k.name ? `"${k.name}"` : '',
  ]
    .join('  ')
    .trimEnd();
}

export const keyCommands: Command[] = [
  {
    name: 'keys create',
    usage:
      'basalt keys create --type public|service [--service NAME] [--permissions a,b] [--tables t1,t2] [--name N] [--expires ISO|30d] [--site] [--json]',
    summary: 'Create an API key; the key is printed once and stored only as a hash.',
    options: {
      type: { type: 'string' },
      service: { type: 'string' },
      permissions: { type: 'string' },
      tables: { type: 'string' },
      name: { type: 'string' },
      expires: { type: 'string' },
      site: { type: 'boolean' },
      json: { type: 'boolean' },
    },
    platform: { migrate: false },
    async run({ platform, values, io }) {
      const type = values.type as string | undefined;
      if (type !== 'public' && type !== 'service') throw new UsageError('--type must be public or service');
      // Audited like the panel's create: actor 'cli' with the OS user.
      const created = await createKey(platform!, CLI_ACTOR, {
        type: type as KeyType,
        service: values.service as string | undefined,
        permissions: csv(values.permissions),
        tables: csv(values.tables),
        name: values.name as string | undefined,
        expiresAt: typeof values.expires === 'string' ? parseExpires(values.expires) : undefined,
        site: values.site === true,
      });
      if (values.json) return io.out(JSON.stringify(created));
      io.out(created.key);
      io.err(
        `created ${created.type} key ${created.id} (${created.display})${created.site ? ', designated as the site public key' : ''}`,
      );
      io.err('store it now: it is shown only once and cannot be recovered');
      const pinned = created.site && platform!.settings.source('web.site_public_key');
      if (pinned && pinned.source !== 'database')
        io.err(
          `note: web.site_public_key is pinned by ${pinned.origin ?? pinned.source}, which wins over the stored value`,
        );
    },
  },
  {
    name: 'keys list',
    usage: 'basalt keys list [--json]',
    summary: 'List API keys (prefix and last four characters; never the key).',
    options: { json: { type: 'boolean' } },
    platform: { migrate: false },
    async run({ platform, values, io }) {
      const keys = await platform!.services.keys.list();
      printList(io, keys, {
        json: values.json,
        empty: "no API keys; create one with 'basalt keys create --type public|service'",
        print: (k) => io.out(line(k)),
      });
    },
  },
  {
    name: 'keys revoke',
    usage: 'basalt keys revoke ID',
    summary: 'Revoke an API key; it stops working at once on every instance.',
    platform: { migrate: false },
    async run({ platform, positionals, io }) {
      const id = operand(positionals, 'keys revoke needs the key ID (see basalt keys list)');
      const k = await revokeKey(platform!, CLI_ACTOR, id);
      io.out(`revoked ${k.type} key ${k.id} (${k.display})`);
    },
  },
];
