/**
 * The Users screen's forms (docs/admin-api.md §Users): create a user, set a password,
 * change the e-mail. Every field the server finds wrong is named at once, at its field.
 */
import { useState } from 'preact/hooks';
import { patch, post } from '../api';
import { Button, ErrorNote, Field, Modal, PasswordField, fieldError, formError } from '../components/ui';
import { toast } from '../components/toast';
import { navigate } from '../router';

function FormModal({
  title,
  id,
  action,
  busy,
  onClose,
  children,
}: {
  title: string;
  id: string;
  action: string;
  busy: boolean;
  onClose: () => void;
  children: preact.ComponentChildren;
}) {
  return (
    <Modal
      title={title}
      onClose={onClose}
      footer={
        <>
          <Button onClick={onClose}>Cancel</Button>
          <Button variant="primary" type="submit" form={id} busy={busy}>
            {action}
          </Button>
        </>
      }
    >
      {children}
    </Modal>
  );
}

/** Send `run`, keep its error for the fields; `busy` meanwhile. */
function useSubmit(run: () => Promise<void>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await run();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, submit };
}

export function NewUser({ onClose }: { onClose: () => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [verified, setVerified] = useState(true);
  const { busy, error, submit } = useSubmit(async () => {
    const { user } = await post<{ user: { id: string; email: string } }>('/users', { email, password, verified });
    toast(`User ${user.email} created.`);
    onClose();
    navigate(`/users/${user.id}`);
  });
  return (
    <FormModal title="New user" id="new-user" action="Create user" busy={busy} onClose={onClose}>
      <form id="new-user" class="form" onSubmit={submit} noValidate>
        <ErrorNote error={formError(error, ['email', 'password'])} />
        <Field label="Email" error={fieldError(error, 'email')}>
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              type="email"
              autocomplete="off"
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          )}
        </Field>
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
      </form>
    </FormModal>
  );
}

export function SetPassword({ user, onClose }: { user: { id: string; email: string }; onClose: () => void }) {
  const [password, setPassword] = useState('');
  const { busy, error, submit } = useSubmit(async () => {
    await post(`/users/${encodeURIComponent(user.id)}/password`, { password });
    toast(`Password of ${user.email} set; their sessions ended.`);
    onClose();
  });
  return (
    <FormModal
      title={`Set the password of ${user.email}`}
      id="user-password"
      action="Set password"
      busy={busy}
      onClose={onClose}
    >
      <form id="user-password" class="form" onSubmit={submit} noValidate>
        <input type="text" autocomplete="username" value={user.email} readOnly hidden />
        <ErrorNote error={formError(error, ['password'])} />
        <PasswordField
          label="New password"
          autocomplete="new-password"
          value={password}
          onValue={setPassword}
          error={fieldError(error, 'password')}
          hint="Every session of this user ends; a lockout of the address is lifted."
        />
      </form>
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
    await patch(`/users/${encodeURIComponent(user.id)}`, { email });
    toast(`E-mail changed to ${email.trim().toLowerCase()}.`);
    onDone();
  });
  return (
    <FormModal title={`Change the e-mail of ${user.email}`} id="user-email" action="Save" busy={busy} onClose={onClose}>
      <form id="user-email" class="form" onSubmit={submit} noValidate>
        <ErrorNote error={formError(error, ['email'])} />
        <Field
          label="New e-mail"
          error={fieldError(error, 'email')}
          hint="The new address is not verified until you mark it so or the user follows a verification mail."
        >
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              type="email"
              autocomplete="off"
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          )}
        </Field>
      </form>
    </FormModal>
  );
}
