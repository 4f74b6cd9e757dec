/**
 * A point-in-time restore asked for from the admin panel or API (docs/backup.md, "Point-in-time
 * restore"): a restore needs the instance stopped, so the request is written to
 * `<data.dir>/backups/restore-request.json` and carried out by the next `basalt serve`, before it
 * opens the database, exactly as `basalt restore --to` would. A request that fails is renamed
 * `restore-request.failed.json` with its error, and the current data is served.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { bootValue, loadBootLayers, type LoadOptions } from '../../config/load';
import type { PitrTarget } from './pitr';

export interface RestoreRequest {
  /** ISO time, or 'latest'. */
  to: string;
  requested_by: string;
  requested_at: string;
}

export const requestPath = (dataDir: string) => join(dataDir, 'backups', 'restore-request.json');

export function writeRestoreRequest(dataDir: string, r: RestoreRequest): void {
  writeFileSync(requestPath(dataDir), JSON.stringify(r), { mode: 0o600 });
}

export function readRestoreRequest(dataDir: string): RestoreRequest | undefined {
  try {
    return JSON.parse(readFileSync(requestPath(dataDir), 'utf8')) as RestoreRequest;
  } catch {
    return undefined;
  }
}

/** Carry out a pending request before `serve` opens the data dir; `say` prints a plain line. */
export async function runPendingRestore(opts: LoadOptions, say: (line: string) => void): Promise<void> {
  const layers = loadBootLayers(opts);
  if (bootValue(layers, 'database.url')) return;
  const dataDir = resolve(bootValue(layers, 'data.dir'));
  const file = requestPath(dataDir);
  if (!existsSync(file)) return;
  const req = readRestoreRequest(dataDir);
  // Out of the way first: the restore moves backups/ into the restored data dir.
  rmSync(file, { force: true });
  if (!req) return;
  const target: PitrTarget = req.to === 'latest' ? { kind: 'latest' } : { kind: 'time', at: new Date(req.to) };
  const { restore, RestoreError, DataDirInUseError } = await import('./restore');
  say(`basalt: restoring the data to ${req.to} as ${req.requested_by} asked at ${req.requested_at}`);
  try {
    const r = await restore({ dataDir, pitr: { target } });
    say(
      `basalt: restored to ${req.to} from ${r.pitr?.base} (PostgreSQL: ${r.pitr?.stop}); previous data kept in ${r.previous}`,
    );
  } catch (e) {
    if (e instanceof DataDirInUseError) {
      // Another instance serves this data dir (a takeover): the request waits for a start that finds it free.
      writeRestoreRequest(dataDir, req);
      say(`basalt: the restore to ${req.to} waits: ${e.message}`);
      return;
    }
    if (!(e instanceof RestoreError)) throw e;
    const failed = join(dataDir, 'backups', 'restore-request.failed.json');
    writeFileSync(failed, JSON.stringify({ ...req, error: e.message }), { mode: 0o600 });
    say(`basalt: the restore to ${req.to} was refused (${e.message}); nothing was changed, serving the current data`);
  }
}
