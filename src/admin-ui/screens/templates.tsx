/**
 * Mail templates: list; editor for subject, HTML and text; the variables the template
 * uses; live preview with sample variables in a sandboxed iframe (no scripts, opaque
 * origin); a render error names the variable.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, body, del, get, post, put, type AdminData } from '../api';
import {
  Button,
  Empty,
  ErrorNote,
  Field,
  FormModal,
  Loading,
  PageHeader,
  TextAreaField,
  TextField,
  confirm,
  fieldError,
  formError,
  useAsync,
  useSubmit,
  ListTable,
} from '../components/ui';
import { Icon } from '../components/icons';
import { toast } from '../components/toast';
import { dateTime } from '../format';
import { navigate, route } from '../router';
import { titleOf } from '../screen-list';

type Template = AdminData<'template'>['template'];

/** The rule of a template's name (the server's TEMPLATE_NAME), in the hint's words. */
const NAME_RULE = /^[a-z0-9][a-z0-9_.-]{0,99}$/;
const NAME_HINT =
  'Lowercase letters, digits, _ . - (up to 100, starting with a letter or digit): e.g. welcome or order.shipped';

export function Templates() {
  const name = route.value.parts[1];
  return name ? <Editor key={name} name={name === '+new' ? null : name} /> : <TemplateList />;
}

function TemplateList() {
  const { data, error, loading, reload } = useAsync(() => get<AdminData<'templates'>>('/templates'), []);
  return (
    <>
      <PageHeader
        title={titleOf('templates')}
        subtitle="Liquid templates used by the Mail API (template + variables)."
        actions={
          <Button variant="primary" icon="plus" onClick={() => navigate('/templates/+new')}>
            New template
          </Button>
        }
      />
      <section class="panel">
        <ErrorNote error={error} onRetry={reload} />
        {loading && !data && <Loading />}
        {data && !data.templates.length && (
          <Empty icon="template" title="No templates yet">
            <p>A template holds a subject, an HTML and a text body with {'{{ variables }}'}.</p>
            <Button variant="primary" icon="plus" onClick={() => navigate('/templates/+new')}>
              New template
            </Button>
          </Empty>
        )}
        {!!data?.templates.length && (
          <ListTable>
            <thead>
              <tr>
                <th>Name</th>
                <th>Subject</th>
                <th>Updated</th>
              </tr>
            </thead>
            <tbody>
              {data.templates.map((t) => (
                <tr key={t.name}>
                  <td>
                    <a href={`#/templates/${encodeURIComponent(t.name)}`}>{t.name}</a>
                  </td>
                  <td>{t.subject}</td>
                  <td>{dateTime(t.updated_at)}</td>
                </tr>
              ))}
            </tbody>
          </ListTable>
        )}
      </section>
    </>
  );
}

/** Sample values by variable path, nested: `user.name` is `name` inside `user`. */
/** The samples of a new template, carried to its editor under the saved name (which remounts). */
let carried: { name: string; samples: Record<string, string> } | undefined;

interface Samples {
  [key: string]: string | Samples;
}

/**
 * `{a: 1, "user.name": "x"}` → `{a: 1, user: {name: "x"}}`; blank samples are left out.
 * A variable the template reads fields of is an object: when `user` and `user.name` both
 * have samples, the fields win and `user`'s own sample is not used (see `shadowed`).
 */
function sampleObject(samples: Record<string, string>): Samples {
  const out: Samples = {};
  const paths = Object.entries(samples)
    .filter(([, v]) => v !== '')
    .map(([k, v]) => [k.split('.'), v] as const)
    .sort((a, b) => a[0].length - b[0].length);
  for (const [path, v] of paths) {
    let at = out;
    for (const p of path.slice(0, -1)) {
      const next = at[p];
      at = typeof next === 'object' ? next : (at[p] = {});
    }
    at[path[path.length - 1]!] = v;
  }
  return out;
}

/** The sample fields of `v` (`user` → `user.name`, `user.email`) that make its own sample unused. */
function shadowed(v: string, samples: Record<string, string>): string[] {
  return Object.keys(samples).filter((k) => k.startsWith(`${v}.`) && samples[k] !== '');
}

/** Variables a render error says are missing: `details.missing_variables`, or `variables.<name>` fields. */
function missingVariables(e: ApiError): string[] {
  const listed = e.details.missing_variables;
  if (Array.isArray(listed)) return listed.map(String);
  return Object.keys(e.fields)
    .filter((f) => f.startsWith('variables.'))
    .map((f) => f.slice('variables.'.length));
}

function Editor({ name }: { name: string | null }) {
  const loaded = useAsync(
    () =>
      name
        ? get<AdminData<'template'>>(`/templates/${encodeURIComponent(name)}`).then((r) => r.template)
        : Promise.resolve(null),
    [name],
  );
  if (loaded.loading && !loaded.data) return <Loading />;
  if (loaded.error)
    return (
      <>
        <a class="back" href="#/templates">
          <Icon name="chevronLeft" size={14} /> Mail templates
        </a>
        <ErrorNote error={loaded.error} onRetry={loaded.reload} />
      </>
    );
  return <EditorForm initial={loaded.data ?? null} />;
}

