/**
 * The Jobs screen (docs/admin-api.md, "Jobs"): extensions' jobs by extension, name and state,
 * a job's attempts and errors, retry a dead job, cancel a queued one (audited), and each cron
 * entry's and hook's state, through the jobs service (src/modules/jobs/service.ts).
 */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import { signedIn } from '../guard';
import { JOB_STATES, type JobRow, type JobState } from '../../jobs/store';
import { AdminErrors } from '../errors';
import { Queries } from '../model';
import { cancelJob, retryJob } from '../changes';
import { Responses, reply } from '../responses';

const isState = (s: string): s is JobState => (JOB_STATES as string[]).includes(s);

/** docs/admin-api.md: an extension's job. */
export function extensionJobView(j: JobRow) {
  return {
    id: j.id,
    extension: j.extension,
    name: j.name,
    kind: j.kind,
    state: j.state,
    payload: j.payload,
    idempotency_key: j.idempotency_key,
    attempts: j.attempts,
    max_attempts: j.max_attempts,
    run_at: j.run_at,
    errors: j.errors,
    created_at: j.created_at,
    updated_at: j.updated_at,
    finished_at: j.finished_at,
  };
}

export function jobsRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  const jobs = () => p.services.jobs;
  return app
    .get(
      '/jobs',
      async ({ query }) => {
        let state: JobState | undefined;
        if (query.state) {
          if (!isState(query.state)) throw AdminErrors.field('state', `must be one of ${JOB_STATES.join(', ')}`);
          state = query.state;
        }
        const rows = await jobs().list({
          extension: query.extension || undefined,
          name: query.name || undefined,
          state,
          limit: query.limit ?? 100,
        });
        return ok({ jobs: rows.map(extensionJobView) });
      },
      { query: Queries.extensionJobs, response: reply(Responses.extensionJobs) },
    )
    .get('/jobs/schedules', async () => ok(await jobs().status()), { response: reply(Responses.jobSchedules) })
    .get('/jobs/:id', async ({ params }) => ok({ job: extensionJobView(await jobs().get(params.id)) }), {
      response: reply(Responses.extensionJob),
    })
    .post(
      '/jobs/:id/retry',
      async ({ params, admin }) => ok({ job: extensionJobView(await retryJob(p, signedIn(admin).actor, params.id)) }),
      { response: reply(Responses.extensionJob) },
    )
    .post(
      '/jobs/:id/cancel',
      async ({ params, admin }) => ok({ job: extensionJobView(await cancelJob(p, signedIn(admin).actor, params.id)) }),
      { response: reply(Responses.extensionJob) },
    );
}
