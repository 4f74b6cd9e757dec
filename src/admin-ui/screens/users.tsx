/**
 * Users (site accounts): search by e-mail, create; detail with sessions; set a password,
 * change the e-mail, mark verified, disable/enable, end sessions, unlock, resend
 * verification (or what it needs), delete.
 */
import { useState } from 'preact/hooks';
import { del, get, post, query, type AdminData } from '../api';
import {
  Badge,
  Button,
  Empty,
  ErrorNote,
  Field,
  Loading,
  PageHeader,
  confirm,
  useActions,
  useAsync,
  ListTable,
} from '../components/ui';
import { Icon } from '../components/icons';
import { toast } from '../components/toast';
import { ago, dateTime, number } from '../format';
import { navigate, route } from '../router';
import { UserSignInMethods } from './user-sign-in';
import { EditEmail, NewUser, SetPassword } from './user-forms';
import { titleOf } from '../screen-list';

type User = AdminData<'user'>['user'];

const PAGE = 50;

function Status({ u }: { u: User }) {
  const locked = u.locked_until && new Date(u.locked_until) > new Date();
  return (
    <div class="badges">
      {u.disabled_at ? <Badge tone="danger">disabled</Badge> : <Badge tone="ok">active</Badge>}
      {u.email_verified_at ? <Badge tone="info">verified</Badge> : <Badge>unverified</Badge>}
      {locked && <Badge tone="warn">locked</Badge>}
    </div>
  );
}

export function Users() {
  const id = route.value.parts[1];
  return id ? <UserDetail key={id} id={id} /> : <UserList />;
}

function UserList() {
  const [search, setSearch] = useState(route.value.query.get('search') ?? '');
  const [applied, setApplied] = useState(search);
  const [offset, setOffset] = useState(0);
  const { data, error, loading, reload } = useAsync(
    () => get<AdminData<'users'>>('/users' + query({ search: applied, limit: PAGE, offset })),
    [applied, offset],
  );
  const [creating, setCreating] = useState(false);
  const submit = (e: Event) => {
    e.preventDefault();
    setOffset(0);
    setApplied(search);
  };
  return (
    <>
      <PageHeader
        title={titleOf('users')}
        subtitle="Accounts of the public Auth API (not administrators)."
        actions={
          <Button variant="primary" icon="plus" onClick={() => setCreating(true)}>
            New user
          </Button>
        }
      />
      {creating && <NewUser onClose={() => setCreating(false)} />}
      <section class="panel">
        <form class="toolbar" onSubmit={submit}>
          <Field label="Search by e-mail">
            {(id) => (
              <input
                id={id}
                type="search"
                value={search}
                onInput={(e) => setSearch(e.currentTarget.value)}
                placeholder="name@example.com"
              />
            )}
          </Field>
          <Button type="submit" variant="primary" icon="search">
            Search
          </Button>
        </form>
        <ErrorNote error={error} onRetry={reload} />
        {loading && !data && <Loading />}
        {data && !data.users.length && (
          <Empty icon="users" title={applied ? `No user matches “${applied}”` : 'No users yet'}>
            {!applied && 'Users appear here once they register through the Auth API, or when you create one.'}
          </Empty>
        )}
        {!!data?.users.length && (
          <ListTable>
            <thead>
              <tr>
                <th>Email</th>
                <th>Status</th>
                <th>Created</th>
                <th>Last sign-in</th>
              </tr>
            </thead>
            <tbody>
              {data.users.map((u) => (
                <tr key={u.id} class="row-link" onClick={() => navigate(`/users/${u.id}`)}>
                  <td>
                    <a href={`#/users/${encodeURIComponent(u.id)}`} onClick={(e) => e.stopPropagation()}>
                      {u.email}
                    </a>
                  </td>
                  <td>
                    <Status u={u} />
                  </td>
                  <td>{dateTime(u.created_at)}</td>
                  <td title={dateTime(u.last_login_at)}>{ago(u.last_login_at)}</td>
                </tr>
              ))}
            </tbody>
          </ListTable>
        )}
        {data && (
          <div class="pager">
            <span class="pager-info">
              {data.total ? `${number(offset + 1)}–${number(offset + data.users.length)} of ${number(data.total)}` : ''}
            </span>
            <div class="page-actions">
              <Button icon="chevronLeft" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>
                Previous
              </Button>
              <Button disabled={offset + PAGE >= data.total} onClick={() => setOffset(offset + PAGE)}>
                Next
              </Button>
            </div>
          </div>
        )}
      </section>
    </>
  );
}

