/**
 * SMTP test send and the mail jobs screen (docs/admin-api.md §Settings, §Mail jobs),
 * through the mail service. A job's bodies are not shown: the operator sees who,
 * what subject, when and why it failed.
 */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import { signedIn, type AdminRequest } from '../guard';
import { parseJobCursor, type JobRow, type JobState } from '../../mail/jobs';
import { AdminErrors } from '../errors';
import { Bodies, Queries } from '../model';
import { writeAudit } from '../audit';
import { Responses, reply } from '../responses';

const STATES: JobState[] = ['queued', 'sending', 'sent', 'failed', 'dead', 'cancelled'];
const isState = (s: string): s is JobState => (STATES as string[]).includes(s);

/** docs/admin-api.md: job. */
export function jobView(j: JobRow) {
  return {
    id: j.id,
    state: j.state,
    to: j.recipients,
    subject: j.subject,
    template: j.template,
    attempts: j.attempts,
    max_attempts: j.max_attempts,
    created_at: j.created_at,
    updated_at: j.updated_at,
    next_attempt_at: j.state === 'queued' || j.state === 'failed' ? j.run_at : null,
    sent_at: j.sent_at,
    last_error: j.last_error,
    history: j.history ?? [],
    message_id: j.message_id,
    idempotency_key: j.idem_key,
  };
}

/**
 * `host:port` of mail.smtp_url, shown beside a job's error: the Mail API's reasons never
 * name the server (clients see them too), the operator needs to know which one was tried.
 */
export function smtpServer(p: Basalt): string | null {
  try {
    const u = new URL(p.settings.get('mail.smtp_url'));
    return `${u.hostname}:${u.port || (u.protocol === 'smtps:' ? '465' : '587')}`;
  } catch {
    return null;
  }
}

export function mailRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  const mail = () => p.services.mail;
  const job = async (id: string) => {
    const row = await mail().jobs.row(id);
    if (!row) throw AdminErrors.notFound(`The mail job '${String(id).slice(0, 64)}'`);
    return row;
  };
  const transition =
    (action: 'retry' | 'cancel', from: string) =>
    async ({ params, admin }: { params: { id: string }; admin?: AdminRequest }) => {
      const before = await job(params.id); // outside the transaction: on the embedded engine it holds the database
      await p.services.admin.audited(signedIn(admin).actor, `mail.jobs.${action}`, async (tx, note) => {
        // The state is checked by the UPDATE itself, so a job claimed meanwhile is refused, not changed.
        if (!(await mail().jobs[action](params.id, tx)))
          throw AdminErrors.invalidState(
            `Only a ${from} job can be ${action === 'retry' ? 'retried' : 'cancelled'}; this one is ${before.state}.`,
          );
        note(params.id, { from: before.state, to: action === 'retry' ? 'queued' : 'cancelled' });
      });
      return ok({ job: jobView(await job(params.id)), smtp_server: smtpServer(p) });
    };
  return app
    .post(
      '/mail/test',
      async ({ body, admin }) => {
        const { actor } = signedIn(admin);
        try {
          const r = await mail().testSend(body.to);
          await writeAudit(p.db, actor, 'mail.test', body.to, { ok: true, message_id: r.messageId });
          return ok({ message_id: r.messageId, response: r.response });
        } catch (e) {
          await writeAudit(p.db, actor, 'mail.test', body.to, {
            ok: false,
            error: (e as Error).message?.slice(0, 300),
          }).catch((err) => p.log.warn('could not audit a failed mail test', { cause: err }));
          throw e;
        }
      },
      { body: Bodies.mailTest, response: reply(Responses.smtpTest) },
    )
    .get(
      '/mail/jobs',
      async ({ query }) => {
        const state = query.state || undefined; // `?state=` filters nothing, as no state
        if (state !== undefined && !isState(state))
          throw AdminErrors.field('state', `must be one of ${STATES.join(', ')}`);
        // A cursor that is not one would silently list the first page again.
        if (query.before && !parseJobCursor(query.before))
          throw AdminErrors.field('before', "must be the next_cursor of a previous page ('<time>|<job id>')");
        const r = await mail().jobs.search({
          state,
          recipient: query.recipient,
          since: query.since ? new Date(query.since) : undefined,
          until: query.until ? new Date(query.until) : undefined,
          limit: query.limit,
          before: query.before,
        });
        return ok({ jobs: r.rows.map(jobView), next_cursor: r.nextCursor });
      },
      { query: Queries.jobs, response: reply(Responses.jobs) },
    )
    .get(
      '/mail/jobs/:id',
      async ({ params }) => ok({ job: jobView(await job(params.id)), smtp_server: smtpServer(p) }),
      {
        response: reply(Responses.job),
      },
    )
    .post('/mail/jobs/:id/retry', transition('retry', 'failed or dead'), { response: reply(Responses.job) })
    .post('/mail/jobs/:id/cancel', transition('cancel', 'queued'), { response: reply(Responses.job) });
}
