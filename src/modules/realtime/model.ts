/**
 * Schemas of the realtime endpoint: the ticket answer, and the `data` of each event the
 * stream carries (for the OpenAPI document; docs/realtime.md, "Events").
 */
import { t, type TSchema } from 'elysia';

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

/** `event: change`: its data. */
export const ChangeEvent = t.Object(
  {
    table: t.String(),
    action: t.Union([t.Literal('insert'), t.Literal('update'), t.Literal('delete')]),
    row: t.Record(t.String(), t.Unknown(), {
      description:
        'insert/update: the row as the subscriber reads it through the Database API; delete: the primary-key columns only',
    }),
  },
  { title: 'RealtimeChange', description: 'The data of event: change' },
);

/** `event: message`: an extension's message. */
export const MessageEvent = t.Object(
  { channel: t.String({ description: '<extension>:<name>' }), data: t.Unknown() },
  {
    title: 'RealtimeMessage',
    description: "The data of event: message — an extension's message on one of its channels",
  },
);

/**
 * One event of the stream as a named schema: its `event:` name, its `id:` (when it has
 * one) and its `data:` line's JSON. A client generator gets one type per event, told apart
 * by `event` (the discriminator).
 */
function sseEvent(name: string, title: string, data: TSchema, description: string, id?: string) {
  return t.Object(
    {
      ...(id ? { id: t.String({ description: id }) } : {}),
      event: t.Literal(name),
      data,
    },
    { title, description },
  );
}

const EVENT_ID = 'The event id: increasing in commit order; send it back as Last-Event-ID to resume';

/** The events of `GET /api/v1/realtime` (docs/realtime.md, "Events"), each a named component. */
export const StreamEvents = [
  sseEvent('change', 'RealtimeChangeEvent', ChangeEvent, 'A row changed that the subscriber may see.', EVENT_ID),
  sseEvent('message', 'RealtimeMessageEvent', MessageEvent, "An extension's message on a followed channel.", EVENT_ID),
  sseEvent(
    'reset',
    'RealtimeResetEvent',
    t.Object({}),
    'Last-Event-ID was older than realtime.retention_seconds (or unknown): reload your data; the stream goes on live from this id.',
    'Where the stream continues from',
  ),
  sseEvent(
    'expired',
    'RealtimeExpiredEvent',
    t.Object({}),
    'The access token expired; the stream ends. Reconnect with a fresh token or ticket and Last-Event-ID: nothing is lost.',
  ),
  sseEvent(
    'revoked',
    'RealtimeRevokedEvent',
    t.Object({
      reason: t.Union([t.Literal('session_revoked'), t.Literal('account_disabled'), t.Literal('key_revoked')]),
    }),
    'The session was revoked, the user disabled or the key revoked; the stream ends at once.',
  ),
];

/**
 * The discriminator's mapping: each `event` name to its component, so a generated client
 * types `event` as `"change"`, not as the component's name.
 */
export const STREAM_EVENT_MAPPING: Record<string, string> = Object.fromEntries(
  StreamEvents.map((e) => [e.properties.event.const, `#/components/schemas/${e.title}`]),
);
