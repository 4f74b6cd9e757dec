/**
 * Administration's part of serving (docs/admin.md): the instance heartbeat behind the
 * dashboard's "instances seen" and hourly housekeeping (audit retention in batches, ended
 * sessions) — a background worker of src/workers.ts — and the setup link while no
 * administrator exists. Never run by `createApp`, so building the app has no side effects.
 */
import { hostname } from 'node:os';
import type { Basalt } from '../../services';
import { setupLink } from './setup-link';

const HEARTBEAT_MS = 30_000;
const HOUSEKEEPING_MS = 60 * 60_000;
/** An instance not heard from for this long is no longer "seen". */
export const INSTANCE_SEEN_SECONDS = 90;

/** Start the heartbeat and the housekeeping; resolves to the function that ends both. */
export async function startAdminHousekeeping(p: Basalt): Promise<() => Promise<void>> {
  const instanceId = crypto.randomUUID();
  const beat = () =>
    p.db.query(
      `INSERT INTO basalt.instances (id, host, pid, version) VALUES ($1, $2, $3, $4)
       ON CONFLICT (id) DO UPDATE SET seen_at = now()`,
      [instanceId, hostname(), process.pid, p.version],
    );
  await beat();
  const heartbeat = setInterval(
    () => beat().catch((e) => p.log.warn('instance heartbeat failed', { cause: e })),
    HEARTBEAT_MS,
  );
  heartbeat.unref();
  const housekeeping = async () => {
    const deleted = await p.services.admin.prune();
    if (deleted)
      p.log.info('audit log entries past retention deleted', {
        deleted,
        retention_days: p.settings.get('admin.audit_retention_days'),
      });
    await p.db.query(`DELETE FROM basalt.instances WHERE seen_at < now() - interval '1 day'`);
  };
  void housekeeping().catch((e) => p.log.warn('admin housekeeping failed', { cause: e }));
  const hourly = setInterval(
    () => housekeeping().catch((e) => p.log.warn('admin housekeeping failed', { cause: e })),
    HOUSEKEEPING_MS,
  );
  hourly.unref();
  return async () => {
    clearInterval(heartbeat);
    clearInterval(hourly);
    // At shutdown: a record left behind only shows the instance as stale until housekeeping removes it.
    await p.db
      .query('DELETE FROM basalt.instances WHERE id = $1', [instanceId])
      .catch((e) => p.log.warn("could not remove this instance's record at shutdown", { cause: e }));
  };
}

/** The one-time link that creates the first administrator, while none exists (else undefined). */
export async function issueSetupLink(p: Basalt, mainBaseUrl: string): Promise<string | undefined> {
  const token = await p.services.admin.issueSetupToken();
  if (!token) return undefined;
  const link = setupLink(mainBaseUrl, token);
  // The link itself goes to the operator's terminal only (serve prints it on stderr): log
  // lines are often shipped elsewhere, and the token makes whoever holds it the first admin.
  p.log.warn(
    'no administrator yet: open the one-time setup link printed on stderr within 30 minutes, or run basalt admin create',
    { setup_path: '/_/#/setup' },
  );
  return link;
}
