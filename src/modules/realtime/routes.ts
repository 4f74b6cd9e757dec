/**
 * HTTP of realtime (docs/realtime.md): the event stream and its tickets, format A errors
 * before a stream starts. Credentials as on the Database API: a service key (X-API-Key,
 * db:query, its whitelist), a user's Bearer token, or nobody (anon); or a ticket in their
 * place. Order: credentials (401), then each table and each channel whose extension has a
 * rule (403, 401 for anon without credentials), then whether the tables emit changes
 * (400), then the limits (429).
 */
import { Elysia } from 'elysia';
import { rootOf, type AreaFacts } from '../../http/areas';
import type { Basalt } from '../../services';
import { guardInputs } from '../../guards';
import { keyChecks, requirePermission, sendsApiKey } from '../../http/api-key-guard';
import { bearerToken, requestUser, sendsAuthorization } from '../../http/user-guard';
import { requestInfo } from '../../http/request-info';
import { successResponse } from '../../http/envelope';
import { errorsOf, successOf } from '../../http/envelope-schemas';
import { optionalJson } from '../../http/optional-json';
import { RealtimeErrors } from './errors';
import { STREAM_EVENT_DISCRIMINATOR, StreamEvents, StreamQuery, TicketBody, TicketData } from './model';
import { tokenExpiry, type Principal } from './principal';
import { CHANNEL_NAME } from './service';
import { resumeCookieName } from './tickets';
import { userClaims } from '../database/caller';

const MAX_NAMES = 50;
const security: Record<string, string[]>[] = [{ ApiKey: [] }, { Bearer: [] }];

function names(field: string, raw: string | undefined, check?: RegExp): string[] {
  if (!raw) return [];
  const list = [...new Set(raw.split(',').map((s) => s.trim()))];
  if (list.length > MAX_NAMES) throw RealtimeErrors.invalid(field, `at most ${MAX_NAMES} names`);
  for (const n of list) {
    if (!n || n.length > 200) throw RealtimeErrors.invalid(field, 'names are non-empty, comma-separated');
    if (check && !check.test(n)) throw RealtimeErrors.invalid(field, `'${n}' is not <extension>:<name>`);
  }
  return list;
}

/** The tables and channels a stream (its query) or a ticket (its body) names. */
function following(from: { tables?: string; channels?: string }): { tables: string[]; channels: string[] } {
  return { tables: names('tables', from.tables), channels: names('channels', from.channels, CHANNEL_NAME) };
}

/** `Last-Event-ID`: a non-negative integer; anything else cannot be resumed (→ reset). */
function lastEventId(request: Request): number | undefined {
  const v = request.headers.get('last-event-id');
  if (v === null || v.trim() === '') return undefined;
  return /^\d{1,15}$/.test(v.trim()) ? Number(v.trim()) : -1;
}

