/**
 * A user's ways to sign in, on the user page (docs/admin-api.md §Users, sign-in methods):
 * password set or not, linked providers (unlink), TOTP (reset). Each change is audited by
 * the server, which also refuses to take away the last way to sign in. And the Settings
 * screen's provider check.
 */
import { useState } from 'preact/hooks';
import { del, get, post, type AdminData } from '../api';
import { Badge, Button, Empty, ErrorNote, Loading, confirm, useActions, useAsync, ListTable } from '../components/ui';
import { ago, dateTime } from '../format';

type Methods = AdminData<'signInMethods'>;
type Identity = Methods['identities'][number];

export function UserSignInMethods({ id, email }: { id: string; email: string }) {
  const path = `/users/${encodeURIComponent(id)}`;
  const { data, error, loading, reload } = useAsync(() => get<Methods>(`${path}/sign-in-methods`), [id]);
  const { busy, run } = useActions(reload);
  const resetMfa = async () => {
    const ok = await confirm({
      title: `Turn off ${email}'s second factor?`,
      body: (
        <p>
          Their authenticator codes and recovery codes stop working; they sign in without a code and may enroll again.
        </p>
      ),
      action: 'Reset MFA',
      danger: true,
    });
    if (ok) await run('mfa', () => post(`${path}/reset-mfa`), 'Second factor turned off.');
  };
  const unlink = async (i: Identity) => {
    const ok = await confirm({
      title: `Unlink ${i.provider}?`,
      body: (
        <p>
          {email} can no longer sign in with this {i.provider} account.
        </p>
      ),
      action: 'Unlink',
      danger: true,
    });
    if (ok) await run(i.id, () => del(`${path}/identities/${encodeURIComponent(i.id)}`), `${i.provider} unlinked.`);
  };
  return (
    <section class="panel">
      <div class="panel-head">
        <h2>Sign-in methods</h2>
        {data?.totp_enabled && (
          <Button variant="danger" busy={busy === 'mfa'} onClick={resetMfa}>
            Reset MFA
          </Button>
        )}
      </div>
      <ErrorNote error={error} onRetry={reload} />
      {loading && !data && <Loading />}
      {data && (
        <>
          <div class="panel-body">
            <dl class="kv">
              <dt>Password</dt>
              <dd>{data.has_password ? 'set' : 'none (provider or e-mail code only)'}</dd>
              <dt>Second factor</dt>
              <dd>
                {data.totp_enabled ? (
                  <Badge tone="ok">TOTP on · {data.recovery_codes_left} recovery codes left</Badge>
                ) : (
                  'off'
                )}
              </dd>
            </dl>
          </div>
          {data.identities.length ? (
            <ListTable free>
              <thead>
                <tr>
                  <th>Provider</th>
                  <th>Provider e-mail</th>
                  <th>Linked</th>
                  <th>Last used</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {data.identities.map((i) => (
                  <tr key={i.id}>
                    <td>{i.provider}</td>
                    <td>
                      {i.email ?? '—'} {i.email && !i.email_verified && <Badge>unverified</Badge>}
                    </td>
                    <td>{dateTime(i.created_at)}</td>
                    <td>{ago(i.last_used_at)}</td>
                    <td>
                      <Button variant="ghost" busy={busy === i.id} onClick={() => unlink(i)}>
                        Unlink
                      </Button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </ListTable>
          ) : (
            <Empty icon="lock" title="No linked providers" />
          )}
        </>
      )}
    </section>
  );
}

type Check = AdminData<'providerCheck'>;

const STEP: Record<string, string> = {
  discovery: 'Discovery',
  jwks: 'Signing keys',
  authorization_url: 'Authorization URL',
  token_endpoint: 'Client credentials',
};

/**
 * Settings screen: the configured sign-in providers, each with a check of every step that
 * needs no person at the provider (discovery, signing keys, the authorization URL, the
 * client id and secret at the token endpoint).
 */
export function SignInProviders() {
  const { data, error, reload } = useAsync(() => get<AdminData<'providers'>>('/sign-in-providers'), []);
  const [results, setResults] = useState<Record<string, Check | string>>({});
  const check = async (name: string) => {
    try {
      const r = await post<Check>(`/sign-in-providers/${encodeURIComponent(name)}/check`);
      setResults((x) => ({ ...x, [name]: r }));
    } catch (e) {
      setResults((x) => ({ ...x, [name]: (e as Error).message }));
    }
  };
  if (error) return <ErrorNote error={error} onRetry={reload} />;
  if (!data?.providers.length) return null;
  return (
    <section class="panel">
      <div class="panel-head">
        <h2>Sign-in providers</h2>
      </div>
      <div class="panel-body">
        <dl class="kv">
          {data.providers.map((name) => {
            const r = results[name];
            return (
              <>
                <dt>{name}</dt>
                <dd>
                  <Button onClick={() => check(name)}>Test sign-in</Button>{' '}
                  {typeof r === 'string' ? (
                    <Badge tone="danger">{r}</Badge>
                  ) : r ? (
                    <>
                      {r.ok ? <Badge tone="ok">passed</Badge> : <Badge tone="danger">{r.problem}</Badge>}
                      <ul class="checks">
                        {r.checks.map((c) => (
                          <li key={c.step}>
                            <Badge tone={c.ok ? 'ok' : c.ok === false ? 'danger' : 'warn'}>
                              {STEP[c.step] ?? c.step}
                            </Badge>{' '}
                            {c.detail}
                          </li>
                        ))}
                      </ul>
                    </>
                  ) : null}
                </dd>
              </>
            );
          })}
        </dl>
      </div>
    </section>
  );
}
