/**
 * A small hash router: `#/keys`, `#/users/42`, `#/setup?token=…`. The route is a signal;
 * screens read `route.value`. Fragments never reach the server (so the setup token
 * stays out of logs and Referer).
 */
import { signal } from '@preact/signals';

export interface Route {
  /** `/keys` */
  path: string;
  /** `['keys']` */
  parts: string[];
  query: URLSearchParams;
}

function parse(hash = location.hash): Route {
  const raw = hash.replace(/^#/, '') || '/';
  const [path = '/', q = ''] = raw.split('?', 2);
  const clean = '/' + path.split('/').filter(Boolean).map(decodeURIComponent).join('/');
  return { path: clean, parts: clean.split('/').filter(Boolean), query: new URLSearchParams(q) };
}

export const route = signal<Route>(parse());
/**
 * Counts arrivals at a new address from outside the screen (a link, back and forward, an
 * edited address): not a screen's own `navigate(…, replace)`, which only records its state.
 */
export const arrivals = signal(0);
addEventListener('hashchange', () => {
  route.value = parse();
  arrivals.value++;
});

export function href(path: string, params?: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params ?? {})) if (v) q.set(k, v);
  const s = q.toString();
  return (
    '#' +
    path
      .split('/')
      .map((p) => encodeURIComponent(p))
      .join('/') +
    (s ? '?' + s : '')
  );
}

export function navigate(path: string, params?: Record<string, string | undefined>, replace = false) {
  const target = href(path, params);
  if (replace) {
    history.replaceState(null, '', target);
    route.value = parse(target);
  } else if (location.hash !== target) {
    location.hash = target;
  }
}
