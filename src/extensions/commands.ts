/**
 * `basalt extensions list|settings|set|unset`: what loads (each extension is set up
 * exactly as `serve` would, without listening) and the extensions' stored settings.
 */
import type { Command } from '../cli/command';
import { UsageError } from '../cli/command';
import type { Basalt } from '../services';
import { areas } from '../app';

async function loaded(platform: Basalt, name: string | undefined) {
  if (!name) throw new UsageError('name the extension (see basalt extensions list)');
  await platform.services.extensions.load(areas);
  const record = platform.services.extensions.get(name);
  if (!record) throw new UsageError(`no extension named '${name}' in ${platform.services.extensions.dir}`);
  const settings = platform.services.extensions.settings(name);
  if (!settings) throw new UsageError(`extension '${name}' failed to load: ${record.error}`);
  return settings;
}

export const extensionCommands: Command[] = [
  {
    name: 'extensions list',
    usage: 'basalt extensions list [--json]',
    summary: 'Load every extension of extensions.dir as serve would, and show which loaded and why others failed.',
    options: { json: { type: 'boolean' } },
    platform: { migrate: false },
    async run({ platform, values, io }) {
      const registry = platform!.services.extensions;
      await registry.load(areas);
      const list = registry.list();
      if (values.json) {
        io.out(JSON.stringify(list));
        return 0;
      }
      if (!list.length) {
        io.out(`no extensions in ${registry.dir}`);
        return 0;
      }
      for (const r of list) {
        io.out(
          [
            r.name.padEnd(20),
            (r.version ?? '-').padEnd(8),
            r.status.padEnd(7),
            r.status === 'loaded' ? `${r.routes.length} routes` : r.error,
          ].join('  '),
        );
      }
      return list.some((r) => r.status === 'failed') ? 1 : 0;
    },
  },
  {
    name: 'extensions settings',
    usage: 'basalt extensions settings NAME',
    summary: "An extension's settings, their values and sources.",
    platform: { migrate: false },
    async run({ platform, positionals, io }) {
      const settings = await loaded(platform!, positionals[0]);
      for (const s of settings.list())
        io.out(
          `${s.key} = ${JSON.stringify(s.value)}  (${s.source}${s.origin ? ': ' + s.origin : ''})  ${s.description}`,
        );
    },
  },
  {
    name: 'extensions set',
    usage: 'basalt extensions set NAME KEY VALUE',
    summary:
      "Store an extension's setting (ext.NAME.KEY) in the database; running instances pick it up within a second.",
    platform: { migrate: false },
    async run({ platform, positionals, io }) {
      const [name, key, value] = positionals;
      if (!key || value === undefined) throw new UsageError('extensions set needs NAME, KEY and VALUE');
      const settings = await loaded(platform!, name);
      await settings.set(key, settings.parse(key, value));
      io.out(`ext.${name}.${key} stored`);
      const view = settings.list().find((s) => s.key === key);
      if (view && view.source !== 'database')
        io.err(`note: ext.${name}.${key} is pinned by ${view.origin}, which wins over the stored value`);
    },
  },
  {
    name: 'extensions unset',
    usage: 'basalt extensions unset NAME KEY',
    summary: "Remove an extension's stored setting (back to the file or default value).",
    platform: { migrate: false },
    async run({ platform, positionals, io }) {
      const [name, key] = positionals;
      if (!key) throw new UsageError('extensions unset needs NAME and KEY');
      const settings = await loaded(platform!, name);
      await settings.unset(key);
      io.out(`ext.${name}.${key} unset`);
    },
  },
];
