/**
 * Light and dark themes on CSS custom properties (styles.css). The system preference
 * applies until the operator picks one with the toggle; the pick is remembered.
 */
import { signal } from '@preact/signals';

export type Theme = 'light' | 'dark';
const KEY = 'basalt.theme';
const media = matchMedia('(prefers-color-scheme: dark)');

function stored(): Theme | null {
  try {
    const v = localStorage.getItem(KEY);
    return v === 'light' || v === 'dark' ? v : null;
  } catch {
    return null;
  }
}

export const theme = signal<Theme>(stored() ?? (media.matches ? 'dark' : 'light'));

function apply(t: Theme) {
  document.documentElement.dataset.theme = t;
}
apply(theme.value);
media.addEventListener('change', (e) => {
  if (!stored()) apply((theme.value = e.matches ? 'dark' : 'light'));
});

export function setTheme(t: Theme) {
  theme.value = t;
  apply(t);
  try {
    localStorage.setItem(KEY, t);
  } catch {
    /* private mode: the pick lasts for this page */
  }
}

export const toggleTheme = () => setTheme(theme.value === 'dark' ? 'light' : 'dark');
