/**
 * Schemas of the realtime endpoint: the ticket answer, and the `data` of each event the
 * stream carries (for the OpenAPI document; docs/realtime.md, "Events").
 */
import { t } from 'elysia';

export const StreamQuery = t.Object({
  tables: t.Optional(
    t.String({ description: 'Comma-separated tables of the data schema, e.g. notes,posts', maxLength: 4000 }),
  ),
  channels: t.Optional(
    t.String({ description: "Comma-separated extensions' channels (<extension>:<name>)", maxLength: 4000 }),
  ),
  ticket: t.Optional(
    t.String({ description: 'A one-time ticket (POST /api/v1/realtime/ticket) in place of headers', maxLength: 100 }),
  ),
});

export const TicketData = t.Object({
  ticket: t.String({ description: 'Single use, for GET /api/v1/realtime?ticket=…' }),
  expires_at: t.String({ format: 'date-time', description: '60 seconds from now' }),
});

export const EmptyBody = t.Optional(t.Object({}, { additionalProperties: false }));

/** `event: change`. */
export const ChangeEvent = t.Object(
  {
    table: t.String(),
    action: t.Union([t.Literal('insert'), t.Literal('update'), t.Literal('delete')]),
    row: t.Record(t.String(), t.Unknown(), {
      description:
        'insert/update: the row as the subscriber reads it through the Database API; delete: the primary-key columns only',
    }),
  },
  { title: 'RealtimeChange', description: 'event: change (id: the event id, increasing in commit order)' },
);

/** `event: message`: an extension's message. */
export const MessageEvent = t.Object(
  { channel: t.String(), data: t.Unknown() },
  { title: 'RealtimeMessage', description: "event: message — an extension's message on one of its channels" },
);

/** `event: reset`, `event: expired`, `event: revoked`. */
export const ControlEvent = t.Object(
  { reason: t.Optional(t.String()) },
  {
    title: 'RealtimeControl',
    description:
      'event: reset (the resume point is past retention: reload, then continue), event: expired (the access token expired: reconnect with a fresh one), event: revoked (session, user or key ended; data.reason)',
  },
);
