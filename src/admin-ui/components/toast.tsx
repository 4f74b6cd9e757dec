/**
 * Success and failure notices that fade on their own (errors stay longer, to be read);
 * leaving a screen clears its errors, so none follows the operator to another one.
 */
import { signal } from '@preact/signals';
import { Icon } from './icons';

interface Toast {
  id: number;
  kind: 'ok' | 'error';
  text: string;
}

const toasts = signal<Toast[]>([]);
let next = 1;

export function toast(text: string, kind: Toast['kind'] = 'ok') {
  const id = next++;
  toasts.value = [...toasts.value, { id, kind, text }];
  setTimeout(() => dismiss(id), kind === 'ok' ? 3500 : 10_000);
}

/** Errors are about the screen they came from: gone when another screen opens. */
export function clearErrorToasts() {
  toasts.value = toasts.value.filter((t) => t.kind !== 'error');
}

function dismiss(id: number) {
  toasts.value = toasts.value.filter((t) => t.id !== id);
}

export function Toasts() {
  return (
    <div class="toasts" role="status" aria-live="polite">
      {toasts.value.map((t) => (
        <div key={t.id} class={`toast toast-${t.kind}`}>
          <Icon name={t.kind === 'ok' ? 'check' : 'alert'} />
          <span>{t.text}</span>
          <button type="button" class="icon-btn" aria-label="Dismiss" onClick={() => dismiss(t.id)}>
            <Icon name="x" size={16} />
          </button>
        </div>
      ))}
    </div>
  );
}
