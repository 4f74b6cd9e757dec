/** Sign-in (and the same form again when a session is lost mid-work). */
import { useState } from 'preact/hooks';
import { ApiError, post, setSession, type Session } from '../api';
import { Button, ErrorNote, Field, PasswordField } from '../components/ui';
import { Logo } from '../components/icons';
import { Toasts } from '../components/toast';
import { signal } from '@preact/signals';

/** From `GET /auth/state`: no administrator exists yet. */
export const setupRequired = signal(false);

export function SignInForm({ email: initial = '' }: { email?: string }) {
  const [email, setEmail] = useState(initial);
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      setSession(await post<Session>('/auth/login', { email, password }));
    } catch (err) {
      setError(err);
      setPassword('');
    } finally {
      setBusy(false);
    }
  };
  const invalid = error instanceof ApiError && error.code === 'invalid_credentials';
  return (
    <form class="form" onSubmit={submit} noValidate>
      {error && !invalid && <ErrorNote error={error} />}
      <Field label="Email" error={error instanceof ApiError ? error.fields.email : undefined}>
        {(id, d) => (
          <input
            id={id}
            aria-describedby={d}
            type="email"
            autocomplete="username"
            required
            value={email}
            onInput={(e) => setEmail(e.currentTarget.value)}
            autoFocus={!initial}
          />
        )}
      </Field>
      <PasswordField
        label="Password"
        autocomplete="current-password"
        value={password}
        onValue={setPassword}
        error={
          invalid
            ? 'Wrong e-mail or password. Check both and try again.'
            : error instanceof ApiError
              ? error.fields.password
              : undefined
        }
        autoFocus={!!initial}
      />
      <Button type="submit" variant="primary" busy={busy} class="btn-block">
        Sign in
      </Button>
    </form>
  );
}

export function SignIn() {
  return (
    <div class="auth-page">
      <div class="card signin-card">
        <div class="auth-brand">
          <Logo size={36} />
          <div>
            <h1>Basalt</h1>
            <p class="muted">Administration</p>
          </div>
        </div>
        {setupRequired.value && (
          <div class="notice">
            No administrator exists yet. Open the one-time setup link that <code>basalt serve</code> printed, or run{' '}
            <code>basalt admin create --email … --password …</code>.
          </div>
        )}
        <SignInForm />
      </div>
      <Toasts />
    </div>
  );
}
