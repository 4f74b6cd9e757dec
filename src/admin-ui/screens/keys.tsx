/**
 * API keys: list, create (type, service, permissions as checkboxes, tables from the live
 * catalog), the secret shown once with a copy button, revoke.
 */
import { useState } from 'preact/hooks';
import { body, get, post, type AdminBody, type AdminData } from '../api';
import {
  Badge,
  Button,
  Empty,
  ErrorNote,
  FormModal,
  Loading,
  Modal,
  PageHeader,
  TextField,
  confirm,
  fieldError,
  formError,
  useAsync,
  useSubmit,
  ListTable,
} from '../components/ui';
import { toast } from '../components/toast';
import { ago, dateTime } from '../format';
import { titleOf } from '../screen-list';

export type Key = AdminData<'key'>['key'];

const status = (k: Key) => k.status;

const PERMISSIONS = ['mail:send', 'mail:*', 'db:query', 'db:*', 'files:upload', 'files:download', 'files:*'];

export function Keys() {
  const { data, error, loading, reload } = useAsync(() => get<AdminData<'keys'>>('/keys'), []);
  const [creating, setCreating] = useState(false);
  const [secret, setSecret] = useState<{ key: Key; secret: string } | null>(null);
  const [showRevoked, setShowRevoked] = useState(false);
  const revoke = async (k: Key) => {
    const ok = await confirm({
      title: 'Revoke this key?',
      body: (
        <p>
          Clients using <code>{k.display}</code>
          {k.service ? ` (${k.service})` : ''} stop working at once, on every instance. Open Database API transactions
          of this key roll back. This cannot be undone.
        </p>
      ),
      action: 'Revoke',
      danger: true,
    });
    if (!ok) return;
    try {
      await post(`/keys/${encodeURIComponent(k.id)}/revoke`);
      toast(`Key ${k.display} revoked.`);
      reload();
    } catch (e) {
      toast(`Could not revoke ${k.display}: ${(e as Error).message}`, 'error');
    }
  };
  const keys = (data?.keys ?? []).filter((k) => showRevoked || status(k) === 'active');
  const revokedCount = (data?.keys ?? []).filter((k) => status(k) !== 'active').length;
  return (
    <>
      <PageHeader
        title={titleOf('keys')}
        subtitle="Public keys (pk_…) identify a front-end; service keys (sk_…) carry permissions. A secret is shown once, then stored only as a hash."
        actions={
          <Button variant="primary" icon="plus" onClick={() => setCreating(true)}>
            New key
          </Button>
        }
      />
      <section class="panel">
        <div class="panel-head">
          <h2>
            {keys.length} key{keys.length === 1 ? '' : 's'}
          </h2>
          {revokedCount > 0 && (
            <label class="check">
              <input type="checkbox" checked={showRevoked} onChange={(e) => setShowRevoked(e.currentTarget.checked)} />{' '}
              Show {revokedCount} revoked or expired
            </label>
          )}
        </div>
        <ErrorNote error={error} onRetry={reload} />
        {loading && !data && <Loading />}
        {data && !keys.length && (
          <Empty icon="key" title="No API keys yet">
            <p>Create a service key for a back-end, or a public key for a web or mobile front-end.</p>
            <Button variant="primary" icon="plus" onClick={() => setCreating(true)}>
              New key
            </Button>
          </Empty>
        )}
        {keys.length > 0 && (
          <ListTable>
            <thead>
              <tr>
                <th>Key</th>
                <th>Type</th>
                <th>Service</th>
                <th>Permissions</th>
                <th>Tables</th>
                <th>Last used</th>
                <th>Expires</th>
                <th>
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {keys.map((k) => (
                <tr key={k.id}>
                  <td>
                    <span class="mono nowrap">{k.display}</span>
                    {k.name && <div class="muted">{k.name}</div>}
                  </td>
                  <td>
                    <div class="badges">
                      <Badge tone={k.type === 'service' ? 'accent' : 'info'}>{k.type}</Badge>
                      {k.site && <Badge>site</Badge>}
                      {status(k) !== 'active' && <Badge tone="danger">{status(k)}</Badge>}
                    </div>
                  </td>
                  <td>{k.service ?? '—'}</td>
                  <td>
                    <div class="badges">
                      {k.permissions.length ? (
                        k.permissions.map((p) => <Badge key={p}>{p}</Badge>)
                      ) : (
                        <span class="muted">none</span>
                      )}
                    </div>
                  </td>
                  <td>{k.tables.length ? k.tables.join(', ') : <span class="muted">—</span>}</td>
                  <td title={dateTime(k.last_used_at)}>{ago(k.last_used_at)}</td>
                  <td>{k.expires_at ? dateTime(k.expires_at) : <span class="muted">never</span>}</td>
                  <td class="actions">
                    {status(k) === 'active' && (
                      <Button
                        class="btn-sm"
                        variant="ghost"
                        aria-label={`Revoke ${k.display}`}
                        onClick={() => revoke(k)}
                      >
                        Revoke
                      </Button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </ListTable>
        )}
      </section>
      {creating && (
        <CreateKey
          onClose={() => setCreating(false)}
          onCreated={(r) => {
            setCreating(false);
            setSecret(r);
            reload();
          }}
        />
      )}
      {secret && <SecretOnce created={secret} onClose={() => setSecret(null)} />}
    </>
  );
}

function CreateKey({
  onClose,
  onCreated,
}: {
  onClose: () => void;
  onCreated: (r: { key: Key; secret: string }) => void;
}) {
  const [type, setType] = useState<'service' | 'public'>('service');
  const [name, setName] = useState('');
  const [service, setService] = useState('');
  const [perms, setPerms] = useState<string[]>([]);
  const [tables, setTables] = useState<string[]>([]);
  const [expires, setExpires] = useState('');
  const [site, setSite] = useState(false);
  const needsTables = perms.includes('db:query') || perms.includes('db:*');
  const catalog = useAsync(
    () => (needsTables ? get<AdminData<'tables'>>('/data/tables') : Promise.resolve(undefined)),
    [needsTables],
  );
  const toggle = (list: string[], v: string) => (list.includes(v) ? list.filter((x) => x !== v) : [...list, v]);
  const { busy, error, submit } = useSubmit(async () => {
    const common: AdminBody<'createKey'> = {
      name: name || undefined,
      expires_at: expires ? new Date(expires).toISOString() : undefined,
    };
    const sent = body(
      'createKey',
      type === 'service'
        ? { ...common, type, service, permissions: perms, tables: needsTables ? tables : [] }
        : { ...common, type, site },
    );
    onCreated(await post<AdminData<'createdKey'>>('/keys', sent));
    toast('Key created. Copy its secret now: it is shown only once.');
  });
  const fields = ['type', 'name', 'service', 'permissions', 'tables', 'expires_at', 'site'];
  return (
    <FormModal
      title="New API key"
      action="Create key"
      busy={busy}
      onSubmit={submit}
      error={formError(error, fields)}
      onClose={onClose}
      wide
    >
      <fieldset>
        <legend>Type</legend>
        <div class="checks">
          <label class="check">
            <input type="radio" name="type" checked={type === 'service'} onChange={() => setType('service')} /> Service
            key (sk_…): a back-end with permissions
          </label>
          <label class="check">
            <input type="radio" name="type" checked={type === 'public'} onChange={() => setType('public')} /> Public key
            (pk_…): a front-end, no permissions
          </label>
        </div>
        {fieldError(error, 'type') && <p class="field-error">{fieldError(error, 'type')}</p>}
      </fieldset>
      {type === 'service' ? (
        <>
          <TextField
            label="Service"
            value={service}
            onValue={setService}
            error={fieldError(error, 'service')}
            hint="A name for the back-end using this key, e.g. billing."
            required
            autoFocus
          />
          <fieldset>
            <legend>Permissions</legend>
            <div class="checks">
              {PERMISSIONS.map((p) => (
                <label class="check" key={p}>
                  <input type="checkbox" checked={perms.includes(p)} onChange={() => setPerms(toggle(perms, p))} /> {p}
                </label>
              ))}
            </div>
            {fieldError(error, 'permissions') && <p class="field-error">{fieldError(error, 'permissions')}</p>}
          </fieldset>
          {needsTables && (
            <fieldset>
              <legend>Tables this key may touch</legend>
              {catalog.loading && <Loading label="Reading the catalog…" />}
              <ErrorNote error={catalog.error} onRetry={catalog.reload} />
              {catalog.data && !catalog.data.tables.length && (
                <p class="muted">The data schema has no tables yet. Add a migration, then come back.</p>
              )}
              <div class="checks">
                {catalog.data?.tables.map((t) => (
                  <label class="check" key={t.name}>
                    <input
                      type="checkbox"
                      checked={tables.includes(t.name)}
                      onChange={() => setTables(toggle(tables, t.name))}
                    />{' '}
                    {t.name}
                  </label>
                ))}
              </div>
              {fieldError(error, 'tables') && <p class="field-error">{fieldError(error, 'tables')}</p>}
            </fieldset>
          )}
        </>
      ) : (
        <label class="check">
          <input type="checkbox" checked={site} onChange={(e) => setSite(e.currentTarget.checked)} /> Site key:
          published in the runtime config when access mode is api_key_required
        </label>
      )}
      <TextField
        label="Name"
        value={name}
        onValue={setName}
        error={fieldError(error, 'name')}
        hint="Optional: what this key is for, shown in the list."
      />
      <TextField
        label="Expires"
        type="datetime-local"
        value={expires}
        onValue={setExpires}
        error={fieldError(error, 'expires_at')}
        hint="Leave empty for a key that does not expire."
      />
    </FormModal>
  );
}

function SecretOnce({ created, onClose }: { created: { key: Key; secret: string }; onClose: () => void }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(created.secret);
      setCopied(true);
      toast('Secret copied to the clipboard.');
    } catch {
      const el = document.getElementById('secret-value');
      if (el) getSelection()?.selectAllChildren(el);
      toast('The browser refused the clipboard: the secret is selected, press Ctrl+C.', 'error');
    }
  };
  return (
    <Modal
      title="Copy the secret now"
      // Wide enough for the secret on one line at desktop width.
      wide
      onClose={onClose}
      footer={
        <Button variant="primary" onClick={onClose}>
          Done
        </Button>
      }
    >
      <p>
        This is the only time the secret of <strong>{created.key.display}</strong> is shown. Basalt keeps only its hash.
      </p>
      <div class="secret">
        <code id="secret-value" data-testid="secret">
          {created.secret}
        </code>
        <Button icon={copied ? 'check' : 'copy'} onClick={copy}>
          {copied ? 'Copied' : 'Copy'}
        </Button>
      </div>
      <p class="field-hint" style={{ marginTop: '10px' }}>
        Clients send it in the <code>X-API-Key</code> header.
      </p>
    </Modal>
  );
}
