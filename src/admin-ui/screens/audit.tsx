/** Audit log: every administrator change and sign-in, filtered by admin, action, target, time. Read-only. */
import { useState } from 'preact/hooks';
import { get, query } from '../api';
import { Button, Empty, ErrorNote, Field, Loading, Modal, PageHeader, useAsync } from '../components/ui';
import { dateTime, localToIso } from '../format';

export interface AuditEntry {
  id: string;
  at: string;
  admin_id: string | null;
  admin_email: string | null;
  ip: string | null;
  user_agent: string | null;
  action: string;
  target: string | null;
  diff: unknown;
  request_id: string | null;
}

export function AuditTable({ entries }: { entries: AuditEntry[] }) {
  const [open, setOpen] = useState<AuditEntry | null>(null);
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr><th>Time</th><th>Administrator</th><th>Action</th><th>Target</th><th>IP</th><th><span class="sr-only">Details</span></th></tr>
        </thead>
        <tbody>
          {entries.map((e) => (
            <tr key={e.id}>
              <td>{dateTime(e.at)}</td>
              <td>{e.admin_email ?? '—'}</td>
              <td><code>{e.action}</code></td>
              <td class="cell">{e.target ?? ''}</td>
              <td>{e.ip ?? ''}</td>
              <td class="actions"><Button class="btn-sm" variant="ghost" onClick={() => setOpen(e)}>Details</Button></td>
            </tr>
          ))}
        </tbody>
      </table>
      {open && (
        <Modal title={`Audit entry: ${open.action}`} onClose={() => setOpen(null)} wide>
          <dl class="kv">
            <dt>Time</dt><dd>{dateTime(open.at)}</dd>
            <dt>Administrator</dt><dd>{open.admin_email ?? '—'}</dd>
            <dt>Target</dt><dd>{open.target ?? '—'}</dd>
            <dt>IP</dt><dd>{open.ip ?? '—'}</dd>
            <dt>User agent</dt><dd>{open.user_agent ?? '—'}</dd>
            <dt>Request id</dt><dd class="mono">{open.request_id ?? '—'}</dd>
          </dl>
          <h3 style={{ marginTop: '16px' }}>Change</h3>
          <pre class="preview-text">{open.diff == null ? '(none)' : JSON.stringify(open.diff, null, 2)}</pre>
        </Modal>
      )}
    </div>
  );
}

export function Audit() {
  const [form, setForm] = useState({ admin: '', action: '', target: '', since: '', until: '' });
  const [applied, setApplied] = useState(form);
  const [pages, setPages] = useState<string[]>([]); // cursors of the pages before this one
  const [cursor, setCursor] = useState<string | undefined>();
  const { data, error, loading, reload } = useAsync(
    () => get<{ entries: AuditEntry[]; next_cursor: string | null }>('/audit' + query({ admin: applied.admin, action: applied.action, target: applied.target, since: localToIso(applied.since), until: localToIso(applied.until), limit: 50, before: cursor })),
    [applied, cursor],
  );
  const set = (k: keyof typeof form) => (e: Event) => setForm({ ...form, [k]: (e.currentTarget as HTMLInputElement).value });
  const apply = (e: Event) => {
    e.preventDefault();
    setPages([]);
    setCursor(undefined);
    setApplied(form);
  };
  return (
    <>
      <PageHeader title="Audit log" subtitle="Every change an administrator made, and every sign-in. Read-only; old entries are removed after the retention period (admin.audit_retention_days)." />
      <section class="panel">
        <form class="toolbar" onSubmit={apply}>
          <Field label="Administrator">{(id) => <input id={id} value={form.admin} onInput={set('admin')} placeholder="e-mail" />}</Field>
          <Field label="Action">{(id) => <input id={id} value={form.action} onInput={set('action')} placeholder="keys.create, or keys. for all" />}</Field>
          <Field label="Target">{(id) => <input id={id} value={form.target} onInput={set('target')} />}</Field>
          <Field label="From">{(id) => <input id={id} type="datetime-local" value={form.since} onInput={set('since')} />}</Field>
          <Field label="To">{(id) => <input id={id} type="datetime-local" value={form.until} onInput={set('until')} />}</Field>
          <Button type="submit" variant="primary" icon="filter">Apply filters</Button>
        </form>
        <ErrorNote error={error} onRetry={reload} />
        {loading && !data && <Loading />}
        {data && (data.entries.length ? <AuditTable entries={data.entries} /> : <Empty icon="audit" title="No entries match these filters" />)}
        <div class="pager">
          <span class="pager-info">{data ? `${data.entries.length} entries on this page` : ''}</span>
          <div class="page-actions">
            <Button icon="chevronLeft" disabled={!pages.length} onClick={() => { const p = [...pages]; const prev = p.pop(); setPages(p); setCursor(prev || undefined); }}>Newer</Button>
            <Button disabled={!data?.next_cursor} onClick={() => { setPages([...pages, cursor ?? '']); setCursor(data!.next_cursor!); }}>Older</Button>
          </div>
        </div>
      </section>
    </>
  );
}
