/**
 * Settings: every setting grouped, with its value, source, live or restart-needed;
 * pinned ones (environment, config file) read-only naming where; validation errors
 * next to the field; the SMTP test send with the server's answer.
 */
import { SignInProviders } from './user-sign-in';
import { useMemo, useState } from 'preact/hooks';
import { ApiError, body, del, get, post, put, type AdminData } from '../api';
import { Badge, Button, Empty, ErrorNote, Field, Loading, PageHeader, TextField, useAsync } from '../components/ui';
import { toast } from '../components/toast';
import { navigate, route } from '../router';
import { titleOf } from '../screen-list';

export type Setting = AdminData<'setting'>['setting'];

const SOURCE: Record<Setting['source'], { label: string; tone: 'neutral' | 'accent' | 'info' | 'warn' }> = {
  default: { label: 'default', tone: 'neutral' },
  database: { label: 'set here', tone: 'accent' },
  file: { label: 'config file', tone: 'info' },
  environment: { label: 'environment', tone: 'warn' },
};

export function Settings() {
  const { data, error, loading, reload } = useAsync(() => get<AdminData<'settings'>>('/settings'), []);
  const group = route.value.query.get('group') ?? '';
  // `?find=…` opens the screen on one setting (e.g. from a note elsewhere that says what to set).
  const [search, setSearch] = useState(route.value.query.get('find') ?? '');
  const groups = useMemo(() => [...new Set((data?.settings ?? []).map((s) => s.group))], [data]);
  const shown = (data?.settings ?? []).filter(
    (s) =>
      (!group || s.group === group) &&
      (!search || (s.key + ' ' + s.description).toLowerCase().includes(search.toLowerCase())),
  );
  const byGroup = groups.map((g) => ({ g, items: shown.filter((s) => s.group === g) })).filter((x) => x.items.length);
  return (
    <>
      <PageHeader
        title={titleOf('settings')}
        subtitle="Precedence: environment > config file > set here > default. Settings pinned by the environment or the config file are read-only here."
      />
      <div class="row" style={{ marginBottom: '12px' }}>
        <TextField
          label="Find a setting"
          type="search"
          value={search}
          onValue={setSearch}
          placeholder="cors, smtp, rate…"
        />
      </div>
      {/* biome-ignore lint/a11y/useSemanticElements: filter chips, not fields; a <fieldset> brings its own box */}
      <div class="group-nav" role="group" aria-label="Groups">
        <button type="button" class="chip" aria-pressed={!group} onClick={() => navigate('/settings')}>
          All
        </button>
        {groups.map((g) => (
          <button
            key={g}
            type="button"
            class="chip"
            aria-pressed={group === g}
            onClick={() => navigate('/settings', { group: g })}
          >
            {g}
          </button>
        ))}
      </div>
      <ErrorNote error={error} onRetry={reload} />
      {loading && !data && <Loading />}
      {/* Keyed by the mail settings: saving one clears an answer about the old ones ("Mail is not configured"). */}
      {(!group || group === 'mail' || group === 'smtp') && data && (
        <SmtpTest
          key={JSON.stringify(
            data.settings.filter((s) => s.group === 'mail').map((s) => [s.key, s.value, s.source, s.is_set]),
          )}
        />
      )}
      {(!group || group === 'auth') && data && <SignInProviders />}
      {data && !byGroup.length && <Empty icon="settings" title="No setting matches" />}
      {byGroup.map(({ g, items }) => (
        <section class="panel" key={g} aria-label={`${g} settings`}>
          <div class="panel-head">
            <h2>{g}</h2>
            <span class="muted">{items.length}</span>
          </div>
          {items.map((s) => (
            <SettingRow key={s.key} s={s} onChanged={reload} />
          ))}
        </section>
      ))}
    </>
  );
}

function kindOf(s: Setting): 'bool' | 'int' | 'list' | 'enum' | 'json' | 'string' {
  const t = s.type.toLowerCase();
  if (t === 'json') return 'json';
  if (t.startsWith('bool')) return 'bool';
  if (t.startsWith('int') || t === 'number') return 'int';
  if (t === 'list' || t.endsWith('[]') || t === 'array') return 'list';
  if (t === 'enum' && s.values?.length) return 'enum';
  return 'string';
}

function toText(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (Array.isArray(v)) return v.every((x) => typeof x === 'string') ? v.join('\n') : JSON.stringify(v, null, 2);
  return String(v);
}

function fromText(s: Setting, text: string): unknown {
  switch (kindOf(s)) {
    case 'bool':
      return text === 'true';
    case 'int':
      return text.trim() === '' ? text : Number(text);
    case 'json':
      // A structured setting (auth.oauth_providers) is typed as JSON; the server says what is wrong with it.
      try {
        return JSON.parse(text);
      } catch {
        return text;
      }
    case 'list':
      return text
        .split(/[\n,]/)
        .map((x) => x.trim())
        .filter(Boolean);
    default:
      return text;
  }
}

