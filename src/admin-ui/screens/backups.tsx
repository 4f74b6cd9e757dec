/**
 * Backups of the embedded engine (docs/admin-api.md §Backups): list, create, download,
 * delete. On an external database the API answers 409 not_supported and the screen
 * says what to use instead. Restore needs the instance stopped: `basalt restore`.
 */
import { useState } from 'preact/hooks';
import { ApiError, del, get, post, type AdminData } from '../api';
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
