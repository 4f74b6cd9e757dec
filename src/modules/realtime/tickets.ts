/**
 * One-time tickets for browsers' EventSource, which cannot send headers (docs/realtime.md,
 * "Tickets"): `POST /api/v1/realtime/ticket` with the usual credentials stores who asked
 * under the SHA-256 of a random ticket, for 60 s; `GET /api/v1/realtime?ticket=…` spends
 * it (one DELETE … RETURNING, so of two uses racing one wins, on any instance). Only the
 * hash is stored: the ticket in a URL is worthless once used, expired, or read from the
 * database.
 *
 * Reconnection: spending a ticket also issues a resume credential for that stream, a
 * cookie (HttpOnly, SameSite=Strict, scoped to the realtime path) named after the ticket.
 * EventSource reconnects by itself with the same URL — the spent ticket in it — and the
 * cookie; the pair (never either alone) opens the stream again, with `Last-Event-ID`, until
 * the cookie expires: for a user, when the access token the ticket was issued with does.
 */
import type { Queryable } from '../../db/engine';
import { sha256 } from '../auth/tokens';
import type { Principal } from './principal';

export const TICKET_SECONDS = 60;
/** How long a key's or anon's stream may be resumed with its cookie (a user's: until their token expires). */
export const RESUME_SECONDS = 3600;

export type TicketHolder =
  | { kind: 'key'; keyId: string }
  | {
      kind: 'user';
      userId: string;
      sessionId: string;
      tokenExpiresAt: number;
      claims: Record<string, unknown>;
    }
  | { kind: 'anon' };

export function holderOf(p: Principal): TicketHolder {
  if (p.kind === 'key') return { kind: 'key', keyId: p.key.id };
  if (p.kind === 'user')
    return {
      kind: 'user',
      userId: p.userId,
      sessionId: p.sessionId,
      tokenExpiresAt: p.tokenExpiresAt,
      claims: p.claims,
    };
  return { kind: 'anon' };
}

const TICKET = /^rt_[A-Za-z0-9_-]{43}$/;

function newSecret(): string {
  return 'rt_' + Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url');
}

async function store(q: Queryable, hash: Uint8Array, holder: TicketHolder, expires: Date, resumeOf: Uint8Array | null) {
  await q.query(
    `INSERT INTO basalt.realtime_tickets (hash, kind, key_id, user_id, session_id, token_expires_at, claims, resume_of, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9)`,
    [
      hash,
      holder.kind,
      holder.kind === 'key' ? holder.keyId : null,
      holder.kind === 'user' ? holder.userId : null,
      holder.kind === 'user' ? holder.sessionId : null,
      holder.kind === 'user' ? new Date(holder.tokenExpiresAt) : null,
      holder.kind === 'user' ? JSON.stringify(holder.claims) : null,
      resumeOf,
      expires,
    ],
  );
}

export async function issueTicket(q: Queryable, holder: TicketHolder): Promise<{ ticket: string; expires_at: string }> {
  const ticket = newSecret();
  const expires = new Date(Date.now() + TICKET_SECONDS * 1000);
  await store(q, sha256(ticket), holder, expires, null);
  // Spent and expired tickets go in passing; there are never many.
  await q.query('DELETE FROM basalt.realtime_tickets WHERE expires_at < now()');
  return { ticket, expires_at: expires.toISOString() };
}

interface Row {
  kind: TicketHolder['kind'];
  key_id: string | null;
  user_id: string | null;
  session_id: string | null;
  token_expires_at: Date | null;
  claims: Record<string, unknown> | null;
  live: boolean;
}
const RETURNED = 'kind, key_id, user_id, session_id, token_expires_at, claims, expires_at > now() AS live';

function holderFrom(r: Row | undefined): TicketHolder | null {
  if (!r?.live) return null;
  if (r.kind === 'key') return { kind: 'key', keyId: r.key_id! };
  if (r.kind === 'user')
    return {
      kind: 'user',
      userId: r.user_id!,
      sessionId: r.session_id!,
      tokenExpiresAt: new Date(r.token_expires_at!).getTime(),
      claims: r.claims ?? { sub: r.user_id },
    };
  return { kind: 'anon' };
}

/** Spend a ticket: its holder, or null when unknown, spent or expired. Resume credentials are not tickets. */
export async function spendTicket(q: Queryable, ticket: string): Promise<TicketHolder | null> {
  if (!TICKET.test(ticket)) return null;
  const { rows } = await q.query<Row>(
    `DELETE FROM basalt.realtime_tickets WHERE hash = $1 AND resume_of IS NULL RETURNING ${RETURNED}`,
    [sha256(ticket)],
  );
  return holderFrom(rows[0]);
}

/** The cookie that resumes the stream of `ticket` (a name per ticket: a page may follow several streams). */
export function resumeCookieName(ticket: string): string {
  return `basalt_rt_${Buffer.from(sha256(ticket)).toString('hex').slice(0, 16)}`;
}

/**
 * After `ticket` was spent by `holder`: a resume credential for its stream, stored under
 * its hash and bound to the ticket, valid until `expires` (a user's token expiry, else
 * RESUME_SECONDS).
 */
export async function issueResume(
  q: Queryable,
  ticket: string,
  holder: TicketHolder,
): Promise<{ secret: string; maxAgeSeconds: number }> {
  const secret = newSecret();
  const until = holder.kind === 'user' ? holder.tokenExpiresAt : Date.now() + RESUME_SECONDS * 1000;
  await store(q, sha256(secret), holder, new Date(until), sha256(ticket));
  return { secret, maxAgeSeconds: Math.max(1, Math.floor((until - Date.now()) / 1000)) };
}

/** The holder of the resume credential `secret` for the stream of `ticket`, or null. Not spent: each reconnect uses it. */
export async function resumeHolder(q: Queryable, ticket: string, secret: string): Promise<TicketHolder | null> {
  if (!TICKET.test(ticket) || !TICKET.test(secret)) return null;
  const { rows } = await q.query<Row>(
    `SELECT ${RETURNED} FROM basalt.realtime_tickets WHERE hash = $1 AND resume_of = $2`,
    [sha256(secret), sha256(ticket)],
  );
  return holderFrom(rows[0]);
}
