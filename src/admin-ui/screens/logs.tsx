/**
 * Logs: the request log (docs/logs.md), filtered by time, status class, area, path, key and
 * user; requests and errors per minute as a chart; a request's detail with its error's cause
 * and the audit entries it made. Read-only.
 */
import { useState } from 'preact/hooks';
import { get, query, type AdminData } from '../api';
import { AREA, NO_AREA } from '../../http/areas';
import {
  Badge,
  Button,
  DateRangeApply,
  Empty,
  ErrorNote,
  Field,
  ListTable,
  Loading,
  Modal,
  PageHeader,
  TextField,
  useAsync,
  useCursorList,
} from '../components/ui';
import { dateTime, localToIso, rangePage } from '../format';
import { titleOf } from '../screen-list';

type Entry = AdminData<'logs'>['entries'][number];
type Filters = { since: string; until: string; status: string; area: string; path: string; key: string; user: string };

const NO_FILTERS: Filters = { since: '', until: '', status: '', area: '', path: '', key: '', user: '' };
const STATUS: Record<string, string> = { '2xx': '2xx', '3xx': '3xx', '4xx': '4xx', '5xx': '5xx', error: '4xx and 5xx' };
const AREAS = Object.fromEntries([...Object.values(AREA), NO_AREA].map((a) => [a.name, a.name]));

const tone = (status: number) => (status >= 500 ? 'danger' : status >= 400 ? 'warn' : status >= 300 ? 'info' : 'ok');

/** The filters in a query string (the chart's and the list's). */
const filterQuery = (f: Filters) => ({ status: f.status, area: f.area, path: f.path, key: f.key, user: f.user });

