/**
 * Realtime (docs/realtime.md): who may open which stream, the instance's hub, tickets,
 * the end of streams whose credentials end, and extensions' messages. No HTTP here:
 * routes.ts resolves the caller and hands over plain values.
 */
import type { Platform } from '../../platform';
import type { AuthService } from '../auth/service';
import type { DatabaseService } from '../database/service';
import type { KeyService } from '../keys/service';
import type { Queryable } from '../../db/engine';
import { RealtimeErrors } from './errors';
import { Hub } from './hub';
import { enabledTables, publishMessage, REALTIME_CHANNEL } from './outbox';
import { identityKey, identityOf, limitKey, type Identity, type Principal } from './principal';
import { RowReader, type AsIdentities } from './rows';
import { Stream, frame, type EndReason } from './stream';
import {
  holderOf,
  issueResume,
  issueTicket,
  resumeCookieName,
  resumeHolder,
  spendTicket,
  type TicketHolder,
} from './tickets';
import { ANON, switchIdentity, userIdentity } from '../database/identity';

/** A channel of an extension: `<extension>:<name>`. */
export const CHANNEL_NAME = /^[a-z0-9][a-z0-9-]*:[A-Za-z0-9_.-]{1,100}$/;

/** Who asks to follow a channel, as an extension's rule sees them (docs/extensions.md, `ctx.realtime.authorize`). */
export type ChannelFollower = { kind: 'user'; userId: string } | { kind: 'key'; keyId: string } | { kind: 'anon' };

/** An extension's rule: may `who` follow its channel `channel` (the name without `<extension>:`)? */
export type ChannelRule = (channel: string, who: ChannelFollower) => boolean | Promise<boolean>;

export interface OpenRequest {
  tables: string[];
  channels: string[];
  lastEventId?: number;
}

/** The other services realtime uses: the Database API's catalog and identities, keys and sessions. */
export interface RealtimeDeps {
  database: DatabaseService;
  keys: KeyService;
  auth: AuthService;
}

export class RealtimeService {
  readonly hub: Hub;
  readonly rows: RowReader;
  private readonly schema: string;
  private perPrincipal = new Map<string, number>();
  /** Extension name → its rule for following its channels; an extension without one: anyone may. */
  private channelRules = new Map<string, ChannelRule>();

  constructor(
    private readonly p: Platform,
    private readonly deps: RealtimeDeps,
    asIdentities: AsIdentities,
  ) {
    this.schema = p.settings.get('database.data_schema');
    this.rows = new RowReader(this.schema, p.db, asIdentities, p.db.kind === 'external' ? 4 : 1);
    this.hub = new Hub({
      db: p.db,
      schema: this.schema,
      reader: this.rows,
      table: async (name) => {
        const { table } = await deps.database.catalog.table(name);
        return { table };
      },
      listen: (onWake) => p.db.listen(REALTIME_CHANNEL, () => onWake()),
      alone: p.db.kind === 'embedded',
      retentionSeconds: () => p.settings.get('realtime.retention_seconds'),
      heartbeatMs: () => p.settings.get('realtime.heartbeat_seconds') * 1000,
      onError: (msg, cause) => p.log.warn(msg, { cause }),
    });
  }

  /** Start the instance's reader (serve does, never one-shot commands). */
  start(): Promise<void> {
    return this.hub.start();
  }

  /**
   * Check every table and channel before anything streams: a table the caller may not
   * read → 403 (401 for anon without credentials), named; one that emits no changes → 400.
   */
  private async check(principal: Principal, req: OpenRequest): Promise<void> {
    const identity = identityOf(principal);
    const catalog = this.deps.database.catalog;
    const refuse = (t: string) =>
      principal.kind === 'anon' && !principal.withKey ? RealtimeErrors.unauthorized(t) : RealtimeErrors.forbidden(t);
    for (const t of req.tables) {
      if (principal.kind === 'key') {
        if (!principal.key.tables.includes(t)) throw refuse(t);
        continue;
      }
      const { table } = await catalog.table(t);
      if (!table || !(await this.rows.mayRead(identity, table))) throw refuse(t);
    }
    for (const c of req.channels) await this.mayFollow(principal, c);
    if (!req.tables.length) return;
    const enabled = await enabledTables(this.p.db, this.schema);
    for (const t of req.tables) if (!enabled.has(t)) throw RealtimeErrors.notEnabled(t);
  }

