import { join, resolve } from 'node:path';
import type { Db } from './engine';
import { lockDataDir } from './datadir-lock';
import type { EmbeddedOptions } from './embedded';

export interface OpenDbOptions {
  url: string;
  dataDir: string;
  poolMax?: number;
  /** database.busy_timeout_ms, read at each wait (src/db/wait-gate.ts); no bound when omitted. */
  busyTimeoutMs?: () => number;
  /** database.pooler and database.direct_url (src/db/external.ts, ExternalOptions). */
  pooler?: 'none' | 'transaction';
  directUrl?: string;
  /** Look for a pooler in front of the URL (src/db/external.ts, detectPooler): the platform's database. */
  detect?: boolean;
  /** The embedded engine's durability and what to do when it stops (src/db/embedded.ts). */
  embedded?: EmbeddedOptions;
}

/** Open the configured engine: external when a URL is set, embedded in `<data.dir>/pg` otherwise. */
export async function openDb(opts: OpenDbOptions): Promise<Db> {
  if (opts.url) {
    const { openExternal } = await import('./external');
    const db = await openExternal(opts.url, {
      max: opts.poolMax,
      busyTimeoutMs: opts.busyTimeoutMs,
      pooler: opts.pooler,
      directUrl: opts.directUrl,
      detect: opts.detect,
    });
    try {
      await checkServerVersion(db);
    } catch (e) {
      await db.close();
      throw e;
    }
    return db;
  }
  const dir = resolve(opts.dataDir);
  const release = lockDataDir(dir);
  try {
    const { openEmbedded } = await import('./embedded');
    const db = await openEmbedded(join(dir, 'pg'), { ...opts.embedded, busyTimeoutMs: opts.busyTimeoutMs });
    const close = db.close;
    return Object.assign(db, {
      close: async () => {
        try {
          await close();
        } finally {
          release();
        }
      },
    });
  } catch (e) {
    release();
    throw e;
  }
}

/** The PostgreSQL majors Basalt is tested on (docs/operations.md, "PostgreSQL versions"). */
export const SUPPORTED_MAJORS = { oldest: 13, newest: 18 } as const;

/**
 * An external server older than the oldest supported major is refused at once, naming its
 * version, rather than failing later on a missing catalog or function.
 */
export async function checkServerVersion(db: Db): Promise<void> {
  const { rows } = await db.query<{ v: string }>(`SELECT current_setting('server_version_num') AS v`);
  const num = Number(rows[0]?.v);
  if (Number.isFinite(num) && num < SUPPORTED_MAJORS.oldest * 10000)
    throw new Error(
      `PostgreSQL ${Math.floor(num / 10000)} is not supported: Basalt needs ${SUPPORTED_MAJORS.oldest} to ${SUPPORTED_MAJORS.newest} (docs/operations.md, "PostgreSQL versions")`,
    );
}
