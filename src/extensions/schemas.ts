/**
 * Response schemas of the envelopes, so extension routes document their real bodies:
 * the platform's own (src/http/envelope-schemas.ts), under the names extensions use.
 */
import type { TObject, TSchema } from '@sinclair/typebox';
import { KindGuard } from '@sinclair/typebox';
import { SuccessB, SuccessC } from '../http/envelope-schemas';

/** Format B success body around `data` (module routes' default envelope). */
export function envelopeB<T extends TSchema>(data: T) {
  return SuccessB(data);
}

/** Format C success body: `success: true` and the payload's fields (a `t.Object`) at the top level. */
export function envelopeC<T extends TObject>(payload: T) {
  if (!KindGuard.IsObject(payload))
    throw new TypeError('envelopeC(payload): the payload must be a t.Object(…), whose fields sit beside success');
  return SuccessC(payload);
}
