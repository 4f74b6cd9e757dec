/**
 * Jobs: extensions' jobs by extension, name and state; a job's attempts and errors, retry a
 * dead one, cancel a queued one; each cron entry's last run, next slot and result, and each
 * hook's checkpoint and lag (docs/extensions.md, "Jobs, cron and hooks").
 */
import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { get, query, type AdminData } from '../api';
import { Button, Empty, ErrorNote, ListTable, Loading, TextField, useAsync } from '../components/ui';
import { JobListHeader, JobPage, StateBadge, StateFilter, type Tone } from '../components/job-screen';
import { ago, cell, dateTime } from '../format';
import { navigate, route } from '../router';

type ExtJob = AdminData<'extensionJob'>['job'];

const TONE: Record<ExtJob['state'], Tone> = {
  queued: 'info',
  running: 'warn',
  succeeded: 'ok',
  dead: 'danger',
  cancelled: 'neutral',
};
const State = ({ s }: { s: string | null }) => (s ? <StateBadge tones={TONE} s={s} /> : <span class="muted">—</span>);

export function Jobs() {
  const id = route.value.parts[1];
  return id ? <JobDetail key={id} id={id} /> : <JobList />;
}

function JobList() {
  const q = route.value.query;
  const initial = { extension: q.get('extension') ?? '', name: q.get('name') ?? '', state: q.get('state') ?? '' };
  const [form, setForm] = useState(initial);
  const [applied, setApplied] = useState(initial);
  const list = useAsync(() => get<AdminData<'extensionJobs'>>('/jobs' + query(applied)), [applied]);
  const schedules = useAsync(() => get<AdminData<'jobSchedules'>>('/jobs/schedules'), []);
  const reload = () => {
    list.reload();
    schedules.reload();
  };
  const field = (k: keyof typeof form) => ({ value: form[k], onValue: (v: string) => setForm({ ...form, [k]: v }) });
  return (
    <>
      <JobListHeader screen="jobs" subtitle="Extensions' jobs, cron entries and hooks." onRefresh={reload} />
      <section class="panel">
        <form
          class="toolbar"
          onSubmit={(e) => {
            e.preventDefault();
            setApplied(form);
          }}
        >
          <TextField label="Extension" type="search" {...field('extension')} />
          <TextField label="Name" type="search" {...field('name')} />
          <StateFilter
            tones={TONE}
            value={form.state}
            onChange={(e) => setForm({ ...form, state: (e.currentTarget as HTMLSelectElement).value })}
          />
          <Button type="submit" icon="filter">
            Apply
          </Button>
        </form>
        <ErrorNote error={list.error} onRetry={list.reload} />
        {list.loading && !list.data && <Loading />}
        {list.data && !list.data.jobs.length && (
          <Empty icon="puzzle" title="No jobs match">
            Jobs appear here when an extension queues one, a cron entry runs or a hook parks an event.
          </Empty>
        )}
        {!!list.data?.jobs.length && (
          <ListTable>
            <thead>
              <tr>
                <th>State</th>
                <th>Extension / name</th>
                <th>Kind</th>
                <th class="num">Attempts</th>
                <th>Queued</th>
                <th>Last error</th>
              </tr>
            </thead>
            <tbody>
              {list.data.jobs.map((j) => (
                <tr key={j.id} class="row-link" onClick={() => navigate(`/jobs/${j.id}`)}>
                  <td>
                    <State s={j.state} />
                  </td>
                  <td>
                    <a href={`#/jobs/${encodeURIComponent(j.id)}`} onClick={(e) => e.stopPropagation()}>
                      {j.extension} / {j.name}
                    </a>
                  </td>
                  <td>{j.kind}</td>
                  <td class="num">
                    {j.attempts} of {j.max_attempts}
                  </td>
                  <td title={dateTime(j.created_at)}>{ago(j.created_at)}</td>
                  <td class="cell" title={j.errors.at(-1)?.error}>
                    {cell(j.errors.at(-1)?.error.split('\n')[0] ?? null, 60)}
                  </td>
                </tr>
              ))}
            </tbody>
          </ListTable>
        )}
      </section>
      <section class="panel">
        <h2 class="panel-body">Cron</h2>
        <ErrorNote error={schedules.error} onRetry={schedules.reload} />
        {schedules.data && !schedules.data.cron.length && (
          <p class="muted panel-body">No extension declares a cron entry.</p>
        )}
        {!!schedules.data?.cron.length && (
          <ListTable>
            <thead>
              <tr>
                <th>Extension / name</th>
                <th>Schedule</th>
                <th>Last slot</th>
                <th>Result</th>
                <th>Next slot</th>
              </tr>
            </thead>
            <tbody>
              {schedules.data.cron.map((c) => (
                <tr key={`${c.extension}/${c.name}`}>
                  <td>
                    {c.extension} / {c.name}
                  </td>
                  <td class="mono">
                    {c.expression} ({c.timezone})
                  </td>
                  <td title={dateTime(c.last_slot)}>{ago(c.last_slot)}</td>
                  <td>
                    {c.last_job ? <a href={`#/jobs/${encodeURIComponent(c.last_job)}`}>{c.last_state ?? '—'}</a> : '—'}
                  </td>
                  <td>{dateTime(c.next_slot)}</td>
                </tr>
              ))}
            </tbody>
          </ListTable>
        )}
        <h2 class="panel-body">Hooks</h2>
        {schedules.data && !schedules.data.hooks.length && (
          <p class="muted panel-body">No extension declares a hook.</p>
        )}
        {!!schedules.data?.hooks.length && (
          <ListTable>
            <thead>
              <tr>
                <th>Extension / name</th>
                <th>Source</th>
                <th>Checkpoint</th>
                <th class="num">Lag (events)</th>
                <th class="num">Lag (s)</th>
              </tr>
            </thead>
            <tbody>
              {schedules.data.hooks.map((h) => (
                <tr key={`${h.extension}/${h.name}`}>
                  <td>
                    {h.extension} / {h.name}
                  </td>
                  <td class="mono">{h.source}</td>
                  <td class="mono" title={dateTime(h.updated_at)}>
                    {h.position}
                  </td>
                  <td class="num">{h.lag_events}</td>
                  <td class="num">{h.lag_seconds.toFixed(1)}</td>
                </tr>
              ))}
            </tbody>
          </ListTable>
        )}
      </section>
    </>
  );
}

