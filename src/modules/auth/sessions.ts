/**
 * Sessions and refresh-token rotation, plus the per-request session check behind
 * every access token.
 *
 * The check runs on each authenticated request, so its answer is cached briefly.
 * A revocation removes the entry here and NOTIFYs every other instance on the
 * database, which drop theirs: a revoked session's access tokens stop at once.
 * The TTL only bounds staleness if a notification is ever lost.
 */
import { ANY_CHANGE, type Db, type Queryable } from '../../db/engine';
import { getOrCreateSecret } from '../../db/secrets';
import {
  derivedOpaqueToken,
  newOpaqueToken,
  type OpaqueToken,
  parseOpaqueToken,
  REFRESH_TOKEN_SECONDS,
  secretMatches,
} from './tokens';
import { publicUser, type PublicUser, type UserRow } from './users';

const CHANNEL = 'basalt_auth_sessions';
const CACHE_TTL_MS = 30_000;
const CACHE_MAX = 50_000;

export interface SessionState {
  userId: string;
  email: string;
  /** The user record as clients see it (served by /me without another query). */
  user: PublicUser;
  /** Why it cannot be used, or undefined when it is live. */
  problem?: 'revoked' | 'disabled';
}

/** Why a refresh token was refused; `sessionId` is set when the refusal revoked a session (reuse). */
export type Failure = { ok: false; reason: 'invalid' | 'reused' | 'revoked' | 'disabled'; sessionId?: string };
/** `successor`: the token was spent within the reuse interval; this is the token its rotation issued (still current). */
export type CheckResult = { ok: true; sessionId: string; userId: string; successor?: string } | Failure;
export type RotateResult =
  | { ok: true; sessionId: string; userId: string; refreshToken: string; amr: string[] }
  | Failure;

export class SessionStore {
  private cache = new Map<string, { state: SessionState | null; at: number }>();
  /** Bumped by every invalidation, so a lookup that raced with one is not cached. */
  private generation = 0;
  private unlisten?: () => Promise<void>;
  private invalidateListeners = new Set<(key: string) => void>();
  private successorKey?: Promise<Uint8Array>;

  private reuseIntervalSeconds: () => number;
  private refreshSeconds: () => number;

  /**
   * `reuseIntervalSeconds`: auth.refresh_reuse_interval_seconds; `refreshSeconds`:
   * auth.refresh_token_seconds. Both read on every use, so a change applies at once.
   */
  constructor(
    private db: Db,
    lifetimes: { reuseIntervalSeconds?: () => number; refreshSeconds?: () => number } = {},
  ) {
    this.reuseIntervalSeconds = lifetimes.reuseIntervalSeconds ?? (() => 10);
    this.refreshSeconds = lifetimes.refreshSeconds ?? (() => REFRESH_TOKEN_SECONDS);
  }

  /** The installation key refresh tokens' successors are derived under (kept in basalt.secrets). */
  private key(): Promise<Uint8Array> {
    this.successorKey ??= getOrCreateSecret(this.db, 'refresh_successor', 32).then((k) => Buffer.from(k, 'base64url'));
    this.successorKey.catch(() => (this.successorKey = undefined));
    return this.successorKey;
  }

  /** The successor a rotation of the token `parsed` issues: always the same one (tokens.ts derivedOpaqueToken). */
  private successorOf(key: Uint8Array, parsed: { id: string; secret: string }): OpaqueToken {
    return derivedOpaqueToken(key, `refresh:${parsed.id}.${parsed.secret}`);
  }

  /**
   * Call `fn` with every invalidation, from this instance or another: a session id, or
   * `user:<id>` for all of a user's (realtime streams check their session again). Returns a remover.
   */
  onInvalidate(fn: (key: string) => void): () => void {
    this.invalidateListeners.add(fn);
    return () => this.invalidateListeners.delete(fn);
  }

  async start(): Promise<void> {
    this.unlisten = await this.db.listen(CHANNEL, (payload) => this.forget(payload));
  }

  async stop(): Promise<void> {
    await this.unlisten?.().catch(() => {}); // stopping: the connection that listened is closing anyway
  }

  /** Create a session and its first refresh token (inside the caller's transaction). */
  async create(
    tx: Queryable,
    userId: string,
    meta: { ip: string; userAgent: string | null },
    amr: readonly string[] = ['pwd'],
  ): Promise<{ sessionId: string; refreshToken: string }> {
    const sessionId = crypto.randomUUID();
    await tx.query(
      `INSERT INTO basalt.auth_sessions (id, user_id, expires_at, ip, user_agent, amr)
       VALUES ($1, $2, now() + make_interval(secs => $3), $4, $5, $6::text[])`,
      [sessionId, userId, this.refreshSeconds(), meta.ip, meta.userAgent?.slice(0, 512) ?? null, amr],
    );
    const refreshToken = await this.issueRefresh(tx, sessionId);
    return { sessionId, refreshToken };
  }