function SettingRow({ s, onChanged }: { s: Setting; onChanged: () => void }) {
  const [text, setText] = useState(toText(s.value));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  const pinned = !!s.pinned_by || s.source === 'environment' || s.source === 'file';
  const dirty = text !== toText(s.value);
  const kind = kindOf(s);
  const save = async (e?: Event) => {
    e?.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const { setting } = await put<AdminData<'setting'>>(
        `/settings/${encodeURIComponent(s.key)}`,
        body('value', {
          value: fromText(s, text),
        }),
      );
      setText(toText(setting.value));
      toast(`${s.key} saved${setting.live ? ' and applied' : '; it applies after a restart'}.`);
      onChanged();
    } catch (err) {
      setError(
        err instanceof ApiError
          ? (err.fields[s.key] ??
              err.fields.value ??
              (err.code === 'setting_pinned'
                ? `Pinned by ${String(err.details.pinned_by ?? 'the environment or config file')}: change it there.`
                : err.message))
          : String(err),
      );
    } finally {
      setBusy(false);
    }
  };
  const reset = async () => {
    setBusy(true);
    setError(undefined);
    try {
      const { setting } = await del<AdminData<'setting'>>(`/settings/${encodeURIComponent(s.key)}`);
      setText(toText(setting.value));
      toast(`${s.key} is back to its default.`);
      onChanged();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };
  const src = SOURCE[s.source] ?? SOURCE.default;
  return (
    <form class="setting" onSubmit={save} noValidate>
      <div>
        <div class="setting-key">{s.key}</div>
        <p class="setting-desc">{s.description}</p>
        <div class="badges">
          <Badge tone={src.tone}>{src.label}</Badge>
          {s.live ? (
            <Badge tone="ok">live</Badge>
          ) : (
            <Badge tone="warn" title="Takes effect after a restart">
              restart needed
            </Badge>
          )}
          {s.secret && <Badge>secret</Badge>}
          {s.secret && (s.is_set ? <Badge tone="ok">set</Badge> : <Badge tone="warn">not set</Badge>)}
        </div>
      </div>
      <div class="setting-edit">
        <Field
          label={`Value of ${s.key}`}
          hideLabel
          error={error}
          hint={
            pinned ? (
              <>
                Pinned by <code>{s.pinned_by ?? s.source}</code>; change it there.
              </>
            ) : (
              <>
                {s.secret ? (
                  s.is_set ? (
                    'Set; the value is hidden. Type a new one to replace it.'
                  ) : (
                    'Not set.'
                  )
                ) : toText(s.default) !== '' ? (
                  <>
                    Default: <code>{toText(s.default)}</code>.{' '}
                  </>
                ) : (
                  'Empty by default. '
                )}
                {s.min !== undefined && s.max !== undefined && (
                  <>
                    Between {s.min} and {s.max}.
                  </>
                )}
              </>
            )
          }
        >
          {(id, d) =>
            kind === 'bool' || kind === 'enum' ? (
              <select
                id={id}
                aria-describedby={d}
                value={text}
                disabled={pinned}
                onChange={(e) => setText(e.currentTarget.value)}
              >
                {(kind === 'bool' ? ['true', 'false'] : s.values!).map((v) => (
                  <option key={v} value={v}>
                    {v}
                  </option>
                ))}
              </select>
            ) : kind === 'list' || kind === 'json' ? (
              <textarea
                id={id}
                aria-describedby={d}
                rows={Math.max(2, text.split('\n').length)}
                value={text}
                readOnly={pinned}
                placeholder={kind === 'json' ? 'JSON' : 'one per line'}
                onInput={(e) => setText(e.currentTarget.value)}
              />
            ) : (
              <input
                id={id}
                aria-describedby={d}
                type={(s.secret ? 'password' : kind === 'int' ? 'number' : 'text') as 'text'}
                value={text}
                readOnly={pinned}
                placeholder={s.secret ? (s.is_set ? 'set (hidden); type to replace' : 'not set') : ''}
                min={s.min}
                max={s.max}
                onInput={(e) => setText(e.currentTarget.value)}
                autocomplete="off"
              />
            )
          }
        </Field>
        {!pinned && (dirty || busy || s.source === 'database') && (
          <div class="page-actions">
            {(dirty || busy) && (
              <Button type="submit" variant="primary" class="btn-sm" busy={busy} aria-label={`Save ${s.key}`}>
                Save
              </Button>
            )}
            {dirty && (
              <Button
                class="btn-sm"
                variant="ghost"
                onClick={() => {
                  setText(toText(s.value));
                  setError(undefined);
                }}
              >
                Undo
              </Button>
            )}
            {!dirty && s.source === 'database' && (
              <Button
                class="btn-sm"
                variant="ghost"
                onClick={reset}
                disabled={busy}
                aria-label={`Reset ${s.key} to default`}
              >
                Reset to default
              </Button>
            )}
          </div>
        )}
      </div>
    </form>
  );
}

function SmtpTest() {
  const [to, setTo] = useState('');
  const [busy, setBusy] = useState(false);
  const [answer, setAnswer] = useState<{ ok: boolean; text: string } | null>(null);
  const [error, setError] = useState<string>();
  const send = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setAnswer(null);
    setError(undefined);
    try {
      const r = await post<AdminData<'smtpTest'>>('/mail/test', body('mailTest', { to }));
      setAnswer({ ok: true, text: `Accepted. Server answered: ${r.response} (message id ${r.message_id})` });
    } catch (err) {
      if (err instanceof ApiError && err.fields.to) setError(err.fields.to);
      else if (err instanceof ApiError && err.code === 'mail_not_configured')
        setAnswer({ ok: false, text: 'Mail is not configured: set the SMTP host below first, then send a test.' });
      else setAnswer({ ok: false, text: err instanceof Error ? `Refused: ${err.message}` : String(err) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="panel">
      <div class="panel-head">
        <h2>SMTP test</h2>
        <span class="muted">Sends one message now, outside the queue.</span>
      </div>
      <form class="panel-body form" onSubmit={send}>
        <div class="row">
          <TextField
            label="Test recipient"
            type="email"
            value={to}
            onValue={setTo}
            error={error}
            placeholder="you@example.com"
            required
          />
          <Button type="submit" variant="primary" icon="mail" busy={busy}>
            Send test
          </Button>
        </div>
        {answer && (
          <div class={`notice ${answer.ok ? '' : 'notice-danger'}`} role="status" data-testid="smtp-answer">
            {answer.text}
          </div>
        )}
      </form>
    </section>
  );
}