function EditorForm({ initial }: { initial: Template | null }) {
  const [name, setName] = useState(initial?.name ?? '');
  const [subject, setSubject] = useState(initial?.subject ?? '');
  const [html, setHtml] = useState(initial?.html ?? '');
  const [text, setText] = useState(initial?.text ?? '');
  const [variables, setVariables] = useState<string[]>(initial?.variables ?? []);
  const [optional, setOptional] = useState<string[]>(initial?.optional_variables ?? []);
  const [samples, setSamples] = useState<Record<string, string>>(() => ({
    ...Object.fromEntries((initial?.variables ?? []).map((v) => [v, `[${v}]`])),
    // A new template just saved opens again under its name: the samples typed stay.
    ...(initial && carried?.name === initial.name ? carried.samples : {}),
  }));
  const [preview, setPreview] = useState<AdminData<'preview'> | null>(null);
  const [previewError, setPreviewError] = useState<unknown>();
  const [saving, setSaving] = useState(false);
  const [saveError, setSaveError] = useState<unknown>();
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  /** The newest preview asked for: the answer to an older one (a newer one is due) is dropped. */
  const asked = useRef(0);
  /** Samples just learned from a render error: render again at once, not after the typing pause. */
  const learned = useRef(false);
  const [rendering, setRendering] = useState(true);

  // Nothing to render until there is a subject and a body: a blank new template shows no error.
  const blank = subject.trim() === '' || (html.trim() === '' && text.trim() === '');

  // Live preview: re-render shortly after the last keystroke.
  useEffect(() => {
    clearTimeout(timer.current);
    if (blank) {
      ++asked.current; // an answer still on its way is for a template no longer shown
      setPreview(null);
      setPreviewError(undefined);
      setRendering(false);
      return;
    }
    setRendering(true);
    const pause = (preview || previewError) && !learned.current ? 350 : 0;
    learned.current = false;
    const mine = ++asked.current;
    timer.current = setTimeout(async () => {
      try {
        const r = await post<AdminData<'preview'>>(
          '/templates/preview',
          body('preview', {
            subject,
            html: html || undefined,
            text: text || undefined,
            variables: sampleObject(samples),
          }),
        );
        if (mine !== asked.current) return;
        setPreview(r);
        setPreviewError(undefined);
        setOptional(r.optional_variables ?? []);
        if (!learn(r.variables)) setRendering(false);
      } catch (e) {
        if (mine !== asked.current) return;
        // A failed render shows no part of an older one (its subject would look current).
        setPreview(null);
        setPreviewError(e);
        if (!(e instanceof ApiError && learn(missingVariables(e)))) setRendering(false);
      }
    }, pause);
    return () => clearTimeout(timer.current);
  }, [subject, html, text, samples]);

  /** Add the variables a render named; true when new samples were added (another render follows). */
  function learn(vars: string[] | undefined): boolean {
    if (!vars?.length) return false;
    setVariables((old) => (vars.every((v) => old.includes(v)) ? old : [...new Set([...old, ...vars])]));
    if (vars.every((v) => v in samples)) return false;
    learned.current = true;
    setSamples((old) => {
      const missing = vars.filter((v) => !(v in old));
      return missing.length ? { ...old, ...Object.fromEntries(missing.map((v) => [v, `[${v}]`])) } : old;
    });
    return true;
  }

  const save = async (e: Event) => {
    e.preventDefault();
    setSaving(true);
    setSaveError(undefined);
    try {
      const { template } = await put<AdminData<'template'>>(
        `/templates/${encodeURIComponent(name)}`,
        body('template', {
          subject,
          html: html || undefined,
          text: text || undefined,
        }),
      );
      toast(`Template ${template.name} saved.`);
      if (!initial) {
        carried = { name: template.name, samples };
        navigate(`/templates/${template.name}`, undefined, true);
      }
    } catch (err) {
      setSaveError(err);
    } finally {
      setSaving(false);
    }
  };
  const remove = async () => {
    if (
      !initial ||
      !(await confirm({
        title: `Delete template ${initial.name}?`,
        body: <p>Mail sent with this template name will fail until it exists again.</p>,
        action: 'Delete',
        danger: true,
      }))
    )
      return;
    try {
      await del(`/templates/${encodeURIComponent(initial.name)}`);
      toast(`Template ${initial.name} deleted.`);
      navigate('/templates');
    } catch (err) {
      toast(`Could not delete: ${(err as Error).message}`, 'error');
    }
  };
  const renderProblem = previewError ? (previewError as Error).message : '';
  const [testing, setTesting] = useState(false);
  return (
    <>
      <a class="back" href="#/templates">
        <Icon name="chevronLeft" size={14} /> Mail templates
      </a>
      <PageHeader
        title={initial ? initial.name : 'New template'}
        subtitle={initial ? `Updated ${dateTime(initial.updated_at)}` : 'Liquid syntax: {{ name }}, {% if %}…'}
        actions={
          <>
            {initial && (
              <Button variant="danger" icon="trash" onClick={remove}>
                Delete
              </Button>
            )}
            {initial && (
              <Button icon="mail" onClick={() => setTesting(true)}>
                Send test
              </Button>
            )}
            <Button variant="primary" type="submit" form="template-form" busy={saving}>
              Save
            </Button>
          </>
        }
      />
      {testing && initial && (
        <SendTest name={initial.name} variables={sampleObject(samples)} onClose={() => setTesting(false)} />
      )}
      <div class="editor">
        <section class="panel">
          <form id="template-form" class="panel-body form" onSubmit={save}>
            <ErrorNote error={formError(saveError, ['name', 'subject', 'html', 'text'])} />
            {!initial && (
              <TextField
                label="Name"
                value={name}
                onValue={setName}
                error={
                  fieldError(saveError, 'name') ??
                  (name !== '' && !NAME_RULE.test(name) ? `Not a valid name. ${NAME_HINT}.` : undefined)
                }
                hint={NAME_HINT}
                required
                autoFocus
              />
            )}
            <TextField
              label="Subject"
              value={subject}
              onValue={setSubject}
              error={fieldError(saveError, 'subject')}
              required
            />
            <TextAreaField
              label="HTML body"
              rows={12}
              value={html}
              onValue={setHtml}
              error={fieldError(saveError, 'html')}
            />
            <TextAreaField
              label="Text body"
              rows={6}
              value={text}
              onValue={setText}
              error={fieldError(saveError, 'text')}
            />
          </form>
        </section>
        <div>
          <section class="panel">
            <div class="panel-head">
              <h2>Variables</h2>
              <span class="muted">sample values for the preview</span>
            </div>
            <div class="panel-body vars">
              {!variables.length && <p class="muted">This template uses no variables.</p>}
              {variables.map((v) => (
                <Field
                  key={v}
                  label={v}
                  error={
                    previewError instanceof ApiError && missingVariables(previewError).includes(v)
                      ? 'Needed by the template: give a sample value.'
                      : undefined
                  }
                  hint={
                    shadowed(v, samples).length
                      ? `Not used: the template reads ${shadowed(v, samples).join(', ')}, so ${v} is an object.`
                      : optional.includes(v)
                        ? 'Optional: read only inside {% if %}. Empty it to preview the mail without it.'
                        : undefined
                  }
                >
                  {(id, d) => (
                    <input
                      id={id}
                      aria-describedby={d}
                      value={samples[v] ?? ''}
                      onInput={(e) => setSamples({ ...samples, [v]: e.currentTarget.value })}
                    />
                  )}
                </Field>
              ))}
            </div>
          </section>
          <section class="panel" aria-busy={rendering}>
            <div class="panel-head">
              <h2>Preview</h2>
              {preview && (
                <span class="muted">
                  Subject: <strong data-testid="preview-subject">{preview.subject}</strong>
                </span>
              )}
            </div>
            <div class="panel-body">
              {renderProblem && (
                <div class="error-note" role="alert" data-testid="render-error">
                  <Icon name="alert" />
                  <span>Cannot render: {renderProblem}</span>
                </div>
              )}
              {blank ? (
                <p class="muted" data-testid="preview-waiting">
                  Type a subject and an HTML or text body to see the preview.
                </p>
              ) : preview?.html ? (
                <iframe class="preview-frame" title="HTML preview" sandbox="" srcdoc={preview.html} />
              ) : preview ? (
                <p class="muted">No HTML body.</p>
              ) : previewError ? null : (
                <Loading label="Rendering…" />
              )}
              {preview?.text && (
                <>
                  <h3 style={{ marginTop: '12px' }}>Text</h3>
                  <pre class="preview-text">{preview.text}</pre>
                </>
              )}
            </div>
          </section>
        </div>
      </div>
    </>
  );
}