function JobDetail({ id }: { id: string }) {
  const job = useAsync(
    () => get<AdminData<'extensionJob'>>(`/jobs/${encodeURIComponent(id)}`).then((r) => r.job),
    [id],
  );
  return (
    <JobPage
      screen="jobs"
      job={job}
      head={(j) => ({
        title: `${j.extension} / ${j.name}`,
        subtitle: (
          <>
            {j.kind} · <State s={j.state} />
          </>
        ),
        actions: {
          base: `/jobs/${encodeURIComponent(id)}`,
          canRetry: j.state === 'dead' || j.state === 'cancelled',
          canCancel: j.state === 'queued',
          cancel: { title: 'Cancel this job?', body: <p>It will not run.</p>, action: 'Cancel job' },
        },
      })}
    >
      {(j) => (
        <>
          <dt>Attempts</dt>
          <dd>
            {j.attempts} of {j.max_attempts}
          </dd>
          <dt>Queued</dt>
          <dd>{dateTime(j.created_at)}</dd>
          <dt>Runs at</dt>
          <dd>{dateTime(j.run_at)}</dd>
          <dt>Finished</dt>
          <dd>{dateTime(j.finished_at)}</dd>
          <dt>Idempotency key</dt>
          <dd class="mono">{j.idempotency_key ?? '—'}</dd>
          <dt>Payload</dt>
          <dd class="mono">{cell(JSON.stringify(j.payload), 2000)}</dd>
          {j.errors.map((e) => (
            <Fragment key={`${e.attempt} ${e.at}`}>
              <dt>Attempt {e.attempt}</dt>
              <dd>
                {dateTime(e.at)}: <span class="field-error">{e.error.split('\n')[0]}</span>
              </dd>
            </Fragment>
          ))}
        </>
      )}
    </JobPage>
  );
}
