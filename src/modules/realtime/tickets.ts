/**
 * One-time tickets for browsers' EventSource, which cannot send headers (docs/realtime.md,
 * "Tickets"): `POST /api/v1/realtime/ticket` with the usual credentials stores who asked
 * under the SHA-256 of a random ticket, for 60 s; `GET /api/v1/realtime?ticket=…` spends
 * it (one DELETE … RETURNING, so of two uses racing one wins, on any instance). Only the
 * hash is stored: the ticket in a URL is worthless once used, expired, or read from the
 * database.
 */
import type { Queryable } from '../../db/engine';
import { sha256 } from '../auth/tokens';
import type { Principal } from './principal';

export const TICKET_SECONDS = 60;

export type TicketHolder =
  | { kind: 'key'; keyId: string }
  | { kind: 'user'; userId: string; sessionId: string; tokenExpiresAt: number }
  | { kind: 'anon' };

export function holderOf(p: Principal): TicketHolder {
  if (p.kind === 'key') return { kind: 'key', keyId: p.key.id };
  if (p.kind === 'user')
    return { kind: 'user', userId: p.userId, sessionId: p.sessionId, tokenExpiresAt: p.tokenExpiresAt };
  return { kind: 'anon' };
}

export async function issueTicket(q: Queryable, holder: TicketHolder): Promise<{ ticket: string; expires_at: string }> {
  const ticket = 'rt_' + Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url');
  const expires = new Date(Date.now() + TICKET_SECONDS * 1000);
  await q.query(
    `INSERT INTO basalt.realtime_tickets (hash, kind, key_id, user_id, session_id, token_expires_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [
      sha256(ticket),
      holder.kind,
      holder.kind === 'key' ? holder.keyId : null,
      holder.kind === 'user' ? holder.userId : null,
      holder.kind === 'user' ? holder.sessionId : null,
      holder.kind === 'user' ? new Date(holder.tokenExpiresAt) : null,
      expires,
    ],
  );
  // Spent and expired tickets go in passing; there are never many.
  await q.query('DELETE FROM basalt.realtime_tickets WHERE expires_at < now()');
  return { ticket, expires_at: expires.toISOString() };
}

/** Spend a ticket: its holder, or null when unknown, spent or expired. */
export async function spendTicket(q: Queryable, ticket: string): Promise<TicketHolder | null> {
  if (!/^rt_[A-Za-z0-9_-]{43}$/.test(ticket)) return null;
  const { rows } = await q.query<{
    kind: TicketHolder['kind'];
    key_id: string | null;
    user_id: string | null;
    session_id: string | null;
    token_expires_at: Date | null;
    live: boolean;
  }>(
    `DELETE FROM basalt.realtime_tickets WHERE hash = $1
     RETURNING kind, key_id, user_id, session_id, token_expires_at, expires_at > now() AS live`,
    [sha256(ticket)],
  );
  const r = rows[0];
  if (!r?.live) return null;
  if (r.kind === 'key') return { kind: 'key', keyId: r.key_id! };
  if (r.kind === 'user')
    return {
      kind: 'user',
      userId: r.user_id!,
      sessionId: r.session_id!,
      tokenExpiresAt: new Date(r.token_expires_at!).getTime(),
    };
  return { kind: 'anon' };
}
