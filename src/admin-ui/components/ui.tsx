/** The panel's building blocks: buttons, labelled fields, badges, empty states, dialogs. */
import type { ButtonHTMLAttributes, ComponentChildren } from 'preact';
import { useCallback, useEffect, useId, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { signal } from '@preact/signals';
import { Icon, Logo, type IconName } from './icons';
import { ApiError, explain } from '../api';
import { toast } from './toast';

type ButtonProps = ButtonHTMLAttributes<HTMLButtonElement> & {
  variant?: 'primary' | 'secondary' | 'danger' | 'ghost';
  icon?: IconName;
  busy?: boolean;
};

export function Button({
  variant = 'secondary',
  icon,
  busy,
  children,
  class: cls,
  disabled,
  type = 'button',
  ...rest
}: ButtonProps) {
  return (
    <button
      type={type}
      class={`btn btn-${variant} ${cls ?? ''}`}
      disabled={disabled || busy}
      aria-busy={busy || undefined}
      {...rest}
    >
      {busy ? <span class="spinner" aria-hidden="true" /> : icon && <Icon name={icon} size={16} />}
      {children}
    </button>
  );
}

/** A labelled control; `children` receives the id to put on the control. */
export function Field({
  label,
  error,
  hint,
  children,
  class: cls,
  hideLabel,
}: {
  label: string;
  error?: string;
  hint?: ComponentChildren;
  children: (id: string, describedBy?: string) => ComponentChildren;
  class?: string;
  hideLabel?: boolean;
}) {
  const id = useId();
  const note = error || hint ? `${id}-note` : undefined;
  return (
    <div class={`field ${error ? 'has-error' : ''} ${cls ?? ''}`}>
      <label for={id} class={hideLabel ? 'sr-only' : undefined}>
        {label}
      </label>
      {children(id, note)}
      {error ? (
        <p class="field-error" id={note} role="alert">
          {error}
        </p>
      ) : hint ? (
        <p class="field-hint" id={note}>
          {hint}
        </p>
      ) : null}
    </div>
  );
}

/**
 * A labelled text input: `value` in, `onValue` out, the server's word on it under it.
 */
export function TextField({
  label,
  value,
  onValue,
  error,
  hint,
  hideLabel,
  class: cls,
  type = 'text',
  ...rest
}: {
  label: string;
  value: string;
  onValue: (value: string) => void;
  error?: string;
  hint?: ComponentChildren;
  hideLabel?: boolean;
  class?: string;
  type?: 'text' | 'email' | 'password' | 'search' | 'url' | 'number' | 'datetime-local' | 'date';
  autocomplete?: string;
  autoFocus?: boolean;
  required?: boolean;
  placeholder?: string;
  readOnly?: boolean;
  disabled?: boolean;
  spellcheck?: boolean;
  maxLength?: number;
  inputMode?: 'text' | 'numeric' | 'decimal' | 'email' | 'url';
}) {
  return (
    <Field label={label} error={error} hint={hint} hideLabel={hideLabel} class={cls}>
      {(id, d) => (
        <input
          id={id}
          aria-describedby={d}
          // Preact types each input type's attributes apart; these props fit all of them.
          type={type as 'text'}
          value={value}
          onInput={(e) => onValue(e.currentTarget.value)}
          {...rest}
        />
      )}
    </Field>
  );
}

/** A labelled text area for code or raw text (mail bodies, CSV): no spell checking. */
export function TextAreaField({
  label,
  value,
  onValue,
  rows,
  error,
  hint,
}: {
  label: string;
  value: string;
  onValue: (value: string) => void;
  rows: number;
  error?: string;
  hint?: ComponentChildren;
}) {
  return (
    <Field label={label} error={error} hint={hint}>
      {(id, d) => (
        <textarea
          id={id}
          aria-describedby={d}
          rows={rows}
          value={value}
          onInput={(e) => onValue(e.currentTarget.value)}
          spellcheck={false}
        />
      )}
    </Field>
  );
}

/** A labelled, required password input; `autocomplete` tells a password manager which password it is. */
export function PasswordField({
  autocomplete,
  ...rest
}: {
  label: string;
  value: string;
  onValue: (value: string) => void;
  autocomplete: 'current-password' | 'new-password';
  error?: string;
  hint?: ComponentChildren;
  autoFocus?: boolean;
}) {
  return <TextField type="password" autocomplete={autocomplete} required {...rest} />;
}

/** The card of a signed-out page (sign-in, setup): the logo beside a title and a line, then `children`. */
export function AuthCard({
  title,
  subtitle,
  children,
}: {
  title: string;
  subtitle: string;
  children: ComponentChildren;
}) {
  return (
    <div class="card signin-card">
      <div class="auth-brand">
        <Logo size={36} />
        <div>
          <h1>{title}</h1>
          <p class="muted">{subtitle}</p>
        </div>
      </div>
      {children}
    </div>
  );
}

/** The repetition of a new password is typed and differs from it: the form sends nothing. */
export function differs(password: string, repeat: string): boolean {
  return repeat !== '' && repeat !== password;
}

/** A new password and its repetition ("Repeat <label>"), which says so when the two differ. */
export function NewPasswordFields({
  label,
  value,
  onValue,
  repeat,
  onRepeat,
  error,
  hint,
}: {
  label: string;
  value: string;
  onValue: (value: string) => void;
  repeat: string;
  onRepeat: (value: string) => void;
  error?: string;
  hint?: ComponentChildren;
}) {
  return (
    <>
      <PasswordField
        label={label}
        autocomplete="new-password"
        value={value}
        onValue={onValue}
        error={error}
        hint={hint}
      />
      <PasswordField
        label={`Repeat ${label.toLowerCase()}`}
        autocomplete="new-password"
        value={repeat}
        onValue={onRepeat}
        error={differs(value, repeat) ? 'The two passwords differ.' : undefined}
      />
    </>
  );
}

export function Badge({
  tone = 'neutral',
  children,
  title,
}: {
  tone?: 'neutral' | 'ok' | 'warn' | 'danger' | 'info' | 'accent';
  children: ComponentChildren;
  title?: string;
}) {
  return (
    <span class={`badge badge-${tone}`} title={title}>
      {children}
    </span>
  );
}

export function Empty({
  icon = 'search',
  title,
  children,
}: {
  icon?: IconName;
  title: string;
  children?: ComponentChildren;
}) {
  return (
    <div class="empty">
      <div class="empty-icon">
        <Icon name={icon} size={28} />
      </div>
      <p class="empty-title">{title}</p>
      {children && <div class="empty-body">{children}</div>}
    </div>
  );
}

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <div class="loading" role="status">
      <span class="spinner" aria-hidden="true" /> {label}
    </div>
  );
}