  /** Let an extension decide who follows its channels (docs/extensions.md, `ctx.realtime.authorize`). */
  authorizeChannels(extension: string, rule: ChannelRule): void {
    this.channelRules.set(extension, rule);
  }

  /**
   * A channel whose extension declared a rule: followed only when the rule answers true
   * (403, or 401 for anon without credentials). A rule that throws refuses (logged).
   */
  private async mayFollow(principal: Principal, channel: string): Promise<void> {
    const at = channel.indexOf(':');
    const rule = this.channelRules.get(channel.slice(0, at));
    if (!rule) return;
    const who: ChannelFollower =
      principal.kind === 'user'
        ? { kind: 'user', userId: principal.userId }
        : principal.kind === 'key'
          ? { kind: 'key', keyId: principal.key.id }
          : { kind: 'anon' };
    let allowed = false;
    try {
      allowed = (await rule(channel.slice(at + 1), who)) === true;
    } catch (e) {
      this.p.log.warn('realtime: a channel rule failed; following refused', { channel, cause: e });
    }
    if (allowed) return;
    throw principal.kind === 'anon' && !principal.withKey
      ? RealtimeErrors.channelUnauthorized(channel)
      : RealtimeErrors.channelForbidden(channel);
  }

  /** Open a stream for `principal`, or throw the refusal. The stream is fed from now on. */
  async open(principal: Principal, req: OpenRequest): Promise<Stream> {
    await this.check(principal, req);
    const total = this.p.settings.get('realtime.max_connections');
    if (this.hub.streams.size >= total) throw RealtimeErrors.tooMany(`at most ${total} on this instance`);
    const limit = limitKey(principal);
    const max = this.p.settings.get(limit.setting);
    const held = this.perPrincipal.get(limit.key) ?? 0;
    if (held >= max) throw RealtimeErrors.tooMany(`at most ${max} per ${principal.kind === 'key' ? 'key' : 'user'}`);
    this.perPrincipal.set(limit.key, held + 1);
    const identity: Identity = identityOf(principal);
    const stream = new Stream(
      principal,
      identity,
      identityKey(identity),
      new Set(req.tables),
      new Set(req.channels),
      this.p.settings.get('realtime.buffer_bytes'),
      (s, why) => this.ended(s, why, limit.key),
    );
    this.hub.add(stream);
    if (principal.kind === 'user') stream.expireAt(principal.tokenExpiresAt);
    try {
      await this.hub.attach(stream, req.lastEventId);
    } catch (e) {
      stream.end('error');
      throw e;
    }
    return stream;
  }

  private ended(s: Stream, why: EndReason, limit: string): void {
    this.hub.removed(s, why);
    const n = (this.perPrincipal.get(limit) ?? 1) - 1;
    if (n > 0) this.perPrincipal.set(limit, n);
    else this.perPrincipal.delete(limit);
  }

  /** A ticket for `principal`; the tables and channels named (may be none) are checked first, as `open` checks them. */
  async ticket(
    principal: Principal,
    following: Pick<OpenRequest, 'tables' | 'channels'>,
  ): Promise<{ ticket: string; expires_at: string }> {
    await this.check(principal, { ...following, lastEventId: undefined });
    return issueTicket(this.p.db, holderOf(principal));
  }

  /**
   * The principal of a ticket, spent now — or, for a ticket already spent, of the resume
   * credential its stream set (`resume`: the cookie's value; tickets.ts) — checked again as
   * its credentials would be: the key still active, the session still live. A ticket spent
   * now also gives the resume credential to set.
   */
  async spend(
    ticket: string,
    ip: string,
    withKey: boolean,
    resume?: string,
  ): Promise<{ principal: Principal; resume?: { name: string; secret: string; maxAgeSeconds: number } }> {
    let h = await spendTicket(this.p.db, ticket);
    const fresh = h !== null;
    if (!h && resume) h = await resumeHolder(this.p.db, ticket, resume);
    if (!h) throw RealtimeErrors.invalidTicket();
    const principal = await this.holderPrincipal(h, ip, withKey);
    if (!fresh) return { principal };
    return { principal, resume: { name: resumeCookieName(ticket), ...(await issueResume(this.p.db, ticket, h)) } };
  }

