/**
 * The panel's screens, in menu order: the one list that the router (main.tsx), the menu
 * (components/shell.tsx), the page titles and the Chromium tour (test/panel/tour.test.ts)
 * read. Data only, no components, so the tour can import it too; main.tsx maps each `id`
 * to its component (a `Record<ScreenId, …>`, so a screen without one fails `tsc`).
 * docs/admin.md names the screens.
 */
import type { IconName } from './components/icons';

export interface ScreenEntry {
  /** Stable name: the component's key in main.tsx and the tour's screenshot name. */
  id: string;
  /** The first part of the route: `#/keys`, `#/keys/…`; '' is the dashboard. */
  path: string;
  /** The menu entry, the page's `<h1>` and its document title. */
  title: string;
  icon: IconName;
}

export const SCREENS = [
  { id: 'dashboard', path: '', title: 'Dashboard', icon: 'dashboard' },
  { id: 'keys', path: 'keys', title: 'API keys', icon: 'key' },
  { id: 'settings', path: 'settings', title: 'Settings', icon: 'settings' },
  { id: 'templates', path: 'templates', title: 'Mail templates', icon: 'template' },
  { id: 'mail-jobs', path: 'mail', title: 'Mail jobs', icon: 'mail' },
  { id: 'users', path: 'users', title: 'Users', icon: 'users' },
  { id: 'data', path: 'data', title: 'Data', icon: 'data' },
  { id: 'extensions', path: 'extensions', title: 'Extensions', icon: 'puzzle' },
  { id: 'jobs', path: 'jobs', title: 'Jobs', icon: 'refresh' },
  { id: 'audit', path: 'audit', title: 'Audit log', icon: 'audit' },
  { id: 'logs', path: 'logs', title: 'Logs', icon: 'activity' },
  { id: 'backups', path: 'backups', title: 'Backups', icon: 'archive' },
] as const satisfies readonly ScreenEntry[];

export type ScreenId = (typeof SCREENS)[number]['id'];

/** The screen a route's first part names, if any. */
export function screenAt(path: string): (typeof SCREENS)[number] | undefined {
  return SCREENS.find((s) => s.path === path);
}

/** A screen's title, for its page header. */
export function titleOf(id: ScreenId): string {
  return SCREENS.find((s) => s.id === id)!.title;
}
