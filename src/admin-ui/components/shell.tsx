/**
 * The signed-in frame: navigation by the screen names of docs/admin.md, theme toggle, change
 * of one's own password, sign out; collapses to a menu button on a phone. When the session
 * is lost mid-work a sign-in dialog opens over the current screen, so what was typed stays.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { signal } from '@preact/signals';
import { Icon, Logo } from './icons';
import { SCREENS } from '../screen-list';
import { Toasts, clearErrorToasts } from './toast';
import { ConfirmHost } from './ui';
import { get, post, session, sessionLost, setSession, type AdminData } from '../api';
import { route } from '../router';
import { theme, toggleTheme } from '../theme';
import { SignInForm } from '../screens/sign-in';
import { ChangePassword } from '../screens/password';

/** Where `/api/docs` lives: the public listener's base when the split is on. */
export const docsUrl = signal('/api/docs');

export interface PlatformFacts {
  /** database.url is set (external PostgreSQL): no backups from the panel. */
  external: boolean;
}
let facts: Promise<PlatformFacts> | undefined;

/** Facts the panel reads from the settings once per sign-in. */
export function platformFacts(): Promise<PlatformFacts> {
  return (facts ??= (async () => {
    try {
      const { settings } = await get<AdminData<'settings'>>('/settings');
      const find = (k: string) => settings.find((s) => s.key === k);
      const v = (k: string) => find(k)?.value;
      if (v('web.public_api_separate')) {
        const base =
          String(v('web.public_base_url') || '') ||
          `${location.protocol}//${location.hostname}:${v('web.public_port')}`;
        docsUrl.value = base.replace(/\/$/, '') + '/api/docs';
      }
      // A secret's value is never shown, but where it comes from is.
      return { external: (find('database.url')?.source ?? 'default') !== 'default' };
    } catch {
      facts = undefined;
      return { external: false };
    }
  })());
}

function active(path: string): boolean {
  return path === (route.value.parts[0] ?? '');
}

export function Shell({ children }: { children: ComponentChildren }) {
  const [open, setOpen] = useState(false);
  const [passwordOpen, setPasswordOpen] = useState(false);
  useEffect(() => void platformFacts(), []);
  useEffect(() => {
    setOpen(false);
    clearErrorToasts();
  }, [route.value.path]);
  // Keyboard: Esc closes the phone menu; "/" (outside a field) goes to the screen's search box.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape' && open) {
        setOpen(false);
        return;
      }
      if (e.key !== '/' || e.ctrlKey || e.metaKey || e.altKey) return;
      const at = document.activeElement as HTMLElement | null;
      if (at && (at.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(at.tagName))) return;
      if (document.querySelector('dialog[open]')) return;
      const search = document.querySelector<HTMLInputElement>('main input[type=search], main [data-search]');
      if (!search) return;
      e.preventDefault();
      search.focus();
      search.select();
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, [open]);
  const signOut = async () => {
    await post('/auth/logout').catch(() => {}); // signed out here either way; the server's session expires on its own
    facts = undefined;
    setSession(null);
  };
  return (
    <div class={`shell ${open ? 'nav-open' : ''}`}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <button
          type="button"
          class="icon-btn menu-btn"
          aria-label={open ? 'Close menu' : 'Open menu'}
          aria-expanded={open}
          onClick={() => setOpen(!open)}
        >
          <Icon name={open ? 'x' : 'menu'} />
        </button>
        <a class="brand" href="#/">
          <Logo /> <span>Basalt</span>
        </a>
        <div class="topbar-end">
          <span class="who" title="Signed in as">
            {session.value?.admin.email}
          </span>
          <button
            type="button"
            class="icon-btn"
            aria-label={theme.value === 'dark' ? 'Switch to light theme' : 'Switch to dark theme'}
            onClick={toggleTheme}
          >
            <Icon name={theme.value === 'dark' ? 'sun' : 'moon'} />
          </button>
          <button
            type="button"
            class="icon-btn"
            aria-label="Change password"
            title="Change password"
            onClick={() => setPasswordOpen(true)}
          >
            <Icon name="lock" />
          </button>
          <button type="button" class="icon-btn" aria-label="Sign out" title="Sign out" onClick={signOut}>
            <Icon name="logout" />
          </button>
        </div>
      </header>
      <nav class="sidenav" aria-label="Main">
        <ul>
          {SCREENS.map((n) => (
            <li key={n.id}>
              <a
                href={'#/' + n.path}
                class={active(n.path) ? 'active' : ''}
                aria-current={active(n.path) ? 'page' : undefined}
              >
                <Icon name={n.icon} /> {n.title}
              </a>
            </li>
          ))}
          <li class="nav-sep">
            <a href={docsUrl.value} target="_blank" rel="noopener">
              <Icon name="book" /> API reference <Icon name="external" size={14} class="icon ext" />
            </a>
          </li>
        </ul>
      </nav>
      {/* A pointer shortcut; keyboards and screen readers have the menu button: hidden from them. */}
      <div class="scrim" aria-hidden="true" onClick={() => setOpen(false)} />
      <main id="main" class="content" tabIndex={-1}>
        {children}
      </main>
      {passwordOpen && (
        <ChangePassword email={session.value?.admin.email ?? ''} onClose={() => setPasswordOpen(false)} />
      )}
      {sessionLost.value && <SessionLost />}
      <ConfirmHost />
      <Toasts />
    </div>
  );
}

function SessionLost() {
  return (
    <div class="overlay">
      <div class="card signin-card" role="dialog" aria-modal="true" aria-label="Sign in again">
        <h2>Your session ended</h2>
        <p class="muted">Sign in again to continue. What you typed on this screen is kept; send it again afterwards.</p>
        <SignInForm email={session.value?.admin.email} />
      </div>
    </div>
  );
}
