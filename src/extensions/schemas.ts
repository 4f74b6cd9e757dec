/** Response schemas of the envelopes, so extension routes document their real bodies. */
import { t, type TSchema } from 'elysia';

/** Format B success body around `data` (module routes' default envelope). */
export function envelopeB<T extends TSchema>(data: T) {
  return t.Object({
    success: t.Literal(true),
    data,
    meta: t.Object({ trace_id: t.String(), execution_ms: t.Number() }),
    errors: t.Array(t.Object({ code: t.String(), message: t.String(), details: t.Object({}, { additionalProperties: true }) }), { maxItems: 0 }),
  });
}

/** Format C success body: `success: true` and the payload's fields at the top level. */
export function envelopeC<T extends TSchema>(payload: T) {
  return t.Composite([t.Object({ success: t.Literal(true) }), payload as never]);
}