/** Requests (bars) and errors (red bars in front) per minute, drawn by hand: one bar per minute of the range. */
function Chart({ f, tick }: { f: Filters; tick: number }) {
  const until = localToIso(f.until) ?? new Date().toISOString();
  const since = localToIso(f.since) ?? new Date(new Date(until).getTime() - 60 * 60_000).toISOString();
  const chart = useAsync(
    () => get<AdminData<'logMinutes'>>('/logs/minutes' + query({ ...filterQuery(f), since, until })),
    [f, tick],
  );
  if (chart.error) return <ErrorNote error={chart.error} onRetry={chart.reload} />;
  if (!chart.data) return <Loading />;
  const start = Math.floor(new Date(since).getTime() / 60_000);
  const end = Math.max(start + 1, Math.ceil(new Date(until).getTime() / 60_000));
  const span = Math.min(end - start, 24 * 60);
  const first = end - span;
  const byMinute = new Map(chart.data.minutes.map((m) => [Math.floor(new Date(m.minute).getTime() / 60_000), m]));
  const max = Math.max(1, ...chart.data.minutes.map((m) => m.requests));
  const total = chart.data.minutes.reduce((n, m) => n + m.requests, 0);
  const errors = chart.data.minutes.reduce((n, m) => n + m.errors, 0);
  const sampled = chart.data.minutes.some((m) => m.kept < m.requests);
  const W = 1000;
  const H = 120;
  const bw = W / span;
  const bars = [];
  for (let i = 0; i < span; i++) {
    const m = byMinute.get(first + i);
    if (!m) continue;
    const h = (m.requests / max) * (H - 4);
    const eh = (m.errors / max) * (H - 4);
    const at = new Date((first + i) * 60_000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
    bars.push(
      <g key={i}>
        <title>{`${at}: ${m.requests} requests${m.kept < m.requests ? ` (${m.kept} kept)` : ''}, ${m.errors} errors`}</title>
        <rect class="chart-requests" x={i * bw} y={H - h} width={Math.max(bw - 1, 0.5)} height={h} />
        {m.errors > 0 && (
          <rect class="chart-errors" x={i * bw} y={H - eh} width={Math.max(bw - 1, 0.5)} height={Math.max(eh, 1)} />
        )}
      </g>,
    );
  }
  const label = (min: number) =>
    new Date(min * 60_000).toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
  return (
    <figure class="log-chart">
      <figcaption>
        <span>
          <span class="chart-key chart-key-requests" /> {total.toLocaleString()} requests
        </span>
        <span>
          <span class="chart-key chart-key-errors" /> {errors.toLocaleString()} errors
        </span>
        <span class="muted">
          per minute, peak {max.toLocaleString()}
          {sampled ? ' · successes sampled, so counts are estimates' : ''}
        </span>
      </figcaption>
      <svg
        viewBox={`0 0 ${W} ${H}`}
        preserveAspectRatio="none"
        role="img"
        aria-label={`Requests and errors per minute: ${total} requests, ${errors} errors`}
      >
        <line class="chart-axis" x1="0" y1={H - 0.5} x2={W} y2={H - 0.5} />
        {bars}
      </svg>
      <div class="chart-range muted">
        <span>{label(first)}</span>
        <span>{label(end)}</span>
      </div>
    </figure>
  );
}

function Detail({ entry, onClose }: { entry: Entry; onClose: () => void }) {
  const detail = useAsync(
    () => get<AdminData<'logDetail'>>(`/logs/${encodeURIComponent(entry.request_id)}`),
    [entry.request_id],
  );
  const e = entry;
  return (
    <Modal title={`${e.method} ${e.path.length > 60 ? `${e.path.slice(0, 59)}…` : e.path}`} onClose={onClose} wide>
      <dl class="kv">
        <dt>Time</dt>
        <dd>{dateTime(e.at)}</dd>
        <dt>Path</dt>
        <dd class="mono cell">{e.path}</dd>
        <dt>Status</dt>
        <dd>
          <Badge tone={tone(e.status)}>{e.status}</Badge> in {e.duration_ms} ms
        </dd>
        <dt>Area</dt>
        <dd>{e.area}</dd>
        <dt>User</dt>
        <dd>{e.user_email ?? e.user_id ?? '—'}</dd>
        <dt>API key</dt>
        <dd>{e.key_label ?? e.key_id ?? '—'}</dd>
        <dt>IP</dt>
        <dd>{e.ip ?? '—'}</dd>
        <dt>Request id</dt>
        <dd class="mono">{e.request_id}</dd>
      </dl>
      {e.error && (
        <>
          <h3 style={{ marginTop: '16px' }}>Error</h3>
          <p>
            <code>{e.error.code}</code> {e.error.message}
          </p>
          {e.error.cause && (
            <>
              <h3 style={{ marginTop: '12px' }}>Cause</h3>
              <pre class="log-cause">
                {e.error.cause.stack ?? `${e.error.cause.name ?? 'Error'}: ${e.error.cause.message}`}
              </pre>
            </>
          )}
        </>
      )}
      <h3 style={{ marginTop: '16px' }}>Changes made by this request</h3>
      <ErrorNote error={detail.error} onRetry={detail.reload} />
      {detail.data &&
        (detail.data.audit.length ? (
          <ul>
            {detail.data.audit.map((a) => (
              <li key={a.id}>
                {dateTime(a.at)} <code>{a.action}</code> {a.target ?? ''} {a.admin_email ? `by ${a.admin_email}` : ''}
              </li>
            ))}
          </ul>
        ) : (
          <p class="muted">(none recorded in the audit log)</p>
        ))}
    </Modal>
  );
}

export function Logs() {
  const [open, setOpen] = useState<Entry | null>(null);
  const { field, set, form, applied, apply, pager, data, error, loading, reload } = useCursorList(
    NO_FILTERS,
    (f, before) => get<AdminData<'logs'>>('/logs' + query({ ...filterQuery(f), ...rangePage(f, before) })),
  );
  const [tick, setTick] = useState(0);
  /** A filter picked from a list (`any` first): value → label. */
  const choice = (label: string, key: 'status' | 'area', options: Record<string, string>) => (
    <Field label={label}>
      {(id) => (
        <select id={id} value={form[key]} onChange={set(key)}>
          <option value="">any</option>
          {Object.entries(options).map(([value, text]) => (
            <option key={value} value={value}>
              {text}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
  return (
    <>
      <PageHeader
        title={titleOf('logs')}
        subtitle="Answered requests, newest first: every error; successes up to logs.max_per_second a second, then sampled; kept logs.retention_days days."
        actions={
          <Button
            icon="refresh"
            onClick={() => {
              reload();
              setTick(tick + 1);
            }}
          >
            Refresh
          </Button>
        }
      />
      <section class="panel">
        <form class="toolbar" onSubmit={apply}>
          {choice('Status', 'status', STATUS)}
          {choice('Area', 'area', AREAS)}
          <TextField label="Path" type="search" {...field('path')} placeholder="/api/v1/db" />
          <TextField label="User" type="search" {...field('user')} placeholder="e-mail or id" />
          <TextField label="Key" type="search" {...field('key')} placeholder="name or id" />
          <DateRangeApply since={field('since')} until={field('until')} />
        </form>
        <Chart f={applied} tick={tick} />
        <ErrorNote error={error} onRetry={reload} />
        {loading && !data && <Loading />}
        {data &&
          (data.entries.length ? (
            <ListTable>
              <thead>
                <tr>
                  <th>Time</th>
                  <th>Status</th>
                  <th>Request</th>
                  <th>Who</th>
                  <th>Time taken</th>
                  <th>
                    <span class="sr-only">Details</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {data.entries.map((e) => (
                  <tr key={e.id}>
                    <td class="nowrap">{dateTime(e.at)}</td>
                    <td>
                      <Badge tone={tone(e.status)}>{e.status}</Badge>
                    </td>
                    <td class="cell" title={e.path}>
                      <code>{e.method}</code> {e.path}
                      {e.error && <span class="muted"> · {e.error.code}</span>}
                    </td>
                    <td class="cell">{e.user_email ?? e.key_label ?? e.ip ?? ''}</td>
                    <td class="nowrap">{e.duration_ms} ms</td>
                    <td class="actions">
                      <Button class="btn-sm" variant="ghost" onClick={() => setOpen(e)}>
                        Details
                      </Button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </ListTable>
          ) : (
            <Empty icon="search" title="No requests match these filters" />
          ))}
        {pager(`${data?.entries.length} requests on this page`)}
      </section>
      {open && <Detail entry={open} onClose={() => setOpen(null)} />}
    </>
  );
}
