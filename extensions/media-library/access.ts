/**
 * Who is calling the Files API. Every route takes the `userOrApiKey` guard
 * (docs/extensions.md): a Bearer access token means a site user, who sees only their
 * own files; otherwise an API key with the route's files permission, which acts for a
 * backend and sees every file. `files:upload` covers upload and delete,
 * `files:download` covers list, metadata and download, `files:*` both.
 */
import type { ApiKeyPrincipal, UserPrincipal } from 'basalt';

export type Caller = { type: 'user'; id: string } | { type: 'key'; id: string };

/** The caller the guard admitted, as a file owner. */
export function callerOf({ user, apiKey }: { user?: UserPrincipal; apiKey?: ApiKeyPrincipal }): Caller {
  if (user) return { type: 'user', id: user.userId };
  if (apiKey) return { type: 'key', id: apiKey.id };
  throw new Error('the userOrApiKey guard admitted no caller');
}
