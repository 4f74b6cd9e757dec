/**
 * The extension the jobs suite (jobs.test.ts) installs: a job of each behaviour, a cron
 * entry every two seconds, a hook on `items` and on sign-ups. Every handler writes what it saw
 * into ext_jobs_probe.seen (with the process id), which GET /seen reads back; the `items` hook,
 * which sees tens of thousands of events, appends a line to the file JOBS_PROBE_HOOK_LOG names
 * instead (HookLine; a row each would be a commit each, and a sync each on the embedded engine).
 */
export const PROBE = `
import { appendFileSync } from 'node:fs';
import { defineExtension, t } from 'basalt';

export default defineExtension({
  name: 'jobs-probe',
  version: '1.0.0',
  setup(ctx) {
    const seen = (kind, key, attempt, data) =>
      ctx.db.query('INSERT INTO ext_jobs_probe.seen (kind, key, attempt, pid, data) VALUES ($1, $2, $3, $4, $5::jsonb)',
        [kind, String(key), attempt ?? 0, process.pid, JSON.stringify(data ?? null)]);

    ctx.jobs.define('echo', async (job) => { await seen('echo', job.payload.k, job.attempt); });
    ctx.jobs.define('flaky', async (job) => {
      await seen('flaky', job.payload.k, job.attempt);
      if (job.attempt < job.payload.failUntil) throw new Error('flaky attempt ' + job.attempt);
    }, { attempts: 3, backoff: 'fixed', backoffMs: 100 });
    ctx.jobs.define('doomed', async (job) => {
      await seen('doomed', job.payload.k, job.attempt);
      throw new Error('doomed attempt ' + job.attempt);
    }, { attempts: 2, backoffMs: 50 });
    ctx.jobs.define('slow', async (job) => {
      await seen('slow-started', job.payload.k, job.attempt);
      await new Promise((resolve, reject) => {
        const timer = setTimeout(resolve, job.payload.ms);
        job.signal.addEventListener('abort', () => { clearTimeout(timer); reject(job.signal.reason); });
      });
      await seen('slow-done', job.payload.k, job.attempt);
    }, { attempts: 3 });
    ctx.jobs.define('stuck', (job) => new Promise((_, reject) => {
      job.signal.addEventListener('abort', () => reject(job.signal.reason));
    }), { attempts: 1, timeoutMs: 300 });

    ctx.cron('tick', '*/2 * * * * *', async (run) => { await seen('cron', run.slot, run.attempt); });

    const hookLog = process.env.JOBS_PROBE_HOOK_LOG;
    ctx.on('items', ['insert', 'update', 'delete'], async (event) => {
      // A statement on the platform's database first, as a real handler makes: it waits for the
      // session or a connection like any other work (and fails as it would when none comes).
      const { rows } = await ctx.db.query('SELECT $1::bigint AS id', [event.id]);
      // One write(2) of one line with O_APPEND: whole in the file or not at all when SIGKILLed.
      appendFileSync(hookLog, JSON.stringify({ id: Number(rows[0].id), action: event.action, client: event.row.client, n: event.row.n, pid: process.pid }) + '\\n');
    }, { name: 'items-hook' });
    ctx.on('auth.user_created', async (event) => { await seen('user_created', event.user.email, 0, event); });
    ctx.on('auth.signed_in', async (event) => { await seen('signed_in', event.user.email, 0, event); });

    ctx.routes.post('/enqueue', async ({ body, request }) => {
      const opts = { idempotencyKey: body.key, delayMs: body.delayMs };
      if (body.rollback === undefined) return ctx.reply(request, { id: await ctx.jobs.enqueue(body.name, body.payload, opts) });
      let id = '';
      try {
        await ctx.db.transaction(async (tx) => {
          id = await ctx.jobs.enqueue(body.name, body.payload, { ...opts, tx });
          if (body.rollback) throw new Error('rolled back on purpose');
        });
      } catch {}
      return ctx.reply(request, { id });
    }, {
      body: t.Object({ name: t.String(), payload: t.Any(), key: t.Optional(t.String()), delayMs: t.Optional(t.Number()), rollback: t.Optional(t.Boolean()) }),
    });

    // Each entry of txs a transaction of its own, one after another, inserting its rows (n) in
    // one statement; one with rollback set is rolled back on purpose.
    ctx.routes.post('/write', async ({ body, request }) => {
      for (const w of body.txs) {
        try {
          await ctx.db.transaction(async (tx) => {
            await tx.query('INSERT INTO public.items (client, n) SELECT $1, unnest($2::int[]) ON CONFLICT DO NOTHING', [body.client, '{' + w.ns.join(',') + '}']);
            if (w.rollback) throw new Error('rolled back on purpose');
          });
        } catch (e) {
          if (!w.rollback) throw e;
        }
      }
      return ctx.reply(request, { ok: true });
    }, { body: t.Object({ client: t.Number(), txs: t.Array(t.Object({ ns: t.Array(t.Number()), rollback: t.Optional(t.Boolean()) })) }) });

    ctx.routes.get('/seen', async ({ query, request }) => {
      const { rows } = await ctx.db.query('SELECT kind, key, attempt, pid, data FROM ext_jobs_probe.seen WHERE kind = $1 ORDER BY id', [query.kind]);
      return ctx.reply(request, { rows });
    });

    ctx.routes.get('/job/:id', async ({ params, request }) => {
      const { rows } = await ctx.db.query('SELECT state, attempts, errors, kind FROM basalt.jobs WHERE id = $1', [params.id]);
      return ctx.reply(request, { job: rows[0] ?? null });
    });

    // The items hook has started once: its checkpoint exists, so its table's capture is on.
    ctx.routes.get('/hook-started', async ({ request }) => {
      const { rows } = await ctx.db.query("SELECT 1 FROM basalt.hook_checkpoints WHERE extension = 'jobs-probe' AND name = 'items-hook'");
      return ctx.reply(request, { started: rows.length > 0 });
    });

    ctx.routes.get('/cron-runs', async ({ request }) => {
      const { rows } = await ctx.db.query(
        "SELECT to_char(slot AT TIME ZONE 'UTC', 'YYYY-MM-DD\\"T\\"HH24:MI:SS') AS slot, skipped, job_id FROM basalt.cron_runs WHERE extension = 'jobs-probe' ORDER BY slot");
      return ctx.reply(request, { rows });
    });
  },
});
`;

/** One line of the `items` hook's file. */
export interface HookLine {
  id: number;
  action: string;
  client: number;
  n: number;
  pid: number;
}

export const PROBE_MIGRATION = `CREATE TABLE seen (
  id bigserial PRIMARY KEY,
  kind text NOT NULL,
  key text NOT NULL,
  attempt int NOT NULL,
  pid int NOT NULL,
  data jsonb
);`;

/** The application table the hook follows (the operator's migrations.dir). */
export const ITEMS_MIGRATION = `CREATE TABLE public.items (
  id bigserial PRIMARY KEY,
  client int NOT NULL,
  n int NOT NULL,
  UNIQUE (client, n)
);`;
