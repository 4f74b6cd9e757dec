/** Success and failure notices that fade on their own; errors stay until closed. */
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
  if (kind === 'ok') setTimeout(() => dismiss(id), 3500);
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
