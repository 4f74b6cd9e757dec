import { closeSync, existsSync, openSync, readFileSync, unlinkSync, writeSync, mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

export class DataDirLockedError extends Error {
  constructor(
    message: string,
    /** The data dir held (where a serving process listens for management commands). */
    readonly dir?: string,
  ) {
    super(message);
  }
}

interface Holder {
  pid: number;
  host: string;
  started: string;
}

/** Whether process `pid` exists (signal 0; EPERM: it exists under another user). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Whether `<dir>/basalt.lock` is there (held, or left by a dead process). */
export function lockFileExists(dir: string): boolean {
  return existsSync(join(dir, 'basalt.lock'));
}

/**
 * Take the embedded database's lock file `<dir>/basalt.lock` (created with O_EXCL, so two
 * processes cannot both win). A lock left by a dead process on this host is taken over.
 * Returns the release function.
 */
export function lockDataDir(dir: string): () => void {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'basalt.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      const me: Holder = { pid: process.pid, host: hostname(), started: new Date().toISOString() };
      writeSync(fd, JSON.stringify(me));
      closeSync(fd);
      return () => {
        try {
          const h = JSON.parse(readFileSync(file, 'utf8')) as Holder;
          if (h.pid === process.pid) unlinkSync(file);
        } catch {}
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      let h: Holder | undefined;
      try {
        h = JSON.parse(readFileSync(file, 'utf8')) as Holder;
      } catch {}
      // Stale: its process is gone, or the pid was reused by this very process (containers restart at low pids).
      if (h && h.host === hostname() && (h.pid === process.pid || !alive(h.pid))) {
        unlinkSync(file);
        continue;
      }
      const who = h
        ? `basalt process ${h.pid} on ${h.host} (started ${h.started})`
        : 'another process (unreadable lock file)';
      throw new DataDirLockedError(
        `the embedded database in ${dir} is in use by ${who}; stop it, or point this one at another data.dir or an external database.url`,
        dir,
      );
    }
  }
  throw new DataDirLockedError(`could not lock ${file}`);
}
