/**
 * Who is calling the Files API. A Bearer access token means a site user, who sees
 * only their own files; otherwise an API key with a files permission, which acts
 * for a backend and sees every file. `files:upload` covers upload and delete,
 * `files:download` covers list, metadata and download, `files:*` both.
 */
import type { ExtensionContext } from 'basalt';

export type Caller = { type: 'user'; id: string } | { type: 'key'; id: string };

export async function caller(ctx: ExtensionContext, request: Request, permission: 'files:upload' | 'files:download'): Promise<Caller> {
  if (request.headers.has('authorization')) return { type: 'user', id: (await ctx.user(request)).userId };
  if (request.headers.has('x-api-key')) return { type: 'key', id: (await ctx.apiKey(request, permission)).id };
  throw ctx.errors.unauthorized(`Send a user's access token (Authorization: Bearer …) or an API key with the ${permission} or files:* permission (X-API-Key).`);
}