/** Send the stored template to one address now, with the preview's sample values. */
function SendTest({ name, variables, onClose }: { name: string; variables: Samples; onClose: () => void }) {
  const [to, setTo] = useState('');
  const [answer, setAnswer] = useState<string>();
  const { busy, error, submit } = useSubmit(async () => {
    setAnswer(undefined);
    const r = await post<AdminData<'templateTest'>>(
      `/templates/${encodeURIComponent(name)}/test`,
      body('templateTest', {
        to,
        variables,
      }),
    );
    setAnswer(`Sent. The server answered: ${r.response}`);
    toast(`Test of ${name} sent to ${to}.`);
  });
  return (
    <FormModal
      title={`Send a test of ${name}`}
      action="Send test"
      icon="mail"
      cancel="Close"
      busy={busy}
      onSubmit={submit}
      lead={
        <p class="muted">
          The saved template, rendered with the sample values beside the editor, goes out now as a mail job.
        </p>
      }
      error={formError(error, ['to'])}
      noValidate
      onClose={onClose}
    >
      <TextField
        label="Recipient"
        type="email"
        value={to}
        onValue={setTo}
        error={fieldError(error, 'to')}
        placeholder="you@example.com"
      />
      {answer && (
        <div class="notice" role="status" data-testid="template-test-answer">
          {answer}
        </div>
      )}
    </FormModal>
  );
}
