/**
 * The `parse` hook of a route whose JSON body is optional (logout, transaction begin,
 * commit, rollback). Elysia's own parser drops a malformed JSON body when the body
 * schema is optional, so `{bad` would be served as if no body had been sent; here an
 * empty body is an empty object and anything else must be JSON (400 invalid_json,
 * docs/operations.md). The listener has already checked the type and the size
 * (src/http/server.ts).
 */
import { Errors } from './errors';

export async function optionalJson({ request }: { request: Request }): Promise<unknown> {
  const text = await request.text();
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    throw Errors.invalidJson();
  }
}
