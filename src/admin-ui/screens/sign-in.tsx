/** Sign-in (and the same form again when a session is lost mid-work). */
import { useState } from 'preact/hooks';
import { ApiError, body, post, setSession, type Session } from '../api';
import { AuthCard, Button, ErrorNote, fieldError, PasswordField, TextField, useSubmit } from '../components/ui';
import { Toasts } from '../components/toast';
import { signal } from '@preact/signals';

/** From `GET /auth/state`: no administrator exists yet. */
export const setupRequired = signal(false);

export function SignInForm({ email: initial = '' }: { email?: string }) {
  const [email, setEmail] = useState(initial);
  const [password, setPassword] = useState('');
  const { busy, error, submit } = useSubmit(async () => {
    try {
      setSession(await post<Session>('/auth/login', body('login', { email, password })));
    } catch (err) {
      setPassword('');
      throw err;
    }
  });
  const invalid = error instanceof ApiError && error.code === 'invalid_credentials';
  return (
    <form class="form" onSubmit={submit} noValidate>
      {error && !invalid && <ErrorNote error={error} />}
      <TextField
        label="Email"
        type="email"
        autocomplete="username"
        required
        autoFocus={!initial}
        value={email}
        onValue={setEmail}
        error={fieldError(error, 'email')}
      />
      <PasswordField
        label="Password"
        autocomplete="current-password"
        value={password}
        onValue={setPassword}
        error={invalid ? 'Wrong e-mail or password. Check both and try again.' : fieldError(error, 'password')}
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
      <AuthCard title="Basalt" subtitle="Administration">
        {setupRequired.value && (
          <div class="notice">
            No administrator exists yet. Open the one-time setup link that <code>basalt serve</code> printed, or run{' '}
            <code>basalt admin create --email … --password …</code>.
          </div>
        )}
        <SignInForm />
      </AuthCard>
      <Toasts />
    </div>
  );
}
