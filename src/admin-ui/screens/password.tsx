/**
 * The signed-in administrator changes their own password (POST /api/admin/auth/password,
 * docs/admin-api.md §Sign-in and setup). This session stays; the others end.
 */
import { useState } from 'preact/hooks';
import { post } from '../api';
import { Button, ErrorNote, fieldError, formError, Modal, PasswordField } from '../components/ui';
import { toast } from '../components/toast';

export function ChangePassword({ email, onClose }: { email: string; onClose: () => void }) {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [repeat, setRepeat] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const mismatch = repeat !== '' && repeat !== next;
  const submit = async (e: Event) => {
    e.preventDefault();
    if (mismatch) return;
    setBusy(true);
    setError(undefined);
    try {
      await post('/auth/password', { current_password: current, new_password: next });
      toast('Password changed. Your other sessions were signed out.');
      onClose();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal
      title="Change your password"
      onClose={onClose}
      footer={
        <>
          <Button onClick={onClose}>Cancel</Button>
          <Button variant="primary" type="submit" form="change-password" busy={busy} disabled={mismatch}>
            Change password
          </Button>
        </>
      }
    >
      <form id="change-password" class="form" onSubmit={submit}>
        {/* For password managers: whose password this is. */}
        <input type="text" autocomplete="username" value={email} readOnly hidden />
        <ErrorNote error={formError(error, ['current_password', 'new_password'])} />
        <PasswordField
          label="Current password"
          autocomplete="current-password"
          value={current}
          onValue={setCurrent}
          error={fieldError(error, 'current_password')}
          autoFocus
        />
        <PasswordField
          label="New password"
          autocomplete="new-password"
          value={next}
          onValue={setNext}
          error={fieldError(error, 'new_password')}
          hint="Your other sessions end when it changes; this one stays signed in."
        />
        <PasswordField
          label="Repeat new password"
          autocomplete="new-password"
          value={repeat}
          onValue={setRepeat}
          error={mismatch ? 'The two passwords differ.' : undefined}
        />
      </form>
    </Modal>
  );
}
