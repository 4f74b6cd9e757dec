/** Audit log: every administrator change and sign-in, filtered by admin, action, target, time. Read-only. */
import { useState } from 'preact/hooks';
import { get, query, type Wire } from '../api';
import type { AuditEntry as AuditRow } from '../../modules/admin/audit';
import { Button, Empty, ErrorNote, Field, Loading, Modal, PageHeader, useCursorList } from '../components/ui';
import { dateTime, localToIso } from '../format';

export type AuditEntry = Wire<AuditRow>;

export function AuditTable({ entries }: { entries: AuditEntry[] }) {
  const [open, setOpen] = useState<AuditEntry | null>(null);
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            <th>Time</th>
            <th>Administrator</th>
            <th>Action</th>
            <th>Target</th>
            <th>IP</th>
            <th>
              <span class="sr-only">Details</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {entries.map((e) => (
            <tr key={e.id}>
              <td>{dateTime(e.at)}</td>
              <td>{e.admin_email ?? '—'}</td>
              <td>
                <code>{e.action}</code>
              </td>
              <td class="cell">{e.target ?? ''}</td>
              <td>{e.ip ?? ''}</td>
              <td class="actions">
                <Button class="btn-sm" variant="ghost" onClick={() => setOpen(e)}>
                  Details
                </Button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {open && (
        <Modal title={`Audit entry: ${open.action}`} onClose={() => setOpen(null)} wide>
          <dl class="kv">
            <dt>Time</dt>
            <dd>{dateTime(open.at)}</dd>
            <dt>Administrator</dt>
            <dd>{open.admin_email ?? '—'}</dd>
            <dt>Target</dt>
            <dd>{open.target ?? '—'}</dd>
            <dt>IP</dt>
            <dd>{open.ip ?? '—'}</dd>
            <dt>User agent</dt>
            <dd>{open.user_agent ?? '—'}</dd>
            <dt>Request id</dt>
            <dd class="mono">{open.request_id ?? '—'}</dd>
          </dl>
          <h3 style={{ marginTop: '16px' }}>Change</h3>
          <pre class="preview-text">{open.diff == null ? '(none)' : JSON.stringify(open.diff, null, 2)}</pre>
        </Modal>
      )}
    </div>
  );
}

export function Audit() {
  const { form, set, apply, pager, data, error, loading, reload } = useCursorList(
    { admin: '', action: '', target: '', since: '', until: '' },
    (f, before) =>
      get<{ entries: AuditEntry[]; next_cursor: string | null }>(
        '/audit' +
          query({
            admin: f.admin,
            action: f.action,
            target: f.target,
            since: localToIso(f.since),
            until: localToIso(f.until),
            limit: 50,
            before,
          }),
      ),
  );
  return (
    <>
      <PageHeader
        title="Audit log"
        subtitle="Every change an administrator made, and every sign-in. Read-only; old entries are removed after the retention period (admin.audit_retention_days)."
      />
      <section class="panel">
        <form class="toolbar" onSubmit={apply}>
          <Field label="Administrator">
            {(id) => <input id={id} value={form.admin} onInput={set('admin')} placeholder="e-mail" />}
          </Field>
          <Field label="Action">
            {(id) => (
              <input id={id} value={form.action} onInput={set('action')} placeholder="keys.create, or keys. for all" />
            )}
          </Field>
          <Field label="Target">{(id) => <input id={id} value={form.target} onInput={set('target')} />}</Field>
          <Field label="From">
            {(id) => <input id={id} type="datetime-local" value={form.since} onInput={set('since')} />}
          </Field>
          <Field label="To">
            {(id) => <input id={id} type="datetime-local" value={form.until} onInput={set('until')} />}
          </Field>
          <Button type="submit" variant="primary" icon="filter">
            Apply filters
          </Button>
        </form>
        <ErrorNote error={error} onRetry={reload} />
        {loading && !data && <Loading />}
        {data &&
          (data.entries.length ? (
            <AuditTable entries={data.entries} />
          ) : (
            <Empty icon="audit" title="No entries match these filters" />
          ))}
        {pager(`${data?.entries.length} entries on this page`)}
      </section>
    </>
  );
}