export function ErrorNote({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  if (!error) return null;
  return (
    <div class="error-note" role="alert">
      <Icon name="alert" />
      <span>{explain(error)}</span>
      {onRetry && (
        <Button variant="ghost" onClick={onRetry}>
          Try again
        </Button>
      )}
    </div>
  );
}

export function PageHeader({
  title,
  subtitle,
  actions,
}: {
  title: string;
  subtitle?: ComponentChildren;
  actions?: ComponentChildren;
}) {
  return (
    <header class="page-header">
      <div>
        <h1>{title}</h1>
        {subtitle && <p class="subtitle">{subtitle}</p>}
      </div>
      {actions && <div class="page-actions">{actions}</div>}
    </header>
  );
}

/** A modal `<dialog>`: focus kept inside, Escape closes. */
export function Modal({
  title,
  onClose,
  children,
  footer,
  wide,
}: {
  title: string;
  onClose: () => void;
  children: ComponentChildren;
  footer?: ComponentChildren;
  wide?: boolean;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current!;
    if (!d.open) {
      d.showModal();
      // The first field, not the Close button the browser would pick (unless something asks for focus).
      if (!d.querySelector('[autofocus]'))
        d.querySelector<HTMLElement>(
          '.modal-body :is(input:not([type=hidden]):not([type=checkbox]):not([readonly]), select, textarea)',
        )?.focus();
    }
    const cancel = (e: Event) => {
      e.preventDefault();
      onClose();
    };
    d.addEventListener('cancel', cancel);
    return () => d.removeEventListener('cancel', cancel);
  }, [onClose]);
  return (
    <dialog ref={ref} class={`modal ${wide ? 'modal-wide' : ''}`} aria-label={title}>
      <div class="modal-head">
        <h2>{title}</h2>
        <button type="button" class="icon-btn" aria-label="Close" onClick={onClose}>
          <Icon name="x" />
        </button>
      </div>
      <div class="modal-body">{children}</div>
      {footer && <div class="modal-foot">{footer}</div>}
    </dialog>
  );
}

