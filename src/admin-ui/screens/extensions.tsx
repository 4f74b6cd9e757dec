/** Extensions: loaded and failed, with version, routes, error and their settings. */
import { useState } from 'preact/hooks';
import { ApiError, body, get, put, type AdminData } from '../api';
import { Badge, Button, Empty, ErrorNote, Field, Loading, PageHeader, useAsync } from '../components/ui';
import { toast } from '../components/toast';
import { titleOf } from '../screen-list';

type Extension = AdminData<'extensions'>['extensions'][number];

export function Extensions() {
  const { data, error, loading, reload } = useAsync(() => get<AdminData<'extensions'>>('/extensions'), []);
  return (
    <>
      <PageHeader
        title={titleOf('extensions')}
        subtitle="Found in extensions.dir at start. Adding or removing one needs a restart."
      />
      <ErrorNote error={error} onRetry={reload} />
      {loading && !data && <Loading />}
      {data && !data.extensions.length && (
        <section class="panel">
          <Empty icon="puzzle" title="No extensions loaded">
            <p>
              Put an extension's folder (with its <code>index.ts</code> or <code>index.js</code>) in{' '}
              <code data-testid="extensions-dir">{data.dir}</code> (the setting extensions.dir) and restart Basalt.
              docs/extensions.md shows how to write one.
            </p>
          </Empty>
        </section>
      )}
      {data?.extensions.map((x) => (
        <section class="panel" key={x.name}>
          <div class="panel-head">
            <h2>
              {x.name} {x.version && <span class="muted">v{x.version}</span>}
            </h2>
            <Badge tone={x.state === 'loaded' ? 'ok' : 'danger'}>{x.state}</Badge>
          </div>
          <div class="panel-body">
            {x.error && (
              <div class="notice notice-danger" role="alert">
                {x.error}
              </div>
            )}
            <h3>Routes</h3>
            {x.routes.length ? (
              <ul class="mono" style={{ margin: '0 0 12px', paddingLeft: '18px' }}>
                {x.routes.map((r) => (
                  <li key={r.method + r.path}>
                    {r.method} {r.path}
                  </li>
                ))}
              </ul>
            ) : (
              <p class="muted">None.</p>
            )}
            <h3>Settings</h3>
            {!x.settings.length && <p class="muted">None.</p>}
          </div>
          {x.settings.map((s) => (
            <ExtSetting key={s.key} ext={x.name} s={s} />
          ))}
        </section>
      ))}
    </>
  );
}

function ExtSetting({ ext, s }: { ext: string; s: Extension['settings'][number] }) {
  const initial = typeof s.value === 'string' ? s.value : JSON.stringify(s.value ?? '');
  const [text, setText] = useState(initial);
  const [saved, setSaved] = useState(initial);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const save = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    let value: unknown = text;
    if (typeof s.value !== 'string')
      try {
        value = JSON.parse(text);
      } catch {
        /* sent as text */
      }
    try {
      await put(
        `/extensions/${encodeURIComponent(ext)}/settings/${encodeURIComponent(s.key)}`,
        body('value', { value }),
      );
      setSaved(text);
      toast(`${ext}: ${s.key} saved.`);
    } catch (err) {
      setError(err instanceof ApiError ? (err.fields[s.key] ?? err.fields.value ?? err.message) : String(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="setting" onSubmit={save}>
      <div>
        <div class="setting-key">{s.key}</div>
        <p class="setting-desc">{s.description}</p>
      </div>
      <div class="setting-edit">
        <Field label={`Value of ${s.key}`} hideLabel error={error}>
          {(id, d) => (
            <input id={id} aria-describedby={d} value={text} onInput={(e) => setText(e.currentTarget.value)} />
          )}
        </Field>
        {(text !== saved || busy) && (
          <div class="page-actions">
            <Button type="submit" class="btn-sm" variant="primary" busy={busy} aria-label={`Save ${s.key}`}>
              Save
            </Button>
            <Button class="btn-sm" variant="ghost" onClick={() => setText(saved)}>
              Undo
            </Button>
          </div>
        )}
      </div>
    </form>
  );
}