export function realtimeRoutes(p: Basalt, area: AreaFacts) {
  const inputs = guardInputs(p, p.services);
  const keys = keyChecks(inputs);
  const svc = () => p.services.realtime;

  /** The caller of a request, by its headers, as the Database API admits callers. */
  async function principalOf(request: Request): Promise<Principal> {
    const ip = requestInfo(request).ip;
    const key = sendsApiKey(request)
      ? await keys.require(request, { publicPrefix: true })
      : await keys.publicAccess(request);
    if (sendsAuthorization(request)) {
      const token = bearerToken(request);
      const u = await requestUser(inputs.authenticate, request);
      return {
        kind: 'user',
        userId: u.userId,
        sessionId: u.sessionId,
        claims: userClaims(token!, await p.services.auth.me(u)),
        tokenExpiresAt: tokenExpiry(token!),
      };
    }
    if (key?.type === 'service') {
      requirePermission(key, 'db:query');
      return { kind: 'key', key };
    }
    return { kind: 'anon', ip, withKey: !!key };
  }

  return new Elysia({ name: 'basalt.realtime', prefix: rootOf(area) })
    .get(
      '',
      async ({ query, request }) => {
        const { tables, channels } = following(query);
        if (!tables.length && !channels.length)
          throw RealtimeErrors.invalid('tables', 'name at least one table (or channel) to follow');
        // A ticket stands for the headers EventSource cannot send; it was issued behind the access-mode gate.
        const headers: Record<string, string> = {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-store',
          'x-accel-buffering': 'no',
        };
        let principal: Principal;
        if (query.ticket) {
          // EventSource reconnects with the same URL (the ticket spent) and the cookie its first answer set.
          const cookies = new Bun.CookieMap(request.headers.get('cookie') ?? '');
          const info = requestInfo(request);
          const spent = await svc().spend(
            query.ticket,
            info.ip,
            true,
            cookies.get(resumeCookieName(query.ticket)) ?? undefined,
          );
          principal = spent.principal;
          // Who the ticket stands for, for the request log (docs/logs.md), as the guards note a header's caller.
          if (principal.kind === 'user') info.userId = principal.userId;
          else if (principal.kind === 'key') info.keyId = principal.key.id;
          if (spent.resume)
            headers['set-cookie'] = new Bun.Cookie(spent.resume.name, spent.resume.secret, {
              path: rootOf(area),
              maxAge: spent.resume.maxAgeSeconds,
              httpOnly: true,
              sameSite: 'strict',
              secure: info.https ?? false,
            }).serialize();
        } else principal = await principalOf(request);
        const stream = await svc().open(principal, { tables, channels, lastEventId: lastEventId(request) });
        return new Response(stream.body, { headers });
      },
      {
        query: StreamQuery,
        detail: {
          summary: 'Follow row changes (server-sent events)',
          description:
            'text/event-stream of `event: change` (id increasing in commit order; data: RealtimeChange) for each change to the named tables the caller may see, ' +
            "`event: message` (data: RealtimeMessage) for extensions' channels, `event: reset` when Last-Event-ID is past realtime.retention_seconds (reload, then continue), " +
            '`event: expired` when the access token expires, `event: revoked` when the session, user or key ends; a comment line every realtime.heartbeat_seconds (15 s). ' +
            'Send Last-Event-ID to resume (EventSource does). Credentials as on the Database API, or ?ticket= (POST /api/v1/realtime/ticket) for EventSource: ' +
            'the first use spends the ticket and sets a cookie with which the same URL reconnects (EventSource does that by itself). ' +
            'Refused before the stream starts: 401 (no or bad credentials; anon for a table not granted to basalt_anon or a channel its extension keeps from anon), ' +
            "403 (a table outside the whitelist or grants, a channel its extension's rule refuses), " +
            '400 realtime_not_enabled (a table that emits no changes: basalt.realtime_enable), 429 too_many_connections (realtime.max_connections*).',
          'x-codes': {
            400: ['validation_error', 'realtime_not_enabled'],
            401: ['unauthorized', 'invalid_ticket', 'token_expired', 'session_revoked'],
            403: ['forbidden', 'account_disabled'],
            429: ['too_many_connections'],
          },
          responses: {
            200: {
              description:
                'The event stream. Each event is `id:` (when it has one), `event:` and one `data:` line of JSON; one schema per event, told apart by `event`. ' +
                'Opened with a ticket, the answer also sets the cookie that resumes this stream (EventSource reconnects with the same URL and it).',
              headers: {
                'Set-Cookie': {
                  schema: { type: 'string' },
                  description:
                    'With ?ticket= only: basalt_rt_<16 hex>=…; Path=/api/v1/realtime; HttpOnly; SameSite=Strict — with the same ticket in the URL it opens this stream again (a user: until their access token expires; a key or anon: 1 hour).',
                },
              },
              content: {
                'text/event-stream': {
                  schema: { oneOf: StreamEvents, discriminator: STREAM_EVENT_DISCRIMINATOR },
                },
              },
            },
          },
          security,
        },
      },
    )
    .post(
      '/ticket',
      async ({ request, body }) =>
        successResponse(request, await svc().ticket(await principalOf(request), following(body ?? {}))),
      {
        parse: optionalJson,
        // Before validation, which would drop an unknown key (a misspelt `table`) without a word.
        transform: ({ body }) => {
          if (typeof body !== 'object' || body === null) return;
          for (const k in body)
            if (k !== 'tables' && k !== 'channels')
              throw RealtimeErrors.invalid(k, 'unknown field; a ticket takes tables and channels');
        },
        body: TicketBody,
        response: { 200: successOf(area)(TicketData), ...errorsOf(area)(400, 401, 403) },
        detail: {
          summary: 'A one-time ticket for EventSource',
          description:
            'With the credentials GET /api/v1/realtime takes (X-API-Key or Authorization): a ticket for `?ticket=`, single use, valid 60 s, so no token goes in a URL. Only its hash is stored. ' +
            'With `tables` (and `channels`) in the body, they are checked now as the stream would check them: a table the caller may not follow answers 401/403, one not enabled for realtime 400, here where a browser can read the answer.',
          'x-codes': {
            400: ['validation_error', 'realtime_not_enabled'],
            401: ['unauthorized', 'token_expired', 'session_revoked'],
            403: ['forbidden'],
          },
          security,
        },
      },
    );
}
