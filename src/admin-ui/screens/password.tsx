/**
 * The signed-in administrator changes their own password (POST /api/admin/auth/password,
 * docs/admin-api.md §Sign-in and setup). This session stays; the others end.
 */
import { useState } from 'preact/hooks';
import { body, post } from '../api';
import {
  differs,
  fieldError,
  FormModal,
  formError,
  NewPasswordFields,
  PasswordField,
  useSubmit,
} from '../components/ui';
import { toast } from '../components/toast';

export function ChangePassword({ email, onClose }: { email: string; onClose: () => void }) {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [repeat, setRepeat] = useState('');
  const mismatch = differs(next, repeat);
  const { busy, error, submit } = useSubmit(async () => {
    if (mismatch) return;
    await post('/auth/password', body('password', { current_password: current, new_password: next }));
    toast('Password changed. Your other sessions were signed out.');
    onClose();
  });
  return (
    <FormModal
      title="Change your password"
      action="Change password"
      busy={busy}
      disabled={mismatch}
      onSubmit={submit}
      error={formError(error, ['current_password', 'new_password'])}
      onClose={onClose}
    >
      {/* For password managers: whose password this is. */}
      <input type="text" autocomplete="username" value={email} readOnly hidden />
      <PasswordField
        label="Current password"
        autocomplete="current-password"
        value={current}
        onValue={setCurrent}
        error={fieldError(error, 'current_password')}
        autoFocus
      />
      <NewPasswordFields
        label="New password"
        value={next}
        onValue={setNext}
        repeat={repeat}
        onRepeat={setRepeat}
        error={fieldError(error, 'new_password')}
        hint="Your other sessions end when it changes; this one stays signed in."
      />
    </FormModal>
  );
}
