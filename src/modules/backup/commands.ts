/**
 * `basalt backup [create] | list | delete NAME`, `basalt restore ARCHIVE`,
 * `basalt export-to URL` (docs/backup.md). `backup` runs inside a serving instance over
 * the management socket when one holds the data dir; `restore` and `export-to` need the
 * instance stopped and take the data dir's lock themselves.
 */
import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command, GlobalFlags } from '../../cli/command';
import { operand, printList, UsageError } from '../../cli/command';
import { bootValue, loadBootLayers } from '../../config/load';
import { BackupError, backupService, timeOfName, type CreatedBackup } from './service';
import type { Db } from '../../db/engine';
import type { PitrTarget } from './pitr';

function mib(n: number): string {
  return `${(n / 1048576).toFixed(1)} MiB`;
}

function bootLayers(globals: GlobalFlags) {
  return loadBootLayers({ configFile: globals.config, flags: { 'data.dir|--data': globals.data } });
}

/** BackupError → one line, exit 1. */
async function guarded(io: { err(l: string): void }, fn: () => Promise<number> | Promise<void>): Promise<number> {
  try {
    return (await fn()) ?? 0;
  } catch (e) {
    if (e instanceof BackupError) {
      io.err(`basalt: ${e.message}`);
      return 1;
    }
    throw e;
  }
}

/** `--to`, `--to-latest`, `--before-migration`: at most one. */
function pitrTarget(values: Record<string, unknown>): PitrTarget | undefined {
  const given = [values.to !== undefined, !!values['to-latest'], values['before-migration'] !== undefined].filter(
    Boolean,
  ).length;
  if (given > 1) throw new UsageError('give one of --to, --to-latest, --before-migration');
  if (values['to-latest']) return { kind: 'latest' };
  if (typeof values['before-migration'] === 'string') return { kind: 'migration', name: values['before-migration'] };
  if (typeof values.to === 'string') {
    const text = values.to;
    // A zone is required: a bare time would mean the server's zone here and UTC in PostgreSQL.
    const at = /(Z|[+-]\d\d:?\d\d)$/i.test(text.trim()) ? new Date(text) : new Date(Number.NaN);
    if (Number.isNaN(at.getTime()))
      throw new UsageError(`--to takes a time with its zone, as 2026-12-01T10:00:00Z; got '${text}'`);
    return { kind: 'time', at };
  }
  return undefined;
}