function UserDetail({ id }: { id: string }) {
  const { data, error, loading, reload } = useAsync(
    () => get<AdminData<'userDetail'>>(`/users/${encodeURIComponent(id)}`),
    [id],
  );
  const { busy, run } = useActions(reload);
  const [form, setForm] = useState<'password' | 'email' | null>(null);
  const act = async (action: string, done: string, ask?: { title: string; body: string; action: string }) => {
    if (ask && !(await confirm({ ...ask, body: <p>{ask.body}</p>, danger: true }))) return;
    await run(action, () => post(`/users/${encodeURIComponent(id)}/${action}`), done);
  };
  const remove = async () => {
    if (
      !data ||
      !(await confirm({
        title: `Delete ${data.user.email}?`,
        body: <p>The account and its sessions are removed for good. This cannot be undone.</p>,
        action: 'Delete user',
        danger: true,
      }))
    )
      return;
    try {
      await del(`/users/${encodeURIComponent(id)}`);
      toast(`${data.user.email} deleted.`);
      navigate('/users');
    } catch (e) {
      toast((e as Error).message, 'error');
    }
  };
  const u = data?.user;
  const locked = u?.locked_until && new Date(u.locked_until) > new Date();
  // Addresses locked out of this account on their own (wrong passwords from there); the owner elsewhere is not.
  const lockedOut = (data?.lock?.sources ?? []).filter((s) => s.locked_until && new Date(s.locked_until) > new Date());
  return (
    <>
      <a class="back" href="#/users">
        <Icon name="chevronLeft" size={14} /> Users
      </a>
      <ErrorNote error={error} onRetry={reload} />
      {loading && !data && <Loading />}
      {u && data && (
        <>
          <PageHeader
            title={u.email}
            subtitle={<Status u={u} />}
            actions={
              <>
                {u.disabled_at ? (
                  <Button
                    variant="primary"
                    busy={busy === 'enable'}
                    onClick={() => act('enable', `${u.email} can sign in again.`)}
                  >
                    Enable
                  </Button>
                ) : (
                  <Button
                    variant="danger"
                    busy={busy === 'disable'}
                    onClick={() =>
                      act('disable', `${u.email} is disabled; their sessions ended.`, {
                        title: `Disable ${u.email}?`,
                        body: 'They are signed out everywhere at once and cannot sign in until enabled again.',
                        action: 'Disable',
                      })
                    }
                  >
                    Disable
                  </Button>
                )}
                <Button
                  busy={busy === 'end-sessions'}
                  disabled={!data.sessions.length}
                  onClick={() => act('end-sessions', 'All sessions ended.')}
                >
                  End sessions
                </Button>
                {locked && (
                  <Button busy={busy === 'unlock'} icon="lock" onClick={() => act('unlock', 'Account unlocked.')}>
                    Unlock
                  </Button>
                )}
                <Button icon="lock" onClick={() => setForm('password')}>
                  Set password
                </Button>
                <Button icon="edit" onClick={() => setForm('email')}>
                  Edit e-mail
                </Button>
                {!u.email_verified_at && (
                  <Button
                    busy={busy === 'verify'}
                    icon="check"
                    onClick={() => act('verify', `${u.email} is marked verified.`)}
                  >
                    Mark verified
                  </Button>
                )}
                {!u.email_verified_at && (
                  <Button
                    busy={busy === 'resend-verification'}
                    icon="mail"
                    disabled={!!data.verification_mail}
                    title={data.verification_mail ?? undefined}
                    onClick={() => act('resend-verification', 'Verification e-mail queued.')}
                  >
                    Resend verification
                  </Button>
                )}
                <Button variant="ghost" icon="trash" onClick={remove}>
                  Delete
                </Button>
              </>
            }
          />
          {!u.email_verified_at && data.verification_mail && (
            <div class="notice" role="note" data-testid="verification-note">
              Resend verification: {data.verification_mail}{' '}
              <a
                href={
                  data.verification_mail.startsWith('Mail')
                    ? '#/settings?group=mail'
                    : '#/settings?find=web.public_base_url'
                }
              >
                Open Settings
              </a>
            </div>
          )}
          {form === 'password' && <SetPassword user={u} onClose={() => setForm(null)} />}
          {form === 'email' && (
            <EditEmail
              user={u}
              onClose={() => setForm(null)}
              onDone={() => {
                setForm(null);
                reload();
              }}
            />
          )}
          <div class="cols">
            <section class="panel">
              <div class="panel-head">
                <h2>Account</h2>
              </div>
              <div class="panel-body">
                <dl class="kv">
                  <dt>User id</dt>
                  <dd class="mono">{u.id}</dd>
                  <dt>Created</dt>
                  <dd>{dateTime(u.created_at)}</dd>
                  <dt>E-mail verified</dt>
                  <dd>{u.email_verified_at ? dateTime(u.email_verified_at) : 'not yet'}</dd>
                  <dt>Last sign-in</dt>
                  <dd>{dateTime(u.last_login_at)}</dd>
                  <dt>Disabled</dt>
                  <dd>{u.disabled_at ? dateTime(u.disabled_at) : 'no'}</dd>
                  <dt>Locked until</dt>
                  <dd>
                    {locked ? dateTime(u.locked_until) : 'not locked'}
                    {lockedOut.length > 0 && (
                      <>
                        {' '}
                        <Badge tone="warn" title={lockedOut.map((s) => s.ip).join(', ')}>
                          {lockedOut.length} address{lockedOut.length === 1 ? '' : 'es'} locked out
                        </Badge>
                      </>
                    )}
                  </dd>
                </dl>
              </div>
            </section>
            <section class="panel">
              <div class="panel-head">
                <h2>Sessions</h2>
                <span class="muted">{data.sessions.length}</span>
              </div>
              {data.sessions.length ? (
                <ListTable free>
                  <thead>
                    <tr>
                      <th>Started</th>
                      <th>Last used</th>
                      <th>Expires</th>
                      <th>IP</th>
                      <th>Client</th>
                    </tr>
                  </thead>
                  <tbody>
                    {data.sessions.map((s) => (
                      <tr key={s.id}>
                        <td>{dateTime(s.created_at)}</td>
                        <td>{ago(s.last_used_at)}</td>
                        <td>{dateTime(s.expires_at)}</td>
                        <td>{s.ip ?? '—'}</td>
                        <td class="cell" style={{ fontFamily: 'inherit' }} title={s.user_agent ?? ''}>
                          {s.user_agent ?? '—'}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </ListTable>
              ) : (
                <Empty icon="lock" title="No open sessions" />
              )}
            </section>
          </div>
          <UserSignInMethods id={u.id} email={u.email} />
        </>
      )}
    </>
  );
}
