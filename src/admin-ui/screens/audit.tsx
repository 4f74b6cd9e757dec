/** Audit log: every administrator change and sign-in, filtered by admin, action, target, time. Read-only. */
import { useState } from 'preact/hooks';
import { get, query, type AdminData } from '../api';
import {
  Badge,
  Button,
  DateRangeApply,
  Empty,
  ErrorNote,
  Loading,
  Modal,
  PageHeader,
  TextField,
  useCursorList,
  ListTable,
} from '../components/ui';
import { dateTime, rangePage } from '../format';
import { titleOf } from '../screen-list';

export type AuditEntry = AdminData<'audit'>['entries'][number];

const show = (v: unknown): string =>
  v === null || v === undefined ? '—' : typeof v === 'string' ? v : JSON.stringify(v);
const isChange = (v: unknown): v is { before: unknown; after: unknown } =>
  !!v && typeof v === 'object' && !Array.isArray(v) && 'before' in v && 'after' in v;

/** A diff as lines `field: old → new` (fields recorded with before/after) or `field: value`. */
export function changeLines(diff: unknown): { field: string; before?: string; after: string }[] {
  if (diff === null || diff === undefined) return [];
  if (isChange(diff)) return [{ field: 'value', before: show(diff.before), after: show(diff.after) }];
  if (typeof diff !== 'object' || Array.isArray(diff)) return [{ field: 'value', after: show(diff) }];
  return Object.entries(diff as Record<string, unknown>).map(([field, v]) =>
    isChange(v) ? { field, before: show(v.before), after: show(v.after) } : { field, after: show(v) },
  );
}

/** Who acted: an administrator's e-mail, or the command line and the OS user who ran it. */
function Actor({ e }: { e: AuditEntry }) {
  if (e.actor === 'cli')
    return (
      <span title="basalt on the command line">
        <Badge tone="info">cli</Badge> {e.os_user ?? ''}
      </span>
    );
  return <>{e.admin_email ?? '—'}</>;
}

/** The change in one line: the first fields that changed, old → new. */
function Summary({ diff }: { diff: unknown }) {
  const lines = changeLines(diff).filter((l) => l.before !== undefined);
  if (!lines.length) return null;
  return (
    <span class="change-summary">
      {lines.slice(0, 2).map((l) => (
        <span key={l.field}>
          {lines.length > 1 || l.field !== 'value' ? `${l.field}: ` : ''}
          <del>{l.before}</del> → <ins>{l.after}</ins>
        </span>
      ))}
    </span>
  );
}

export function AuditTable({ entries }: { entries: AuditEntry[] }) {
  const [open, setOpen] = useState<AuditEntry | null>(null);
  return (
    <>
      <ListTable>
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
              <td class="nowrap">{dateTime(e.at)}</td>
              <td>
                <Actor e={e} />
              </td>
              <td>
                <code>{e.action}</code>
              </td>
              <td class="cell" title={e.target ?? undefined}>
                {e.target_label ?? e.target ?? ''}
                <Summary diff={e.diff} />
              </td>
              <td>{e.ip ?? ''}</td>
              <td class="actions">
                <Button class="btn-sm" variant="ghost" onClick={() => setOpen(e)}>
                  Details
                </Button>
              </td>
            </tr>
          ))}
        </tbody>
      </ListTable>
      {open && (
        <Modal title={`Audit entry: ${open.action}`} onClose={() => setOpen(null)} wide>
          <dl class="kv">
            <dt>Time</dt>
            <dd>{dateTime(open.at)}</dd>
            <dt>{open.actor === 'cli' ? 'Command line' : 'Administrator'}</dt>
            <dd>{open.actor === 'cli' ? `OS user ${open.os_user ?? 'unknown'}` : (open.admin_email ?? '—')}</dd>
            <dt>Target</dt>
            <dd>
              {open.target_label ? `${open.target_label} ` : ''}
              <span class="mono">{open.target ?? '—'}</span>
            </dd>
            <dt>IP</dt>
            <dd>{open.ip ?? '—'}</dd>
            <dt>User agent</dt>
            <dd>{open.user_agent ?? '—'}</dd>
            <dt>Request id</dt>
            <dd class="mono">{open.request_id ?? '—'}</dd>
          </dl>
          <h3 style={{ marginTop: '16px' }}>Change</h3>
          {changeLines(open.diff).length ? (
            <div class="table-wrap">
              <table class="change-table">
                <thead>
                  <tr>
                    <th>Field</th>
                    <th>Before</th>
                    <th>After</th>
                  </tr>
                </thead>
                <tbody>
                  {changeLines(open.diff).map((l) => (
                    <tr key={l.field}>
                      <td>
                        <code>{l.field}</code>
                      </td>
                      <td class="cell">{l.before === undefined ? '' : <del>{l.before}</del>}</td>
                      <td class="cell">{l.before === undefined ? l.after : <ins>{l.after}</ins>}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          ) : (
            <p class="muted">(none)</p>
          )}
        </Modal>
      )}
    </>
  );
}

export function Audit() {
  const { field, apply, pager, data, error, loading, reload } = useCursorList(
    { admin: '', action: '', target: '', since: '', until: '' },
    (f, before) =>
      get<AdminData<'audit'>>(
        '/audit' + query({ admin: f.admin, action: f.action, target: f.target, ...rangePage(f, before) }),
      ),
  );
  return (
    <>
      <PageHeader
        title={titleOf('audit')}
        subtitle="Every change made in the panel or on the command line, and every sign-in. Read-only; old entries are removed after the retention period (admin.audit_retention_days)."
      />
      <section class="panel">
        <form class="toolbar" onSubmit={apply}>
          <TextField label="Administrator" {...field('admin')} placeholder="e-mail, or cli" />
          <TextField label="Action" {...field('action')} placeholder="keys.create, or keys. for all" />
          <TextField label="Target" type="search" {...field('target')} placeholder="id, e-mail, key, name" />
          <DateRangeApply since={field('since')} until={field('until')} />
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