export const backupCommands: Command[] = [
  {
    name: 'backup',
    usage: 'basalt backup [create] [--json]',
    summary: 'Back up the database and local files into <data.dir>/backups/ (online).',
    options: { json: { type: 'boolean' } },
    platform: { migrate: false },
    async run({ platform, positionals, values, io }) {
      if (positionals.length && !(positionals.length === 1 && positionals[0] === 'create'))
        throw new UsageError(`unknown backup subcommand '${positionals[0]}' (create, list, delete NAME)`);
      return guarded(io, async () => {
        const b: CreatedBackup = await backupService(platform!).create({ trigger: 'cli' });
        if (values.json) return io.out(JSON.stringify(b));
        io.out(`${backupService(platform!).dir}/${b.name}`);
        io.out(
          `${b.files} files, ${mib(b.bytes)} → ${mib(b.size)} compressed; database held ${b.held_ms} ms, ${b.total_ms} ms in all`,
        );
        if (b.s3?.key) io.out(`copied to s3://${b.s3.bucket}/${b.s3.key}`);
        if (b.s3?.error)
          io.err(`note: not copied to S3 bucket ${b.s3.bucket} (${b.s3.error}); the local archive is complete`);
      });
    },
  },
  {
    name: 'backup list',
    usage: 'basalt backup list [--json]',
    summary: 'Backups in <data.dir>/backups/, newest first.',
    options: { json: { type: 'boolean' } },
    platform: { migrate: false },
    async run({ platform, values, io }) {
      return guarded(io, async () => {
        const list = await backupService(platform!).list();
        printList(io, list, {
          json: values.json,
          empty: 'no backups yet',
          print: (b) =>
            io.out(`${b.name.padEnd(40)} ${mib(b.size).padStart(11)}  ${b.created_at}  ${b.trigger ?? '?'}`),
        });
      });
    },
  },
  {
    name: 'backup delete',
    usage: 'basalt backup delete NAME',
    summary: 'Delete one backup archive.',
    platform: { migrate: false },
    async run({ platform, positionals, io }) {
      const name = operand(positionals, 'backup delete needs the NAME of a backup (see basalt backup list)');
      return guarded(io, async () => {
        await backupService(platform!).delete(name);
        io.out(`${name} deleted`);
      });
    },
  },
  {
    name: 'restore',
    usage:
      "basalt restore ARCHIVE | s3://bucket/prefix[/NAME]  |  basalt restore [ARCHIVE | s3://bucket/prefix] --to '2026-12-01T10:00:00Z' | --to-latest | --before-migration NAME",
    summary:
      'Replace the data dir with a backup, local or in S3, or with its state at a moment (WAL archive); instance stopped, old data kept.',
    options: {
      to: { type: 'string' },
      'to-latest': { type: 'boolean' },
      'before-migration': { type: 'string' },
    },
    platform: false, // needs the data dir unheld: never run inside a server
    async run({ positionals, values, io, globals }) {
      const archive = positionals[0];
      const pitr = pitrTarget(values);
      if ((!archive && !pitr) || positionals.length > 1)
        throw new UsageError(
          'restore needs one ARCHIVE (a path, a name in <data.dir>/backups/, or s3://bucket/prefix[/NAME]), or a moment: --to TIME, --to-latest, --before-migration NAME',
        );
      if (pitr?.kind === 'migration' && archive?.startsWith('s3://'))
        throw new UsageError('--before-migration reads the current data dir; from S3 give --to TIME');
      const layers = bootLayers(globals);
      if (bootValue(layers, 'database.url')) {
        io.err(
          "basalt: restore replaces the embedded data dir, but database.url is set (external PostgreSQL): restore that database with pg_restore or your provider's snapshots (docs/backup.md)",
        );
        return 1;
      }
      const dataDir = resolve(bootValue(layers, 'data.dir'));
      const { restore, RestoreError } = await import('./restore');
      // From S3: downloaded beside the data dir and checked against its SHA-256 first.
      const download = archive?.startsWith('s3://') ? `${dataDir}.s3-download-${process.pid}.tar.gz` : undefined;
      // A point-in-time restore from S3: the bucket's WAL archive (`<prefix>wal/`), downloaded beside too.
      const walDir = download && pitr ? `${dataDir}.s3-wal-${process.pid}` : undefined;
      try {
        let from = archive;
        if (download) {
          const { downloadArchive, downloadWal, listArchives, locateArchive, S3CheckError, S3UrlError } = await import(
            './s3'
          );
          try {
            const { target, name } = locateArchive(archive!, bootValue(layers, 'backup.s3_url'));
            let chosen = name;
            if (walDir && pitr && pitr.kind !== 'migration') {
              const files = await downloadWal(target, walDir);
              io.out(`downloaded ${files} WAL files from s3://${target.bucket}/${target.prefix}wal/; SHA-256 checked`);
              // The newest backup made by the moment (by its name's time; its manifest then says exactly).
              const at = pitr.kind === 'time' ? pitr.at.getTime() : Number.POSITIVE_INFINITY;
              chosen ??= (await listArchives(target))
                .filter((n) => (timeOfName(n)?.getTime() ?? Number.POSITIVE_INFINITY) <= at)
                .at(-1);
              if (!chosen)
                throw new S3CheckError(
                  `no backup archive under s3://${target.bucket}/${target.prefix} before that moment`,
                );
            }
            const got = await downloadArchive(target, chosen, download);
            io.out(`downloaded s3://${target.bucket}/${target.prefix}${got}; SHA-256 checked`);
          } catch (e) {
            if (!(e instanceof S3CheckError || e instanceof S3UrlError) && !(e instanceof Error && 'code' in e))
              throw e;
            io.err(`basalt restore: ${(e as Error).message}; nothing was changed`);
            return 1;
          }
          from = download;
        }
        const r = await restore({ archive: from, dataDir, pitr: pitr && { target: pitr, walDir } });
        if (r.pitr)
          io.out(
            `restored ${r.pitr.target === 'latest' ? 'the latest state archived' : r.pitr.target} from backup ${r.pitr.base} and the WAL archive into ${r.dataDir} in ${r.ms} ms (PostgreSQL: ${r.pitr.stop})`,
          );
        else
          io.out(
            `restored ${r.manifest.created_at} backup (${r.files} files, basalt ${r.manifest.platform_version}) into ${r.dataDir} in ${r.ms} ms`,
          );
        if (r.previous)
          io.out(`the previous data is kept in ${r.previous}; delete it once the restored site is checked`);
        return 0;
      } catch (e) {
        if (e instanceof RestoreError) {
          io.err(`basalt restore: ${e.message}; nothing was changed`);
          return 1;
        }
        throw e;
      } finally {
        if (download) rmSync(download, { force: true });
        if (walDir) rmSync(walDir, { recursive: true, force: true });
      }
    },
  },
  {
    name: 'export-to',
    usage: 'basalt export-to URL',
    summary: 'Copy the embedded database into an empty PostgreSQL database.',
    platform: false, // reads the embedded data dir with nothing else writing to it
    async run({ positionals, io, globals }) {
      const url = positionals[0];
      if (!url || positionals.length > 1 || !/^postgres(ql)?:\/\//.test(url))
        throw new UsageError('export-to needs the target database URL (postgres://user:password@host:5432/db)');
      const layers = bootLayers(globals);
      if (bootValue(layers, 'database.url')) {
        io.err(
          'basalt: export-to copies the embedded database, but database.url is already set: unset it (or run with the configuration of the embedded instance)',
        );
        return 1;
      }
      const [
        { openDb },
        { openExternal, describeUrl },
        { Settings },
        { resolveExtensionsDir },
        { exportTo, ExportError },
        { DataDirLockedError },
      ] = await Promise.all([
        import('../../db/open'),
        import('../../db/external'),
        import('../../config/settings'),
        import('../../extensions/dir'),
        import('./export-to'),
        import('../../db/datadir-lock'),
      ]);
      let source: Db;
      try {
        source = await openDb({ url: '', dataDir: resolve(bootValue(layers, 'data.dir')) });
      } catch (e) {
        if (e instanceof DataDirLockedError) {
          io.err(
            `basalt export-to: ${e.message.replace(/; stop it.*$/, '')}; stop it first: export-to copies a database nothing else writes to`,
          );
          return 1;
        }
        throw e;
      }
      try {
        const settings = new Settings(layers, source);
        await settings.load();
        const target = await openExternal(url, { max: 2 });
        try {
          io.out(`exporting to ${describeUrl(url)}`);
          const r = await exportTo({
            source,
            target,
            dataSchema: settings.get('database.data_schema'),
            migrationsDir: settings.get('migrations.dir'),
            extensionsDir: resolveExtensionsDir(settings.get('extensions.dir')),
            progress: (l) => io.err(l),
          });
          const width = Math.max(...r.tables.map((t) => t.table.length), 5);
          io.out(`${'table'.padEnd(width)}  ${'embedded'.padStart(10)}  ${'target'.padStart(10)}`);
          for (const t of r.tables)
            io.out(`${t.table.padEnd(width)}  ${String(t.source).padStart(10)}  ${String(t.target).padStart(10)}`);
          io.out(
            `${r.tables.length} tables and ${r.sequences} sequences copied in ${r.ms} ms; every row count matches.`,
          );
          io.out(
            `Next: set database.url (BASALT_DATABASE_URL) to this database and start basalt; keep ${resolve(bootValue(layers, 'data.dir'))} until the site is checked.`,
          );
          return 0;
        } catch (e) {
          if (e instanceof ExportError) {
            io.err(`basalt export-to: ${e.message}`);
            return 1;
          }
          throw e;
        } finally {
          await target.close();
        }
      } finally {
        await source.close();
      }
    },
  },
];
