/**
 * Where `extensions.dir` points. From a checkout a relative path is taken from the
 * working directory, as every other path setting is; the compiled executable takes
 * it from its own directory instead, because an operator copies `basalt` and its
 * `extensions/` folder together and may start it from anywhere (systemd, cron, a
 * shell in another folder). An absolute path is used as is in both cases.
 */
import { dirname, isAbsolute, resolve } from 'node:path';

/**
 * Whether this process is the executable built by build.ts: Bun serves a compiled
 * program's own modules from its embedded file system (`/$bunfs/` on Unix,
 * `B:\~BUN\` on Windows), never from disk.
 */
export function isCompiled(path: string = import.meta.path): boolean {
  return path.startsWith('/$bunfs/') || /^[A-Z]:[\\/]~BUN[\\/]/i.test(path);
}

/** The absolute directory to scan for `setting` (the value of extensions.dir). */
export function resolveExtensionsDir(setting: string, compiled = isCompiled(), execPath = process.execPath): string {
  if (isAbsolute(setting)) return setting;
  return compiled ? resolve(dirname(execPath), setting) : resolve(setting);
}