  private async holderPrincipal(h: TicketHolder, ip: string, withKey: boolean): Promise<Principal> {
    if (h.kind === 'anon') return { kind: 'anon', ip, withKey };
    if (h.kind === 'key') {
      const k = await this.deps.keys.get(h.keyId);
      if (k?.status !== 'active') throw RealtimeErrors.invalidTicket();
      return { kind: 'key', key: { id: k.id, tables: k.tables } };
    }
    const sessions = this.deps.auth.sessions;
    const state = await sessions.load(h.sessionId);
    if (!state || state.problem || state.userId !== h.userId || h.tokenExpiresAt <= Date.now())
      throw RealtimeErrors.invalidTicket();
    return {
      kind: 'user',
      userId: h.userId,
      sessionId: h.sessionId,
      // The e-mail facts as they are now, as a Database API request would see them (database/caller.ts).
      claims: { ...h.claims, email: state.email, email_verified: state.user.email_verified },
      tokenExpiresAt: h.tokenExpiresAt,
    };
  }

  /** A key was revoked (here or on another instance): its streams end at once. */
  keyRevoked(keyId: string): void {
    for (const s of this.hub.streams)
      if (s.principal.kind === 'key' && s.principal.key.id === keyId)
        s.end('revoked', frame('revoked', { reason: 'key_revoked' }));
  }

  /**
   * Sessions changed (a session id, or `user:<id>` for all of a user's): the streams
   * concerned check their session again and end when it is revoked or the user disabled.
   */
  async sessionsChanged(key: string): Promise<void> {
    const userId = key.startsWith('user:') ? key.slice(5) : undefined;
    const concerned = [...this.hub.streams].filter(
      (s) => s.principal.kind === 'user' && (userId ? s.principal.userId === userId : s.principal.sessionId === key),
    );
    const sessions = this.deps.auth.sessions;
    for (const s of concerned) {
      if (s.principal.kind !== 'user') continue;
      const state = await sessions.load(s.principal.sessionId);
      if (!state || state.problem)
        s.end(
          'revoked',
          frame('revoked', { reason: state?.problem === 'disabled' ? 'account_disabled' : 'session_revoked' }),
        );
    }
  }

  /** Publish an extension's message (docs/extensions.md, `ctx.realtime.publish`). */
  async publish(channel: string, data: unknown, opts: { users?: string[]; tx?: Queryable } = {}): Promise<void> {
    await publishMessage(opts.tx ?? this.p.db, channel, data, opts.users ?? null);
  }

  /** Counters for /metrics (docs/operations.md, Metrics). */
  metrics(): { gauges: Record<string, number>; counters: Record<string, number> } {
    const c = this.hub.counters;
    return {
      gauges: { basalt_realtime_connections: this.hub.streams.size },
      counters: {
        basalt_realtime_connections_total: c.connections,
        basalt_realtime_events_sent_total: c.sent,
        basalt_realtime_events_dropped_by_rules_total: c.droppedByRules,
        basalt_realtime_resumes_total: c.resumes,
        basalt_realtime_resets_total: c.resets,
        basalt_realtime_slow_disconnects_total: c.slow,
      },
    };
  }
}

/**
 * Statements as users and anon, through the Database API's identity helper: one
 * transaction, `switchIdentity` before each identity's statement (each call replaces all
 * four transaction-local settings, so none leaks into the next). Everything is issued at
 * once: a connection runs its statements in the order they were sent, so the identities
 * take turns correctly while the round trips overlap (pipelined on external PostgreSQL).
 */
function asIdentitiesOn(database: DatabaseService): AsIdentities {
  return (identities, fn) => {
    if (!database.identities) throw new Error("users' own data is off (docs/database.md)");
    // On the connections user statements run on (never the platform role's: authenticator.ts).
    return database.identityDb().then((db) =>
      db.transaction((tx) =>
        Promise.all(
          identities.map((identity, k) => {
            const assumed = switchIdentity(
              tx,
              identity.kind === 'user' ? userIdentity(identity.userId, identity.claims) : ANON,
            );
            return Promise.all([assumed, fn(k, tx)]).then(([, result]) => result);
          }),
        ),
      ),
    );
  };
}

/** Create the service; the hub starts with `start()` (serve), never in one-shot commands. */
export function createRealtimeService(p: Platform, deps: RealtimeDeps): RealtimeService {
  const svc = new RealtimeService(p, deps, asIdentitiesOn(deps.database));
  deps.keys.onRevoke((id) => svc.keyRevoked(id));
  deps.auth.sessions.onInvalidate(
    (key) =>
      void svc
        .sessionsChanged(key)
        .catch((e) => p.log.warn('realtime: ending the streams of ended sessions failed', { cause: e })),
  );
  p.onShutdown(() => svc.hub.stop(), { drain: true });
  return svc;
}
