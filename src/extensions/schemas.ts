/**
 * Response schemas of the envelopes, so extension routes document their real bodies:
 * the platform's own (src/http/envelope-schemas.ts) for the areas extension routes live
 * in (src/http/areas.ts), under the names extensions use.
 */
import type { TObject, TSchema } from '@sinclair/typebox';
import { KindGuard } from '@sinclair/typebox';
import { AREA } from '../http/areas';
import { successOf } from '../http/envelope-schemas';

const moduleOk = successOf(AREA.module);
const filesOk = successOf(AREA.files);

/** Format B success body around `data` (module routes' default envelope, the module area's). */
export function envelopeB<T extends TSchema>(data: T) {
  return moduleOk(data);
}

/** Format C success body (the files area's): `success: true` and the payload's fields (a `t.Object`) at the top level. */
export function envelopeC<T extends TObject>(payload: T) {
  if (!KindGuard.IsObject(payload))
    throw new TypeError('envelopeC(payload): the payload must be a t.Object(…), whose fields sit beside success');
  return filesOk(payload);
}