/**
 * A dialog around one form: `children` are its fields, `onSubmit` sends it (useSubmit's
 * `submit`), `error` is the note above the fields (what no field names), `lead` a line
 * before that note. Cancel and the submit button (`action`, busy while sent) stand in the
 * footer, `extra` at its start (e.g. a Delete).
 */
export function FormModal({
  title,
  action,
  busy,
  onSubmit,
  error,
  lead,
  noValidate,
  onClose,
  children,
  extra,
  wide,
  icon,
  disabled,
  cancel = 'Cancel',
}: {
  title: string;
  action: string;
  busy: boolean;
  onSubmit: (e: Event) => void;
  error?: unknown;
  lead?: ComponentChildren;
  /** The server names what is wrong, not the browser (fields of type email). */
  noValidate?: boolean;
  onClose: () => void;
  children: ComponentChildren;
  extra?: ComponentChildren;
  wide?: boolean;
  icon?: IconName;
  disabled?: boolean;
  cancel?: string;
}) {
  // The submit button stands in the footer, outside the form: it names the form by its id.
  const formId = useId();
  return (
    <Modal
      title={title}
      onClose={onClose}
      wide={wide}
      footer={
        <>
          {extra}
          {extra && <span style={{ flex: 1 }} />}
          <Button onClick={onClose}>{cancel}</Button>
          <Button variant="primary" type="submit" form={formId} icon={icon} busy={busy} disabled={disabled}>
            {action}
          </Button>
        </>
      }
    >
      <form id={formId} class="form" onSubmit={onSubmit} noValidate={noValidate}>
        {lead}
        <ErrorNote error={error} />
        {children}
      </form>
    </Modal>
  );
}

/**
 * A table of records in its scrolling frame (`free`: no height limit). On a phone it reads
 * as a list of cards (styles.css, `table.stack`): each cell labelled with its column's
 * header, the row's actions at the card's end, nothing off-screen.
 */
export function ListTable({ children, free }: { children: ComponentChildren; free?: boolean }) {
  const ref = useRef<HTMLTableElement>(null);
  // After every render: the rows may have changed. The labels are plain attributes Preact does not own.
  useLayoutEffect(() => {
    const table = ref.current;
    if (!table) return;
    const heads = [...(table.tHead?.rows[0]?.cells ?? [])].map((c) => c.textContent?.trim() ?? '');
    for (const body of table.tBodies)
      for (const row of body.rows)
        for (const [i, cell] of [...row.cells].entries()) cell.dataset.label = heads[i] ?? '';
  });
  return (
    <div class={`table-wrap ${free ? 'free' : ''}`}>
      <table ref={ref} class="stack">
        {children}
      </table>
    </div>
  );
}

interface ConfirmRequest {
  title: string;
  body: ComponentChildren;
  action: string;
  danger?: boolean;
  resolve: (ok: boolean) => void;
}
const pending = signal<ConfirmRequest | null>(null);

/** Asks before a destructive action; resolves true when confirmed. */
export function confirm(opts: Omit<ConfirmRequest, 'resolve'>): Promise<boolean> {
  return new Promise((resolve) => (pending.value = { ...opts, resolve }));
}

export function ConfirmHost() {
  const req = pending.value;
  const close = useCallback((ok: boolean) => {
    pending.value?.resolve(ok);
    pending.value = null;
  }, []);
  const cancel = useCallback(() => close(false), [close]);
  if (!req) return null;
  return (
    <Modal
      title={req.title}
      onClose={cancel}
      footer={
        <>
          <Button onClick={cancel}>Cancel</Button>
          <Button variant={req.danger ? 'danger' : 'primary'} onClick={() => close(true)} autoFocus>
            {req.action}
          </Button>
        </>
      }
    >
      {req.body}
    </Modal>
  );
}

export interface Async<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

/**
 * Loads `fn()` when `deps` change; keeps the last data while reloading. The request
 * starts right after the render (a layout effect), not after the next paint.
 */
