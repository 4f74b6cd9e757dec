/**
 * A cheap fingerprint of "untouched": the path (below `dir`), size and modification time of
 * every file under `dir`, sorted, one a line. The same before and after → nothing there was
 * written, added or removed.
 *
 * @example
 * const before = fingerprint(dataDir);
 * expect(refusedRestore()).toThrow();
 * expect(fingerprint(dataDir)).toBe(before);
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export function fingerprint(dir: string): string {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else {
        const st = statSync(p);
        out.push(`${p.slice(dir.length)}:${st.size}:${st.mtimeMs}`);
      }
    }
  };
  walk(dir);
  return out.sort().join('\n');
}
