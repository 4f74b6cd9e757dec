/**
 * The administration panel (docs/admin.md): boot (who is signed in), then the screen the
 * hash names. Bundled by src/modules/panel/bundle.ts and served at `/_/`.
 */
import { render } from 'preact';
import { useEffect } from 'preact/hooks';
import './theme';
import { ApiError, get, session, setSession, type AdminData, type Session } from './api';
import { route } from './router';
import { Shell } from './components/shell';
import { Loading } from './components/ui';
import { SignIn, setupRequired } from './screens/sign-in';
import { Setup } from './screens/setup';
import { Dashboard } from './screens/dashboard';
import { Keys } from './screens/keys';
import { Settings } from './screens/settings';
import { Templates } from './screens/templates';
import { MailJobs } from './screens/mail-jobs';
import { Users } from './screens/users';
import { Data } from './screens/data';
import { Extensions } from './screens/extensions';
import { Jobs } from './screens/jobs';
import { Audit } from './screens/audit';
import { Logs } from './screens/logs';
import { Backups } from './screens/backups';
import { Empty } from './components/ui';
import { screenAt, type ScreenId } from './screen-list';

/** Each screen of the list (screen-list.ts) and the component that draws it. */
const VIEWS: Record<ScreenId, () => preact.JSX.Element> = {
  dashboard: Dashboard,
  keys: Keys,
  settings: Settings,
  templates: Templates,
  'mail-jobs': MailJobs,
  users: Users,
  data: Data,
  extensions: Extensions,
  jobs: Jobs,
  audit: Audit,
  logs: Logs,
  backups: Backups,
};

let booted = false;

/** Who is signed in: asked once, when a screen other than setup first needs it. */
async function boot() {
  if (booted) return;
  booted = true;
  try {
    // The open state first: signed out, there is no /auth/me to ask (its 401 would be logged by the browser).
    const state = await get<AdminData<'authState'>>('/auth/state');
    setupRequired.value = state.setup_required;
    setSession(state.signed_in ? await get<Session>('/auth/me') : null);
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 401) console.warn('could not ask who is signed in', e);
    setSession(null);
  }
}

function NotFound() {
  return (
    <Empty icon="alert" title="No such screen">
      <a href="#/">Back to the dashboard</a>
    </Empty>
  );
}

function App() {
  const r = route.value;
  const first = r.parts[0] ?? '';
  const screen = screenAt(first);
  useEffect(() => {
    document.title = `${screen?.title ?? 'Basalt'} · Basalt administration`;
  }, [screen]);
  if (first === 'setup' && !session.value) return <Setup />;
  if (session.value === undefined) {
    void boot();
    return <Loading label="Starting…" />;
  }
  if (session.value === null) return <SignIn />;
  const Screen = screen ? VIEWS[screen.id] : NotFound;
  return (
    <Shell>
      <Screen key={first} />
    </Shell>
  );
}

render(<App />, document.getElementById('app')!);
