/** Dashboard: health of the database and mail, version, engine, instances, counts, recent audit. */
import { useEffect, useState } from 'preact/hooks';
import { get, type AdminData } from '../api';
import { Badge, Empty, ErrorNote, Loading, PageHeader, useAsync } from '../components/ui';
import { Icon } from '../components/icons';
import { ago, dateTime, number } from '../format';
import { AuditTable } from './audit';
import { titleOf } from '../screen-list';

const STATES = ['queued', 'sending', 'sent', 'failed', 'dead', 'cancelled'] as const;

/** An administrator's sign-in lock (GET /api/admin/admins): the backstop, and the addresses failing. */
type AdminLock = AdminData<'admins'>['admins'][number];

export function Dashboard() {
  const { data, error, loading, reload } = useAsync(() => get<AdminData<'dashboard'>>('/dashboard'), []);
  const admins = useAsync(() => get<AdminData<'admins'>>('/admins'), []);
  return (
    <>
      <PageHeader
        title={titleOf('dashboard')}
        subtitle="The platform at a glance."
        actions={
          <button type="button" class="btn btn-secondary" onClick={reload}>
            <Icon name="refresh" size={16} /> Refresh
          </button>
        }
      />
      <ErrorNote error={error} onRetry={reload} />
      {loading && !data && <Loading />}
      {data && <DashboardBody d={data} admins={admins.data?.admins ?? []} />}
    </>
  );
}

function DashboardBody({ d, admins }: { d: AdminData<'dashboard'>; admins: AdminLock[] }) {
  const now = new Date();
  const locked = admins.filter((a) => a.lock.locked_until && new Date(a.lock.locked_until) > now);
  const tried = admins.filter((a) => !locked.includes(a) && a.lock.sources.some((s) => s.locked_until));
  const jobs = d.mail.jobs_24h ?? {};
  const max = Math.max(1, ...STATES.map((s) => jobs[s] ?? 0));
  return (
    <>
      <div class="stats">
        <div class="card stat">
          <div class="stat-label">
            <span class={`dot ${d.database.ok ? 'dot-ok' : 'dot-danger'}`} /> Database
          </div>
          <div class="stat-value">{d.database.ok ? 'Healthy' : 'Down'}</div>
          <div class="stat-sub">
            {d.engine === 'embedded' ? 'Embedded PostgreSQL' : 'External PostgreSQL'}
            {d.database.latency_ms != null && ` · ${d.database.latency_ms}\u00a0ms`}
          </div>
        </div>
        <div class="card stat">
          <div class="stat-label">
            <span class={`dot ${d.mail.configured ? 'dot-ok' : 'dot-warn'}`} /> Mail
          </div>
          <div class="stat-value">{d.mail.configured ? 'Configured' : 'Not set up'}</div>
          <div class="stat-sub">
            {d.mail.configured ? (
              `${number(jobs.sent ?? 0)} sent in 24 h`
            ) : (
              <a href="#/settings?group=mail">Set up SMTP</a>
            )}
          </div>
        </div>
        <div class="card stat">
          <div class="stat-label">
            <Icon name="users" size={14} /> Users
          </div>
          <div class="stat-value">{number(d.counts.users)}</div>
          <div class="stat-sub">
            {number(d.counts.admins)} administrator{d.counts.admins === 1 ? '' : 's'}
            {locked.length > 0 && (
              <>
                {' '}
                <Badge tone="danger" title={`${locked.map((a) => a.email).join(', ')}: basalt admin unlock`}>
                  {locked.length} locked
                </Badge>
              </>
            )}
            {tried.length > 0 && (
              <>
                {' '}
                <Badge
                  tone="warn"
                  title={tried.map((a) => `${a.email}: ${a.lock.sources.map((s) => s.ip).join(', ')}`).join('; ')}
                >
                  sign-in attempts blocked
                </Badge>
              </>
            )}
          </div>
        </div>
        <div class="card stat">
          <div class="stat-label">
            <Icon name="key" size={14} /> Active API keys
          </div>
          <div class="stat-value">{number(d.counts.keys_active)}</div>
          <div class="stat-sub">Version {d.version}</div>
        </div>
        {d.realtime && <RealtimeStat first={d.realtime} />}
      </div>
      <div class="cols">
        <section class="panel">
          <div class="panel-head">
            <h2>Mail jobs, last 24 hours</h2>
            <a href="#/mail">All jobs</a>
          </div>
          <div class="panel-body bars">
            {STATES.map((s) => (
              <a class="bar" key={s} href={`#/mail?state=${s}`}>
                <span>{s}</span>
                <span class="bar-track">
                  <span
                    class="bar-fill"
                    style={{
                      width: `${((jobs[s] ?? 0) / max) * 100}%`,
                      background:
                        s === 'failed' || s === 'dead' ? 'var(--danger)' : s === 'sent' ? 'var(--ok)' : undefined,
                    }}
                  />
                </span>
                <span class="num">{number(jobs[s] ?? 0)}</span>
              </a>
            ))}
          </div>
        </section>
        <section class="panel">
          <div class="panel-head">
            <h2>Extensions</h2>
            <a href="#/extensions">Details</a>
          </div>
          <div class="panel-body">
            <p>
              {number(d.extensions.loaded)} loaded
              {d.extensions.failed.length ? `, ${d.extensions.failed.length} failed` : ''}.
            </p>
            {d.extensions.failed.map((f) => (
              <div class="notice notice-danger" key={f.name}>
                <strong>{f.name}</strong>: {f.error}
              </div>
            ))}
          </div>
        </section>
      </div>
      <section class="panel">
        <div class="panel-head">
          <h2>Instances</h2>
          <Badge>{d.instances.length} seen</Badge>
        </div>
        <div class="table-wrap free">
          {d.instances.length ? (
            <table>
              <thead>
                <tr>
                  <th>Host</th>
                  <th>PID</th>
                  <th>Version</th>
                  <th>Started</th>
                  <th>Last seen</th>
                </tr>
              </thead>
              <tbody>
                {d.instances.map((i) => (
                  <tr key={i.id}>
                    <td>{i.host}</td>
                    <td>{i.pid}</td>
                    <td>{i.version}</td>
                    <td>{dateTime(i.started_at)}</td>
                    <td>{ago(i.seen_at)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <Empty icon="dashboard" title="No instance has reported yet" />
          )}
        </div>
      </section>
      <section class="panel">
        <div class="panel-head">
          <h2>Recent administrator activity</h2>
          <a href="#/audit">Audit log</a>
        </div>
        {d.recent_audit.length ? (
          <AuditTable entries={d.recent_audit} />
        ) : (
          <Empty icon="audit" title="Nothing recorded yet" />
        )}
      </section>
    </>
  );
}

/** Live streams and events per second on this instance, fetched again every 5 s while the dashboard is open. */
function RealtimeStat({ first }: { first: { connections: number; events_per_second: number } }) {
  const [now, setNow] = useState(first);
  useEffect(() => {
    const t = setInterval(() => {
      get<AdminData<'dashboard'>>('/dashboard')
        .then((d) => d.realtime && setNow(d.realtime))
        .catch(() => {}); // a live figure: the next refresh tries again
    }, 5000);
    return () => clearInterval(t);
  }, []);
  return (
    <div class="card stat" data-testid="realtime-stat">
      <div class="stat-label">
        <Icon name="refresh" size={14} /> Realtime
      </div>
      <div class="stat-value">{number(now.connections)} live</div>
      <div class="stat-sub">{number(now.events_per_second)} events/s on this instance (last 10 s)</div>
    </div>
  );
}
