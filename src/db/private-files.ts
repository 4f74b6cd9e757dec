/**
 * The data dir belongs to the user Basalt runs as: 0700 folders, 0600 files (the database,
 * its WAL, uploads, backups, the lock). `basalt` sets its umask to 077 before it creates
 * anything (src/main.ts); `privateDataDir` repairs what an older version or another tool
 * left wider. docs/operations.md, "File modes".
 */
import { chmodSync, closeSync, fsyncSync, lstatSync, mkdirSync, openSync, readdirSync, constants } from 'node:fs';
import { join } from 'node:path';

/** What `privateDataDir` narrowed: how many entries, and the first few paths with their old modes. */
export interface ModeRepair {
  fixed: number;
  examples: string[];
}

/**
 * Create `dir` (0700) or narrow every folder under it to 0700 and every file to 0600 at
 * most (a narrower mode is kept). Symbolic links are neither followed nor changed.
 */
export function privateDataDir(dir: string): ModeRepair {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const repair: ModeRepair = { fixed: 0, examples: [] };
  const visit = (path: string) => {
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (!st || st.isSymbolicLink()) return;
    const mode = st.mode & 0o7777;
    if (mode & 0o7077) {
      chmodSync(path, mode & 0o700);
      repair.fixed++;
      if (repair.examples.length < 5) repair.examples.push(`${path} (was ${mode.toString(8).padStart(4, '0')})`);
    }
    if (st.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
  };
  visit(dir);
  return repair;
}

/** fsync every file and folder under `dir` (after initdb, which writes the cluster unsynced). */
export function syncTree(dir: string): void {
  const visit = (path: string) => {
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (!st || st.isSymbolicLink()) return;
    if (st.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
    const fd = openSync(path, constants.O_RDONLY);
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  };
  visit(dir);
}
