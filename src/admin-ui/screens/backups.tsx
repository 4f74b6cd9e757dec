/**
 * Backups of the embedded engine (docs/admin-api.md §Backups): list, create, download,
 * delete. On an external database the API answers 409 not_supported and the screen
 * says what to use instead. Restore needs the instance stopped: `basalt restore`; a
 * point-in-time restore chosen here is carried out at the next start (docs/backup.md).
 */
import { useState } from 'preact/hooks';
import { ApiError, body, del, get, post, type AdminData } from '../api';
import {
  Button,
  Empty,
  ErrorNote,
  Loading,
  PageHeader,
  confirm,
  useActions,
  useAsync,
  ListTable,
  fieldError,
  TextField,
} from '../components/ui';
import { Icon } from '../components/icons';
import { toast } from '../components/toast';
import { dateTime } from '../format';
import { platformFacts } from '../components/shell';
import { titleOf } from '../screen-list';

type Backup = AdminData<'backups'>['backups'][number];

const size = (b: number) =>
  b < 1024 * 1024
    ? `${(b / 1024).toFixed(1)} KB`
    : b < 1024 ** 3
      ? `${(b / 1024 / 1024).toFixed(1)} MB`
      : `${(b / 1024 ** 3).toFixed(2)} GB`;

export function Backups() {
  // On external PostgreSQL the API answers 409 not_supported: say so without asking.
  const { data, error, loading, reload } = useAsync(async () => {
    if ((await platformFacts()).external)
      throw new ApiError(
        409,
        'not_supported',
        "This instance runs on an external PostgreSQL server: back it up with pg_dump, your provider's snapshots or point-in-time recovery.",
      );
    return get<AdminData<'backups'>>('/backups');
  }, []);
  const [busy, setBusy] = useState(false);
  const { run } = useActions(reload);
  const unsupported = error instanceof ApiError && error.code === 'not_supported';
  const create = async () => {
    setBusy(true);
    try {
      const { backup } = await post<AdminData<'backup'>>('/backups');
      toast(`Backup ${backup.name} created (${size(backup.size)}).`);
      if (backup.s3?.error) toast(`The copy to S3 failed: ${backup.s3.error}`, 'error');
      reload();
    } catch (e) {
      toast(`No backup made: ${(e as Error).message}`, 'error');
    } finally {
      setBusy(false);
    }
  };
  const remove = async (b: Backup) => {
    if (
      !(await confirm({
        title: `Delete backup ${b.name}?`,
        body: <p>The archive is removed from the backup directory. This cannot be undone.</p>,
        action: 'Delete',
        danger: true,
      }))
    )
      return;
    await run(b.name, () => del(`/backups/${encodeURIComponent(b.name)}`), `Backup ${b.name} deleted.`);
  };
  return (
    <>
      <PageHeader
        title={titleOf('backups')}
        subtitle={
          data ? (
            <>
              Archives of the embedded database in <code>{data.dir}</code>. Restore with the instance stopped:{' '}
              <code>basalt restore ARCHIVE</code>.
            </>
          ) : (
            'Archives of the embedded database.'
          )
        }
        actions={
          !unsupported && (
            <Button variant="primary" icon="download" busy={busy} onClick={create}>
              Create backup
            </Button>
          )
        }
      />
      {data && !unsupported && <PointInTime pitr={data.pitr} onDone={reload} />}
      {unsupported ? (
        <section class="panel">
          <Empty icon="data" title="Backups are taken by your PostgreSQL">
            {(error as ApiError).message}
          </Empty>
        </section>
      ) : (
        <section class="panel">
          <ErrorNote error={error} onRetry={reload} />
          {loading && !data && <Loading />}
          {data && !data.backups.length && (
            <Empty icon="data" title="No backups yet">
              Create one now, or schedule them in Settings (backup group).
            </Empty>
          )}
          {!!data?.backups.length && (
            <ListTable>
              <thead>
                <tr>
                  <th>Archive</th>
                  <th>Created</th>
                  <th class="num">Size</th>
                  <th>Made by</th>
                  <th>Version</th>
                  <th>
                    <span class="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {data.backups.map((b) => (
                  <tr key={b.name}>
                    <td class="mono">{b.name}</td>
                    <td>{dateTime(b.created_at)}</td>
                    <td class="num">{size(b.size)}</td>
                    <td>{b.trigger ?? '—'}</td>
                    <td>{b.platform_version ?? '—'}</td>
                    <td class="actions">
                      <a
                        class="btn btn-ghost btn-sm"
                        href={`/api/admin/backups/${encodeURIComponent(b.name)}/download`}
                        download
                        aria-label={`Download ${b.name}`}
                      >
                        <Icon name="download" size={15} /> Download
                      </a>
                      <Button class="btn-sm" variant="ghost" aria-label={`Delete ${b.name}`} onClick={() => remove(b)}>
                        Delete
                      </Button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </ListTable>
          )}
        </section>
      )}
    </>
  );
}

type Pitr = AdminData<'backups'>['pitr'];

/** To the second, in UTC: the moment field takes the same. */
const utc = (iso: string) => `${iso.slice(0, 19).replace('T', ' ')} UTC`;

/** The span a point-in-time restore reaches, and a restore to a chosen moment at the next start. */
function PointInTime({ pitr, onDone }: { pitr: Pitr; onDone: () => void }) {
  const [to, setTo] = useState(pitr.window?.to ?? '');
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<unknown>(undefined);
  const ask = async () => {
    if (
      !(await confirm({
        title: `Restore the data to ${to}?`,
        body: (
          <p>
            At the next start of the instance, the data is rebuilt as it was at that moment (from the newest backup
            before it and the WAL archive); the current data is kept beside it. Restart the instance to carry it out.
          </p>
        ),
        action: 'Restore at next start',
        danger: true,
      }))
    )
      return;
    setBusy(true);
    setErr(undefined);
    try {
      await post<AdminData<'restoreRequested'>>('/backups/restore', body('restoreTo', { to }));
      toast(`Restore to ${to} asked for: restart the instance to carry it out.`);
      onDone();
    } catch (e) {
      setErr(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="panel">
      <div class="panel-head">
        <h2>Point-in-time restore</h2>
      </div>
      <div class="panel-body pitr">
        {pitr.window ? (
          <p>
            Restorable from <strong>{utc(pitr.window.from)}</strong> to <strong>{utc(pitr.window.to)}</strong> (
            {pitr.window.bases} base {pitr.window.bases === 1 ? 'backup' : 'backups'} and the WAL archive). Or from the
            command line, instance stopped: <code>basalt restore --to TIME</code>.
          </p>
        ) : (
          <p>Nothing to restore to yet: point-in-time restore starts from a backup made while WAL archiving runs.</p>
        )}
        {pitr.pending && (
          <p role="status">
            A restore to <strong>{pitr.pending.to}</strong> ({pitr.pending.requested_by}) runs at the next start.
          </p>
        )}
        {pitr.window && (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void ask();
            }}
          >
            <TextField
              label="Moment (UTC, ISO 8601)"
              value={to}
              onValue={setTo}
              placeholder="2026-12-01T10:00:00Z"
              spellcheck={false}
              error={fieldError(err, 'to') ?? (err && !fieldError(err, 'to') ? (err as Error).message : undefined)}
            />
            <Button type="submit" variant="danger" busy={busy}>
              Restore at next start
            </Button>
          </form>
        )}
      </div>
    </section>
  );
}
