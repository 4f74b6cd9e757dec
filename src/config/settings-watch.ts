/**
 * How a settings store learns that stored values changed, for the platform settings
 * (./settings.ts) and the extension settings (src/extensions/settings-store.ts) alike:
 * a write NOTIFYs the store's channel, every instance LISTENs and reloads its table,
 * an optional poll backs up a notification lost while a connection reconnected
 * (docs/configuration.md, Live settings).
 */
import type { Db, Queryable } from '../db/engine';

/** How often an instance on external PostgreSQL reloads a store anyway (docs/configuration.md, Live settings). */
const BACKSTOP_MS = 5000;

export class SettingsWatch {
  private stopListen?: () => Promise<void>;
  private poll?: Timer;

  /** `reload` reads the store's table again (and tells its listeners what changed). */
  constructor(
    private db: Db,
    private channel: string,
    private reload: () => Promise<void>,
  ) {}

  /**
   * Tell every instance that a stored value changed. Without `tx`: notify now and reload
   * this instance at once. With `tx`: pg_notify joins the caller's transaction, so it is
   * delivered at commit (never on rollback), and the caller reloads after the commit.
   */
  async announce(payload: string, tx?: Queryable): Promise<void> {
    if (tx) {
      await tx.query('SELECT pg_notify($1, $2)', [this.channel, payload]);
      return;
    }
    await this.db.notify(this.channel, payload);
    await this.reload();
  }

  /**
   * Reload on every notification; on external PostgreSQL also every 5 s, for a notification
   * sent while this instance's listening connection reconnected (the embedded engine's
   * notifications stay in the process and cannot be lost). Once; a failed reload waits for the next.
   */
  async start(): Promise<void> {
    if (this.stopListen) return;
    // A failed reload waits for the next notification or poll (the doc above): the values in use stay.
    const reload = () => this.reload().catch(() => {});
    this.stopListen = await this.db.listen(this.channel, reload);
    if (this.db.kind === 'external') this.poll = setInterval(reload, BACKSTOP_MS);
  }

  async stop(): Promise<void> {
    if (this.poll) clearInterval(this.poll);
    this.poll = undefined;
    await this.stopListen?.().catch(() => {}); // stopping: the connection that listened is closing anyway
    this.stopListen = undefined;
  }
}

/** Keys whose values differ between two loads of a store (compared as JSON). */
export function changedKeys(a: ReadonlyMap<string, unknown>, b: ReadonlyMap<string, unknown>): string[] {
  return [...new Set([...a.keys(), ...b.keys()])].filter((k) => JSON.stringify(a.get(k)) !== JSON.stringify(b.get(k)));
}
