import type { Command } from './command';
import { operand, UsageError } from './command';
import { VERSION } from '../version';
import { migrateDir } from '../db/migrate';
import { SETTINGS_BY_KEY } from '../config/schema';
import { fromText, lookup } from '../config/validate';
import { CLI_ACTOR } from '../modules/admin/audit';
import { changeSetting } from '../modules/admin/settings';

/** An address only this machine reaches. */
const isLoopbackHost = (h: string) => h === 'localhost' || h === '::1' || /^127\./.test(h);

export const coreCommands: Command[] = [
  {
    name: 'serve',
    usage: 'basalt serve [--config FILE] [--data DIR] [--dev]',
    summary:
      'Start the platform (the default command). Started beside a running `basalt serve` on the same data dir and ports, it takes that one over without dropping a request (docs/operations.md, "Upgrading").',
    platform: false, // serve opens the platform itself to own its lifetime
    async run({ globals, runInProcess }) {
      const { serveCommand } = await import('./serve-command');
      return serveCommand(globals, runInProcess);
    },
  },
  {
    name: 'migrate',
    usage: 'basalt migrate',
    summary: 'Apply the platform schema and the operator migrations in migrations.dir, then exit.',
    platform: { migrate: false },
    async run({ platform, io }) {
      const p = platform!;
      const applied = await migrateDir(p.db, p.settings.get('migrations.dir'), {
        table: 'basalt.schema_migrations',
        schema: p.settings.get('database.data_schema'),
      });
      io.out(applied.length ? `applied: ${applied.join(', ')}` : 'nothing to apply; the database is up to date');
    },
  },
  {
    name: 'settings get',
    usage: 'basalt settings get KEY',
    summary: 'Print a setting, with where its value comes from.',
    platform: { migrate: false, tolerateStoredSettings: true },
    async run({ platform, positionals, io }) {
      const key = operand(positionals, 'settings get needs a KEY');
      lookup(key, 'settings get');
      const view = platform!.settings.list().find((s) => s.key === key)!;
      const refused = platform!.settings.refused.get(key);
      if (refused)
        io.err(`note: ${refused}; the value shown is used instead (remove it: basalt settings unset ${key})`);
      io.out(
        `${key} = ${JSON.stringify(view.value)}  (${view.source}${view.origin ? ': ' + view.origin : ''}${view.restart ? ', needs restart' : ''})`,
      );
    },
  },
  {
    name: 'settings set',
    usage: 'basalt settings set KEY VALUE',
    summary: 'Store a setting in the database; running instances pick it up within a second.',
    platform: { migrate: false },
    async run({ platform, positionals, io }) {
      const [key, value] = positionals;
      if (!key || value === undefined) throw new UsageError('settings set needs KEY and VALUE');
      const def = lookup(key, 'settings set');
      // The panel's change, audited the same way (actor 'cli' with the OS user).
      const typed = fromText(def, value, 'settings set');
      const info = await changeSetting(platform!, CLI_ACTOR, key, typed, { storePinned: true });
      io.out(`${key} stored${def.restart ? ' (takes effect at the next start)' : ''}`);
      if (key === 'web.host' && !isLoopbackHost(String(typed)))
        io.err(`note: web.host ${typed} is reachable from other machines; put a firewall or a TLS proxy in front`);
      if (info.pinned_by) io.err(`note: ${key} is pinned by ${info.pinned_by}, which wins over the stored value`);
    },
  },
  {
    name: 'settings unset',
    usage: 'basalt settings unset KEY',
    summary:
      'Remove a stored setting (back to the file or default value); works even when the stored value is refused.',
    // A stored value that stops `serve` must not stop its own removal.
    platform: { migrate: false, tolerateStoredSettings: true },
    async run({ platform, positionals, io }) {
      const key = operand(positionals, 'settings unset needs a KEY');
      lookup(key, 'settings unset');
      await changeSetting(platform!, CLI_ACTOR, key, undefined, { storePinned: true });
      io.out(`${key} unset`);
    },
  },
  {
    name: 'settings list',
    usage: 'basalt settings list [--json]',
    summary: 'Every setting, its value and source.',
    options: { json: { type: 'boolean' } },
    platform: { migrate: false, tolerateStoredSettings: true },
    async run({ platform, values, io }) {
      const list = platform!.settings.list();
      for (const [key, why] of platform!.settings.refused)
        io.err(`note: ${why}; remove it with 'basalt settings unset ${key}'`);
      if (values.json) return io.out(JSON.stringify(list, null, 2));
      for (const s of list)
        io.out(
          `${s.key.padEnd(36)} ${JSON.stringify(s.value).padEnd(28)} ${s.source}${s.origin ? ' (' + s.origin + ')' : ''}`,
        );
    },
  },
  {
    name: 'version',
    usage: 'basalt version',
    summary: 'Print the version.',
    platform: false,
    async run({ io }) {
      io.out(VERSION);
    },
  },
];

export { SETTINGS_BY_KEY };
