/** `#/setup?token=…`: the one-time link `serve` prints while no administrator exists. */
import { useState } from 'preact/hooks';
import { ApiError, body, post, setSession, type Session } from '../api';
import {
  AuthCard,
  Button,
  differs,
  ErrorNote,
  fieldError,
  formError,
  NewPasswordFields,
  TextField,
  useSubmit,
} from '../components/ui';
import { navigate, route } from '../router';
import { toast } from '../components/toast';

export function Setup() {
  const token = route.value.query.get('token') ?? '';
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [repeat, setRepeat] = useState('');
  const mismatch = differs(password, repeat);
  const { busy, error, submit } = useSubmit(async () => {
    if (mismatch) return;
    const s = await post<Session>('/auth/setup', body('setup', { token, email, password }));
    setSession(s);
    navigate('/', undefined, true); // the token leaves the address bar and history entry
    toast(`Administrator ${s.admin.email} created. Welcome.`);
  });
  const gone = error instanceof ApiError && error.code === 'setup_link_invalid';
  return (
    <div class="auth-page">
      <AuthCard title="Create the first administrator" subtitle="This link works once and for 30 minutes.">
        {!token && (
          <div class="notice">
            This setup link has no token. Copy the whole link that <code>basalt serve</code> printed.
          </div>
        )}
        {gone ? (
          <div class="notice notice-danger" role="alert">
            This setup link was already used or has expired. Restart <code>basalt serve</code> for a new one (while no
            administrator exists), or run <code>basalt admin create</code>.
            <p>
              <a href="#/">Go to sign-in</a>
            </p>
          </div>
        ) : (
          <form class="form" onSubmit={submit} noValidate>
            <ErrorNote error={formError(error, ['email', 'password'])} />
            <TextField
              label="Email"
              type="email"
              autocomplete="username"
              required
              autoFocus
              value={email}
              onValue={setEmail}
              error={fieldError(error, 'email')}
            />
            <NewPasswordFields
              label="Password"
              value={password}
              onValue={setPassword}
              repeat={repeat}
              onRepeat={setRepeat}
              error={fieldError(error, 'password')}
            />
            <Button type="submit" variant="primary" busy={busy} disabled={!token || mismatch} class="btn-block">
              Create administrator
            </Button>
          </form>
        )}
      </AuthCard>
    </div>
  );
}
