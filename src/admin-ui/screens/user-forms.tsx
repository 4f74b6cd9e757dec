/**
 * The Users screen's forms (docs/admin-api.md §Users): create a user, set a password,
 * change the e-mail. Every field the server finds wrong is named at once, at its field.
 */
import { useState } from 'preact/hooks';
import { body, patch, post, type AdminData } from '../api';
import { FormModal, PasswordField, TextField, fieldError, formError, useSubmit } from '../components/ui';
import { toast } from '../components/toast';
import { navigate } from '../router';

export function NewUser({ onClose }: { onClose: () => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [verified, setVerified] = useState(true);
  const { busy, error, submit } = useSubmit(async () => {
    const { user } = await post<AdminData<'user'>>('/users', body('createUser', { email, password, verified }));
    toast(`User ${user.email} created.`);
    onClose();
    navigate(`/users/${user.id}`);
  });
  return (
    <FormModal
      title="New user"
      action="Create user"
      busy={busy}
      onSubmit={submit}
      error={formError(error, ['email', 'password'])}
      noValidate
      onClose={onClose}
    >
      <TextField
        label="Email"
        type="email"
        autocomplete="off"
        value={email}
        onValue={setEmail}
        error={fieldError(error, 'email')}
      />
      <PasswordField
        label="Password"
        autocomplete="new-password"
        value={password}
        onValue={setPassword}
        error={fieldError(error, 'password')}
        hint="Tell the user through a channel of your own; no mail is sent."
      />
      <label class="check">
        <input type="checkbox" checked={verified} onChange={(e) => setVerified(e.currentTarget.checked)} /> The e-mail
        address is verified
      </label>
    </FormModal>
  );
}

export function SetPassword({ user, onClose }: { user: { id: string; email: string }; onClose: () => void }) {
  const [password, setPassword] = useState('');
  const { busy, error, submit } = useSubmit(async () => {
    await post(`/users/${encodeURIComponent(user.id)}/password`, body('userPassword', { password }));
    toast(`Password of ${user.email} set; their sessions ended.`);
    onClose();
  });
  return (
    <FormModal
      title={`Set the password of ${user.email}`}
      action="Set password"
      busy={busy}
      onSubmit={submit}
      error={formError(error, ['password'])}
      noValidate
      onClose={onClose}
    >
      <input type="text" autocomplete="username" value={user.email} readOnly hidden />
      <PasswordField
        label="New password"
        autocomplete="new-password"
        value={password}
        onValue={setPassword}
        error={fieldError(error, 'password')}
        hint="Every session of this user ends; a lockout of the address is lifted."
      />
    </FormModal>
  );
}

export function EditEmail({
  user,
  onClose,
  onDone,
}: {
  user: { id: string; email: string };
  onClose: () => void;
  onDone: () => void;
}) {
  const [email, setEmail] = useState(user.email);
  const { busy, error, submit } = useSubmit(async () => {
    await patch(`/users/${encodeURIComponent(user.id)}`, body('userEmail', { email }));
    toast(`E-mail changed to ${email.trim().toLowerCase()}.`);
    onDone();
  });
  return (
    <FormModal
      title={`Change the e-mail of ${user.email}`}
      action="Save"
      busy={busy}
      onSubmit={submit}
      error={formError(error, ['email'])}
      noValidate
      onClose={onClose}
    >
      <TextField
        label="New e-mail"
        type="email"
        autocomplete="off"
        value={email}
        onValue={setEmail}
        error={fieldError(error, 'email')}
        hint="The new address is not verified until you mark it so or the user follows a verification mail."
      />
    </FormModal>
  );
}