export function useAsync<T>(fn: () => Promise<T>, deps: unknown[]): Async<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  useLayoutEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true, error: undefined }));
    fn().then(
      (data) => live && setState({ data, loading: false }),
      (error) => live && setState((s) => ({ data: s.data, error, loading: false })),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  return { data: state.data, error: state.error, loading: state.loading, reload: () => setTick((t) => t + 1) };
}

/**
 * A filtered list the admin API pages newest first with cursors (`before` → `next_cursor`):
 * the filter form being edited, the filters applied, and the Newer/Older pager.
 */
export function useCursorList<F extends Record<string, string>, T extends { next_cursor: string | null }>(
  initial: F,
  load: (applied: F, before?: string) => Promise<T>,
) {
  const [form, setForm] = useState(initial);
  const [applied, setApplied] = useState(initial);
  const [pages, setPages] = useState<string[]>([]); // cursors of the pages before this one
  const [cursor, setCursor] = useState<string | undefined>();
  const list = useAsync(() => load(applied, cursor), [applied, cursor]);
  return {
    ...list,
    form,
    /** The filters of the list shown (the form's, as of the last Apply filters). */
    applied,
    /** onInput handler for the form field `k`. */
    set: (k: keyof F) => (e: Event) => setForm({ ...form, [k]: (e.currentTarget as HTMLInputElement).value }),
    /** The form field `k` as a TextField's value and onValue. */
    field: (k: keyof F): Bound => ({ value: form[k] ?? '', onValue: (v) => setForm({ ...form, [k]: v }) }),
    /** onSubmit of the filter form: back to the first page with the form's filters. */
    apply: (e: Event) => {
      e.preventDefault();
      setPages([]);
      setCursor(undefined);
      setApplied(form);
    },
    pager: (info: string) => (
      <div class="pager">
        <span class="pager-info">{list.data ? info : ''}</span>
        <div class="page-actions">
          <Button
            icon="chevronLeft"
            disabled={!pages.length}
            onClick={() => {
              const p = [...pages];
              const prev = p.pop();
              setPages(p);
              setCursor(prev || undefined);
            }}
          >
            Newer
          </Button>
          <Button
            disabled={!list.data?.next_cursor}
            onClick={() => {
              setPages([...pages, cursor ?? '']);
              setCursor(list.data!.next_cursor!);
            }}
          >
            Older
          </Button>
        </div>
      </div>
    ),
  };
}

/** A text field's value and its setter, spread onto a TextField. */
export interface Bound {
  value: string;
  onValue: (value: string) => void;
}

/** The end of a filter form: From and To (local date and time), then Apply filters. */
export function DateRangeApply({ since, until }: { since: Bound; until: Bound }) {
  return (
    <>
      <TextField label="From" type="datetime-local" {...since} />
      <TextField label="To" type="datetime-local" {...until} />
      <Button type="submit" variant="primary" icon="filter">
        Apply filters
      </Button>
    </>
  );
}

/** The message for one field, from an ApiError's `details.fields`. */
export function fieldError(e: unknown, name: string): string | undefined {
  return e instanceof ApiError ? e.fields[name] : undefined;
}

/** The error not tied to any of `fields`, for a note above the form. */
export function formError(e: unknown, fields: string[]): unknown {
  if (!e) return undefined;
  if (e instanceof ApiError && Object.keys(e.fields).length && Object.keys(e.fields).every((f) => fields.includes(f)))
    return undefined;
  return e;
}

/**
 * A screen's one-click actions (enable, unlink, retry…): `run(key, work, done)` runs `work`
 * with `busy` set to `key`, then says `done` in a toast and calls `after` (the screen's
 * reload), or says why it failed.
 */
export function useActions(after: () => void) {
  const [busy, setBusy] = useState<string | null>(null);
  const run = async (key: string, work: () => Promise<unknown>, done: string) => {
    setBusy(key);
    try {
      await work();
      toast(done);
      after();
    } catch (e) {
      toast((e as Error).message, 'error');
    } finally {
      setBusy(null);
    }
  };
  return { busy, run };
}

/**
 * A form's submit handler: `run` is sent once at a time (`busy` meanwhile) and its error
 * is kept for the fields (fieldError, formError) until the next submit.
 */
export function useSubmit(run: () => Promise<void>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const submit = async (e?: Event) => {
    e?.preventDefault();
    if (busy) return;
    setBusy(true);
    setError(undefined);
    try {
      await run();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, submit, setError };
}