  private async issueRefresh(tx: Queryable, sessionId: string, t: OpaqueToken = newOpaqueToken()): Promise<string> {
    await tx.query(
      `INSERT INTO basalt.auth_refresh_tokens (id, session_id, secret_hash, expires_at) VALUES ($1, $2, $3, now() + make_interval(secs => $4))`,
      [t.id, sessionId, t.hash, this.refreshSeconds()],
    );
    return t.token;
  }

  /**
   * Inside the caller's transaction, with the token and its session locked: whether
   * `parsed` is the current refresh token of a live session. With `replay` (a refresh), a
   * token already rotated within the reuse interval whose successor is still the current
   * token is a concurrent use or a retry of a lost answer (docs/auth.md, Tokens and
   * sessions): it gets that successor (`successor`). Any other spent token proves a copy exists somewhere else:
   * the whole session is revoked (reason `reused`, with its id so the caller can
   * announce it after commit).
   */
  private async inspect(
    tx: Queryable,
    parsed: { id: string; secret: string },
    key: Uint8Array,
    replay: boolean,
  ): Promise<CheckResult> {
    // FOR UPDATE serializes two uses racing with the same token: the second sees used_at.
    const { rows } = await tx.query<{
      secret_hash: Uint8Array;
      session_id: string;
      used_at: Date | null;
      recent: boolean;
      live: boolean;
      revoked_at: Date | null;
      user_id: string;
      disabled_at: Date | null;
    }>(
      `SELECT t.secret_hash, t.session_id, t.used_at, t.used_at > now() - make_interval(secs => $2) AS recent,
              (t.expires_at > now() AND s.expires_at > now()) AS live,
              s.revoked_at, s.user_id, u.disabled_at
         FROM basalt.auth_refresh_tokens t
         JOIN basalt.auth_sessions s ON s.id = t.session_id
         JOIN basalt.users u ON u.id = s.user_id
        WHERE t.id = $1 FOR UPDATE OF t, s`,
      [parsed.id, this.reuseIntervalSeconds()],
    );
    const row = rows[0];
    if (!row || !secretMatches(parsed.secret, row.secret_hash)) return { ok: false, reason: 'invalid' };
    if (row.revoked_at) return { ok: false, reason: 'revoked' };
    let successor: string | undefined;
    if (row.used_at) {
      const next = this.successorOf(key, parsed);
      const current =
        replay && row.recent
          ? await tx.query(
              'SELECT 1 FROM basalt.auth_refresh_tokens WHERE id = $1 AND session_id = $2 AND used_at IS NULL AND expires_at > now()',
              [next.id, row.session_id],
            )
          : undefined;
      if (!current?.rows.length) {
        await revokeWhere(tx, 'id = $1', [row.session_id], 'refresh_token_reuse');
        return { ok: false, reason: 'reused', sessionId: row.session_id };
      }
      successor = next.token;
    }
    if (!row.live) return { ok: false, reason: 'invalid' };
    if (row.disabled_at) return { ok: false, reason: 'disabled' };
    return { ok: true, sessionId: row.session_id, userId: row.user_id, ...(successor ? { successor } : {}) };
  }

  /** Run `inspect` (and `then` when the token is good) in one transaction; announce a reuse revocation after commit. */
  private async withLiveToken<T>(
    presented: string,
    then: (
      tx: Queryable,
      live: { sessionId: string; userId: string; successor?: string; next: OpaqueToken; tokenId: string },
    ) => Promise<T>,
    replay = false,
  ): Promise<T | Failure> {
    const parsed = parseOpaqueToken(presented);
    if (!parsed) return { ok: false, reason: 'invalid' };
    // Read before the transaction: on the embedded engine a transaction holds the database.
    const key = await this.key();
    const result = await this.db.transaction(async (tx): Promise<T | Failure> => {
      const r = await this.inspect(tx, parsed, key, replay);
      return r.ok ? then(tx, { ...r, next: this.successorOf(key, parsed), tokenId: parsed.id }) : r;
    });
    // Announced after commit, so no instance can re-read the session as live.
    const failed = result as Failure;
    if (failed.ok === false && failed.sessionId) await this.announce(failed.sessionId);
    return result;
  }

  /**
   * Exchange a refresh token for its successor (the presented one is spent). Presented
   * again within the reuse interval, while the successor is current, it gets the same
   * successor again; the session is not touched twice.
   */
  async rotate(presented: string): Promise<RotateResult> {
    return this.withLiveToken(
      presented,
      async (tx, live): Promise<RotateResult> => {
        if (live.successor) {
          const { rows } = await tx.query<{ amr: string[] }>('SELECT amr FROM basalt.auth_sessions WHERE id = $1', [
            live.sessionId,
          ]);
          return {
            ok: true,
            sessionId: live.sessionId,
            userId: live.userId,
            refreshToken: live.successor,
            amr: rows[0]!.amr,
          };
        }
        await tx.query('UPDATE basalt.auth_refresh_tokens SET used_at = now() WHERE id = $1', [live.tokenId]);
        // The session's amr comes back so the new access token says how the session was signed in.
        const { rows } = await tx.query<{ amr: string[] }>(
          'UPDATE basalt.auth_sessions SET last_used_at = now(), expires_at = now() + make_interval(secs => $2) WHERE id = $1 RETURNING amr',
          [live.sessionId, this.refreshSeconds()],
        );
        const refreshToken = await this.issueRefresh(tx, live.sessionId, live.next);
        return { ok: true, sessionId: live.sessionId, userId: live.userId, refreshToken, amr: rows[0]!.amr };
      },
      true,
    );
  }

