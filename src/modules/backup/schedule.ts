/**
 * Scheduled backups (docs/backup.md): `backup.schedule` is `off` (or empty), `every N`
 * with a unit `s m h d` (`every 6h`), or `daily HH:MM` (UTC). After each scheduled
 * backup the scheduled archives beyond `backup.keep` are deleted, oldest first. Both
 * settings are live; `serve` starts this on the embedded engine.
 */
import type { Basalt } from '../../services';
import { SETTINGS_BY_KEY } from '../../config/schema';
import { backupService, timeOfName } from './service';

export type Schedule =
  | { kind: 'off' }
  | { kind: 'every'; ms: number }
  | { kind: 'daily'; hour: number; minute: number };

// The setting is validated against this pattern wherever it is set (config file, environment, settings set).
const DEF = SETTINGS_BY_KEY.get('backup.schedule')!;
const SCHEDULE_PATTERN = DEF.pattern!;
const SCHEDULE_EXPECTS = DEF.expects!;

const UNIT: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseSchedule(text: string): Schedule {
  const t = text.trim();
  if (!new RegExp(SCHEDULE_PATTERN).test(t))
    throw new Error(`backup.schedule: must be ${SCHEDULE_EXPECTS}, got ${JSON.stringify(text)}`);
  if (t === '' || t === 'off') return { kind: 'off' };
  const every = /^every (\d+)([smhd])$/.exec(t);
  if (every) return { kind: 'every', ms: Number(every[1]) * UNIT[every[2]!]! };
  const [, hh, mm] = /^daily (\d\d):(\d\d)$/.exec(t)!;
  return { kind: 'daily', hour: Number(hh), minute: Number(mm) };
}

/** When the next backup is due, given the last scheduled one (or when the schedule started). */
export function nextRun(s: Schedule, last: Date | undefined, started: Date): Date | undefined {
  if (s.kind === 'off') return undefined;
  if (s.kind === 'every') return new Date((last ?? started).getTime() + s.ms);
  const from = last ?? started;
  const d = new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), from.getUTCDate(), s.hour, s.minute));
  if (d <= from) d.setUTCDate(d.getUTCDate() + 1);
  return d;
}

/**
 * Start the schedule; returns the stop function (waits for a backup under way). Checks
 * once a second, so a changed setting applies within a second. `scheduleText` reads the
 * schedule (the setting, whose validation refuses intervals under 5 minutes; a test of
 * retention passes a shorter one here).
 */
export function startBackupSchedule(
  p: Basalt,
  scheduleText: () => string = () => p.settings.get('backup.schedule'),
): () => Promise<void> {
  const service = backupService(p);
  const started = new Date();
  let last: Date | undefined;
  let running: Promise<void> | undefined;
  let warned = '';
  // The newest scheduled archive carries the schedule across restarts.
  const ready = service
    .list()
    .then((l) => {
      const newest = l.find((b) => b.trigger === 'schedule');
      if (newest) last = timeOfName(newest.name) ?? new Date(newest.created_at);
    })
    // No archive list (an unreadable backup dir): the schedule starts from now, and the first run says why.
    .catch(() => {});

  let stopped = false;
  const tick = async () => {
    if (running || stopped) return;
    const text = scheduleText();
    let s: Schedule;
    try {
      s = parseSchedule(text);
    } catch (e) {
      if (warned !== text) p.log.error('backup schedule ignored', { cause: (e as Error).message });
      warned = text;
      return;
    }
    const due = nextRun(s, last, started);
    if (!due || due.getTime() > Date.now()) return;
    running = (async () => {
      try {
        const b = await service.create({ trigger: 'schedule' });
        last = new Date(b.created_at);
        const pruned = await service.prune(p.settings.get('backup.keep'));
        p.log.info('scheduled backup created', {
          name: b.name,
          bytes: b.size,
          held_ms: b.held_ms,
          ms: b.total_ms,
          pruned,
          s3: b.s3?.key ?? undefined,
        });
      } catch (e) {
        // Try again at the next due time, not in a tight loop.
        last = new Date();
        p.log.error('scheduled backup failed', { cause: e });
      } finally {
        running = undefined;
      }
    })();
  };
  const timer = setInterval(() => void ready.then(tick), 1000);
  timer.unref();
  return async () => {
    stopped = true;
    clearInterval(timer);
    await running;
  };
}
