/**
 * Retry and Cancel of a job's page (the Mail jobs and Jobs screens): the buttons, the
 * confirmation before a cancel, the POST to `<base>/retry` or `<base>/cancel` and its toast.
 */
import type { ComponentChildren } from 'preact';
import { post } from '../api';
import { Button, confirm, useActions } from './ui';

export function JobActions({
  base,
  canRetry,
  canCancel,
  cancel,
  after,
}: {
  /** The job's admin API path, e.g. `/mail/jobs/<id>`. */
  base: string;
  canRetry: boolean;
  canCancel: boolean;
  /** The question asked before cancelling. */
  cancel: { title: string; body: ComponentChildren; action: string };
  after: () => void;
}) {
  const { busy, run } = useActions(after);
  const act = async (action: 'retry' | 'cancel') => {
    if (action === 'cancel' && !(await confirm({ ...cancel, danger: true }))) return;
    await run(action, () => post(`${base}/${action}`), action === 'retry' ? 'Job queued again.' : 'Job cancelled.');
  };
  return (
    <>
      {canRetry && (
        <Button variant="primary" icon="refresh" busy={busy !== null} onClick={() => act('retry')}>
          Retry
        </Button>
      )}
      {canCancel && (
        <Button variant="danger" busy={busy !== null} onClick={() => act('cancel')}>
          Cancel
        </Button>
      )}
    </>
  );
}