  /**
   * The session of a refresh token presented to logout. Only the current token of a
   * live session counts — an old leaked one must not end the user's sessions — and a
   * spent one is reuse, exactly as on refresh: the session is revoked — also within the
   * reuse interval, which serves only refresh (a retry of a logout is not needed: it ended the session).
   */
  async sessionOfRefresh(presented: string): Promise<CheckResult> {
    return this.withLiveToken(
      presented,
      async (_tx, live): Promise<CheckResult> => ({ ok: true, sessionId: live.sessionId, userId: live.userId }),
    );
  }

  /** Revoke one session. */
  async revoke(sessionId: string, reason: string): Promise<void> {
    await revokeWhere(this.db, 'id = $1', [sessionId], reason);
    await this.announce(sessionId);
  }

  /**
   * Revoke every session of a user, optionally keeping one (the caller's). With `tx`
   * the revocation joins the caller's transaction and other instances hear of it at commit.
   */
  async revokeUser(userId: string, reason: string, keep?: string, tx?: Queryable): Promise<void> {
    await revokeWhere(
      tx ?? this.db,
      keep ? 'user_id = $1 AND id <> $2' : 'user_id = $1',
      keep ? [userId, keep] : [userId],
      reason,
    );
    await this.announce(`user:${userId}`, tx);
  }

  /** `state` from the cache without waiting for anything (undefined: not cached, or stale). */
  cached(sessionId: string): SessionState | null | undefined {
    const hit = this.cache.get(sessionId);
    return hit && performance.now() - hit.at < CACHE_TTL_MS ? hit.state : undefined;
  }

  /**
   * Whether a session is usable: not revoked, not expired, user not disabled, read from
   * the database. null = no such session. The answer is cached for a short time and
   * invalidated on revocation; callers ask `cached` first, without waiting:
   * `sessions.cached(id) ?? (await sessions.load(id))`.
   */
  async load(sessionId: string): Promise<SessionState | null> {
    const gen = this.generation;
    const { rows } = await this.db.query<UserRow & { live: boolean }>(
      `SELECT u.id, u.email, '' AS password_hash, u.email_verified_at, u.disabled_at, u.created_at,
              (s.revoked_at IS NULL AND s.expires_at > now()) AS live
         FROM basalt.auth_sessions s JOIN basalt.users u ON u.id = s.user_id WHERE s.id = $1`,
      [sessionId],
    );
    const r = rows[0];
    const state: SessionState | null = r
      ? {
          userId: r.id,
          email: r.email,
          user: publicUser(r),
          problem: !r.live ? 'revoked' : r.disabled_at ? 'disabled' : undefined,
        }
      : null;
    if (gen === this.generation) {
      if (this.cache.size >= CACHE_MAX) this.cache.clear();
      this.cache.set(sessionId, { state, at: performance.now() });
    }
    return state;
  }

  /** Drop cached state here and on every instance: a session id, or `user:<id>` for all of a user's. */
  async announce(key: string, tx?: Queryable): Promise<void> {
    if (!key) return;
    this.forget(key);
    // In a transaction pg_notify is delivered at commit, to this instance's listener too (which forgets again).
    if (tx) await tx.query('SELECT pg_notify($1, $2)', [CHANNEL, key]);
    else await this.db.notify(CHANNEL, key);
  }

  private forget(key: string): void {
    this.generation++;
    // Polled instead of notified (a transaction-mode pooler without database.direct_url): any
    // entry may be stale, so all go; open streams and transactions are not told (docs/operations.md).
    if (key === ANY_CHANGE) {
      this.cache.clear();
      return;
    }
    for (const fn of this.invalidateListeners) fn(key);
    if (!key.startsWith('user:')) {
      this.cache.delete(key);
      return;
    }
    const userId = key.slice(5);
    for (const [id, entry] of this.cache) if (!entry.state || entry.state.userId === userId) this.cache.delete(id);
  }

  /** Drop refresh tokens and sessions that can no longer be used (housekeeping). */
  async prune(): Promise<void> {
    await this.db.query(`DELETE FROM basalt.auth_refresh_tokens WHERE expires_at < now() - interval '1 day'`);
    await this.db.query(
      `DELETE FROM basalt.auth_sessions WHERE expires_at < now() - interval '7 days' OR revoked_at < now() - interval '7 days'`,
    );
  }
}

async function revokeWhere(q: Queryable, where: string, params: unknown[], reason: string): Promise<void> {
  await q.query(
    `UPDATE basalt.auth_sessions SET revoked_at = now(), revoked_reason = $${params.length + 1} WHERE ${where} AND revoked_at IS NULL`,
    [...params, reason],
  );
}
