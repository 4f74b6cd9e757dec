/**
 * Error codes of the realtime endpoint (docs/realtime.md), declared once. Refusals happen
 * before the stream starts, in format A; a stream that has started ends with an event.
 */
import { defineErrors } from '../../http/errors';

export const RealtimeErrors = defineErrors({
  invalid: {
    status: 400,
    code: 'validation_error',
    message: (field: string, problem: string) => `${field}: ${problem}`,
    extra: (field: string) => ({ details: { field } }),
  },
  notEnabled: {
    status: 400,
    code: 'realtime_not_enabled',
    message: (table: string) =>
      `Table '${table}' does not emit changes; enable it in a migration: SELECT basalt.realtime_enable('${table}');`,
  },
  /** A table the key's whitelist, or the role's grants, do not cover. */
  forbidden: {
    status: 403,
    code: 'forbidden',
    message: (table: string) => `This caller may not read entity '${table}'.`,
  },
  /** Anonymous and refused: credentials might help. */
  unauthorized: {
    status: 401,
    code: 'unauthorized',
    message: (table: string) =>
      `Reading '${table}' needs credentials: a user's access token (Authorization: Bearer) or a service key (X-API-Key).`,
  },
  /** A channel its extension's rule (ctx.realtime.authorize) does not let this caller follow. */
  channelForbidden: {
    status: 403,
    code: 'forbidden',
    message: (channel: string) => `This caller may not follow channel '${channel}' (its extension's rule refuses it).`,
  },
  /** Anonymous and refused by the channel's rule: credentials might help. */
  channelUnauthorized: {
    status: 401,
    code: 'unauthorized',
    message: (channel: string) =>
      `Following '${channel}' needs credentials: a user's access token (Authorization: Bearer) or a service key (X-API-Key).`,
  },
  invalidTicket: {
    status: 401,
    code: 'invalid_ticket',
    message: 'The ticket is unknown, used or expired; ask for a new one (POST /api/v1/realtime/ticket).',
  },
  tooMany: {
    status: 429,
    code: 'too_many_connections',
    message: (limit: string) => `Too many realtime streams (${limit}); close one first.`,
    extra: () => ({ retryAfter: 5 }),
  },
});
