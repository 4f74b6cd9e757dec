/** Mail jobs: filtered by state, recipient, time; detail with attempts, last error, timing; retry, cancel. */
import { Fragment } from 'preact';
import { get, query, type AdminData } from '../api';
import {
  Empty,
  ErrorNote,
  Loading,
  useAsync,
  useCursorList,
  DateRangeApply,
  TextField,
  ListTable,
} from '../components/ui';
import { JobListHeader, JobPage, StateBadge, StateFilter, type Tone } from '../components/job-screen';
import { ago, cell, dateTime, rangePage } from '../format';
import { navigate, route } from '../router';

export type Job = AdminData<'job'>['job'];

const TONE: Record<Job['state'], Tone> = {
  queued: 'info',
  sending: 'info',
  sent: 'ok',
  failed: 'warn',
  dead: 'danger',
  cancelled: 'neutral',
};
const JobState = ({ s }: { s: Job['state'] }) => <StateBadge tones={TONE} s={s} />;

export function MailJobs() {
  const id = route.value.parts[1];
  return id ? <JobDetail key={id} id={id} /> : <JobList />;
}

function JobList() {
  const q = route.value.query;
  const { form, set, field, apply, pager, data, error, loading, reload } = useCursorList(
    { state: q.get('state') ?? '', recipient: q.get('recipient') ?? '', since: '', until: '' },
    (f, before) =>
      get<AdminData<'jobs'>>('/mail/jobs' + query({ state: f.state, recipient: f.recipient, ...rangePage(f, before) })),
  );
  return (
    <>
      <JobListHeader screen="mail-jobs" subtitle="The outgoing mail queue, newest first." onRefresh={reload} />
      <section class="panel">
        <form class="toolbar" onSubmit={apply}>
          <StateFilter tones={TONE} value={form.state} onChange={set('state')} />
          <TextField label="Recipient" type="search" {...field('recipient')} placeholder="e-mail" />
          <DateRangeApply since={field('since')} until={field('until')} />
        </form>
        <ErrorNote error={error} onRetry={reload} />
        {loading && !data && <Loading />}
        {data && !data.jobs.length && (
          <Empty icon="mail" title="No mail jobs match">
            Jobs appear here when the Mail API queues a message.
          </Empty>
        )}
        {!!data?.jobs.length && (
          <ListTable>
            <thead>
              <tr>
                <th>State</th>
                <th>To</th>
                <th>Subject / template</th>
                <th class="num">Attempts</th>
                <th>Queued</th>
                <th>Last error</th>
              </tr>
            </thead>
            <tbody>
              {data.jobs.map((j) => (
                <tr key={j.id} class="row-link" onClick={() => navigate(`/mail/${j.id}`)}>
                  <td>
                    <JobState s={j.state} />
                  </td>
                  <td>
                    <a href={`#/mail/${encodeURIComponent(j.id)}`} onClick={(e) => e.stopPropagation()}>
                      {j.to.join(', ')}
                    </a>
                  </td>
                  <td class="cell" style={{ fontFamily: 'inherit' }}>
                    {j.subject ?? (j.template ? `template ${j.template}` : '—')}
                  </td>
                  <td class="num">{j.attempts}</td>
                  <td title={dateTime(j.created_at)}>{ago(j.created_at)}</td>
                  {/* Cut: a long SMTP answer must not widen the table (the whole text is in the title and the job's page). */}
                  <td class="cell" title={j.last_error ?? undefined}>
                    {cell(j.last_error, 60)}
                  </td>
                </tr>
              ))}
            </tbody>
          </ListTable>
        )}
        {pager(`${data?.jobs.length} on this page`)}
      </section>
    </>
  );
}

function JobDetail({ id }: { id: string }) {
  const job = useAsync(
    () =>
      get<AdminData<'job'>>(`/mail/jobs/${encodeURIComponent(id)}`).then((r) => ({
        ...r.job,
        smtp_server: r.smtp_server,
      })),
    [id],
  );
  return (
    <JobPage
      screen="mail-jobs"
      job={job}
      head={(j) => ({
        title: j.subject ?? (j.template ? `Template ${j.template}` : 'Mail job'),
        subtitle: (
          <>
            To {j.to.join(', ')} · <JobState s={j.state} />
          </>
        ),
        actions: {
          base: `/mail/jobs/${encodeURIComponent(id)}`,
          canRetry: j.state === 'failed' || j.state === 'dead',
          canCancel: j.state === 'queued',
          cancel: {
            title: 'Cancel this mail?',
            body: <p>The message will not be sent.</p>,
            action: 'Cancel mail',
          },
        },
      })}
    >
      {(j) => (
        <>
          <dt>State</dt>
          <dd>
            <JobState s={j.state} />
          </dd>
          <dt>Recipients</dt>
          <dd>{j.to.join(', ')}</dd>
          <dt>Template</dt>
          <dd>{j.template ?? '—'}</dd>
          <dt>Attempts</dt>
          <dd>
            {j.attempts}
            {j.max_attempts ? ` of ${j.max_attempts}` : ''}
          </dd>
          <dt>Queued</dt>
          <dd>{dateTime(j.created_at)}</dd>
          <dt>Last change</dt>
          <dd>{dateTime(j.updated_at)}</dd>
          <dt>Next attempt</dt>
          <dd>{j.next_attempt_at ? `${dateTime(j.next_attempt_at)} (${ago(j.next_attempt_at)})` : '—'}</dd>
          <dt>Sent</dt>
          <dd>{dateTime(j.sent_at)}</dd>
          <dt>Message id</dt>
          <dd class="mono">{j.message_id ?? '—'}</dd>
          <dt>Idempotency key</dt>
          <dd class="mono">{j.idempotency_key ?? '—'}</dd>
          <dt>Last error</dt>
          <dd>
            {j.last_error ? (
              <>
                <span class="field-error">{j.last_error}</span>
                {j.smtp_server && (
                  <span class="muted" data-testid="smtp-server">
                    {' '}
                    (mail server {j.smtp_server}, from mail.smtp_url)
                  </span>
                )}
              </>
            ) : (
              '—'
            )}
          </dd>
          {j.history?.map((h, i) => (
            <Fragment key={h.until}>
              <dt>Before retry {i + 1}</dt>
              <dd data-testid="job-history">
                {h.state} after {h.attempts} attempt{h.attempts === 1 ? '' : 's'} ({dateTime(h.until)})
                {h.last_error && (
                  <>
                    : <span class="field-error">{h.last_error}</span>
                  </>
                )}
              </dd>
            </Fragment>
          ))}
        </>
      )}
    </JobPage>
  );
}
