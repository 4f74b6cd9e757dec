/**
 * Administration (docs/admin-api.md, docs/admin.md): administrators, their sessions,
 * the setup link, sign-in hardening and the audit trail. No HTTP here: the admin API,
 * the CLI (`basalt admin …`) and the panel all come through this one service.
 */
import type { SettingSuffix } from '../../config/schema';
import type { Platform } from '../../platform';
import { PgError, type Queryable } from '../../db/engine';
import { dummyHash, hashPassword, needsRehash, passwordProblem, verifyPassword } from '../auth/passwords';
import { accountBucketsPrefix, accountFromBucket, limitPerMinute, resetBuckets } from '../auth/rate-limit';
import { adminLockout, type LockoutLimits, type LockState } from '../auth/lockout';
import { emailProblem, normalizeEmail } from '../auth/users';
import { AdminErrors } from './errors';
import {
  ADMINS_LOCK,
  adminByEmail,
  adminById,
  adminView,
  countAdmins,
  deleteAdmin,
  insertAdmin,
  listAdmins,
  setAdminPassword,
  touchLogin,
  type AdminView,
} from './admins';
import {
  createSession,
  csrfTokenOf,
  endAdminSessions,
  endSession,
  findSession,
  pruneSessions,
  type LiveSession,
  type SessionLifetimes,
} from './sessions';
import { issueSetupToken, spendSetupToken } from './setup-link';
import { listAudit, pruneAudit, writeAudit, type Actor, type AuditFilter } from './audit';

/** Facts about the HTTP request the service needs. */
export interface ClientMeta {
  ip: string;
  userAgent: string | null;
  requestId: string | null;
}

/** A new session: the cookie token (sent once, in Set-Cookie) and what the client is shown. */
export interface SignedIn {
  admin: AdminView;
  token: string;
  csrf_token: string;
  sessionId: string;
}

/** The table's own check disagreeing with the e-mail normalization is still the client's input: 400, never a 500. */
function refusedEmail(e: unknown): never {
  if (e instanceof PgError && e.code === '23514')
    throw AdminErrors.field('email', 'must be an e-mail address like name@example.com');
  throw e;
}

export class AdminService {
  constructor(private p: Platform) {}

  lifetimes(): SessionLifetimes {
    return {
      idleMinutes: this.p.settings.get('admin.session_idle_minutes'),
      maxHours: this.p.settings.get('admin.session_max_hours'),
    };
  }

  /**
   * Run `fn` and write its audit row in one transaction: both or neither. `fn` may
   * name the target and the diff once it knows them (e.g. a new key's id).
   */
  async audited<R>(
    actor: Actor,
    action: string,
    fn: (tx: Queryable, note: (target: string | null, diff?: unknown, label?: string | null) => void) => Promise<R>,
  ): Promise<R> {
    return this.p.db.transaction(async (tx) => {
      let target: string | null = null;
      let diff: unknown;
      let label: string | null | undefined;
      const r = await fn(tx, (t, d, l) => {
        target = t;
        diff = d;
        label = l;
      });
      await writeAudit(tx, actor, action, target, diff, label);
      return r;
    });
  }

  // ── administrators ────────────────────────────────────────────────────────────

  private checkEmail(raw: unknown): string {
    const email = normalizeEmail(typeof raw === 'string' ? raw : '');
    const problem = emailProblem(email);
    if (problem) throw AdminErrors.field('email', problem);
    return email;
  }

  private checkPassword(field: string, password: unknown): string {
    const problem =
      typeof password === 'string'
        ? passwordProblem(password, this.p.settings.get('auth.password_min_length'))
        : 'is required';
    if (problem) throw AdminErrors.field(field, problem);
    return password as string;
  }

  async setupRequired(): Promise<boolean> {
    return (await countAdmins(this.p.db)) === 0;
  }

  list(): Promise<AdminView[]> {
    return listAdmins(this.p.db);
  }

  private lockoutLimits(): LockoutLimits {
    return {
      perSource: this.p.settings.get('auth.lockout_threshold'),
      backstop: this.p.settings.get('admin.lockout_backstop_threshold'),
      windowSeconds: this.p.settings.get('auth.lockout_window_seconds'),
    };
  }

  /** Administrators with their lock state and the addresses failing to sign in as them. */
  async listWithLocks(): Promise<(AdminView & { lock: LockState })[]> {
    const admins = await listAdmins(this.p.db);
    const locks = await adminLockout.states(
      this.p.db,
      admins.map((a) => a.email),
      this.lockoutLimits().windowSeconds,
    );
    return admins.map((a) => ({ ...a, lock: locks.get(a.email)! }));
  }

  /** Lift every sign-in lock of an administrator (CLI `admin unlock`); audited. */
  async unlock(rawEmail: string, actor: Actor): Promise<{ admin: AdminView; cleared: number }> {
    const email = this.checkEmail(rawEmail);
    return this.audited(actor, 'admins.unlock', async (tx, note) => {
      const row = await adminByEmail(tx, email);
      if (!row) throw AdminErrors.notFound(`The administrator ${email}`);
      const cleared = await adminLockout.unlock(tx, email);
      const limits = await clearAdminLimits(tx, email);
      note(row.id, { email, counters_cleared: cleared, rate_limits_cleared: limits });
      return { admin: adminView(row), cleared };
    });
  }

  /** Create an administrator; 409 `conflict` when the e-mail is taken. */
  async create(rawEmail: string, password: string, actor: Actor): Promise<AdminView> {
    const email = this.checkEmail(rawEmail);
    // Hash outside the transaction: on the embedded engine a transaction holds the database.
    const hash = await hashPassword(this.checkPassword('password', password));
    return this.audited(actor, 'admins.create', async (tx, note) => {
      const row = await insertAdmin(tx, email, hash).catch(refusedEmail);
      if (!row) throw AdminErrors.conflict(`An administrator with the e-mail ${email} already exists.`);
      note(row.id, { email });
      return adminView(row);
    });
  }

  /** Set an administrator's password (CLI `admin passwd`): every session of theirs ends. */
  async setPassword(rawEmail: string, password: string, actor: Actor): Promise<AdminView> {
    const email = this.checkEmail(rawEmail);
    const hash = await hashPassword(this.checkPassword('password', password));
    return this.audited(actor, 'admins.password', async (tx, note) => {
      const row = await adminByEmail(tx, email);
      if (!row) throw AdminErrors.notFound(`The administrator ${email}`);
      await setAdminPassword(tx, row.id, hash);
      const ended = await endAdminSessions(tx, row.id);
      // A new password is the operator's answer to a lock: it lifts it.
      const cleared = await adminLockout.unlock(tx, email);
      const limits = await clearAdminLimits(tx, email);
      note(row.id, {
        email,
        password: 'changed',
        sessions_ended: ended,
        counters_cleared: cleared,
        rate_limits_cleared: limits,
      });
      return adminView(row);
    });
  }

  /** Delete an administrator; never the last one (409 `last_admin`). */
  async delete(rawEmail: string, actor: Actor): Promise<AdminView> {
    const email = this.checkEmail(rawEmail);
    return this.audited(actor, 'admins.delete', async (tx, note) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [ADMINS_LOCK]);
      const row = await adminByEmail(tx, email);
      if (!row) throw AdminErrors.notFound(`The administrator ${email}`);
      if ((await countAdmins(tx)) <= 1) throw AdminErrors.lastAdmin();
      await deleteAdmin(tx, row.id);
      note(row.id, { email });
      return adminView(row);
    });
  }

  // ── setup link ────────────────────────────────────────────────────────────────

  /** A fresh setup token when no administrator exists (serve prints the link), else undefined. */
  async issueSetupToken(): Promise<string | undefined> {
    if (!(await this.setupRequired())) return undefined;
    return issueSetupToken(this.p.db);
  }

  /**
   * Create the first administrator with a setup token and sign them in. Of two people
   * racing (one link or the links of two instances) one wins; the other gets 410.
   */
  async setup(token: string, rawEmail: string, password: string, meta: ClientMeta): Promise<SignedIn> {
    // Guessing a 256-bit token is hopeless, but each try costs a password hash: bound them per IP.
    await this.limit(`admin_setup_ip:${meta.ip}`, this.p.settings.get('auth.rate_limit_token_per_ip'));
    const email = this.checkEmail(rawEmail);
    const hash = await hashPassword(this.checkPassword('password', password));
    const actor: Actor = { adminId: null, email, ip: meta.ip, userAgent: meta.userAgent, requestId: meta.requestId };
    return this.p.db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [ADMINS_LOCK]);
      if ((await countAdmins(tx)) > 0 || !(await spendSetupToken(tx, token))) throw AdminErrors.setupLinkInvalid();
      const row = (await insertAdmin(tx, email, hash).catch(refusedEmail))!;
      const session = await createSession(tx, row.id, meta);
      await writeAudit(tx, { ...actor, adminId: row.id }, 'auth.setup', row.id, { email });
      const admin = adminView(await touchLogin(tx, row.id));
      return { admin, token: session.token, csrf_token: csrfTokenOf(session.token), sessionId: session.id };
    });
  }

  // ── sign-in ───────────────────────────────────────────────────────────────────

  private limit(bucket: string, perMinute: number): Promise<void> {
    return limitPerMinute(this.p.db, bucket, perMinute, (retryAfter) => AdminErrors.rateLimited(retryAfter));
  }

  /**
   * Order as in Public Auth: per-IP limit, lock, per-account limit, then the password.
   * Unknown addresses verify against a dummy hash: same answer, similar time. The
   * counters are Public Auth's (one implementation), under admin-only bucket names and
   * with the auth.* limits. The lock and the per-account limit count per (account,
   * source address), with a backstop across sources (../auth/lockout.ts): someone else's
   * wrong passwords never lock the administrator out.
   */
  async login(rawEmail: string, password: string, meta: ClientMeta): Promise<SignedIn> {
    const s = <K extends SettingSuffix<'auth'>>(k: K) => this.p.settings.get(`auth.${k}`);
    await this.limit(`admin_login_ip:${meta.ip}`, s('rate_limit_login_per_ip'));
    const email = normalizeEmail(typeof rawEmail === 'string' ? rawEmail : '').slice(0, 320);
    const locked = await adminLockout.lockedOut(this.p.db, email, meta.ip);
    if (locked) throw AdminErrors.accountLocked(locked);
    await this.limit(accountFromBucket(ADMIN_LOGIN_ACCOUNT, email, meta.ip), s('rate_limit_login_per_account'));
    const row = email ? await adminByEmail(this.p.db, email) : undefined;
    const ok = await verifyPassword(String(password ?? ''), row?.password_hash ?? (await dummyHash()));
    const actor: Actor = {
      adminId: row?.id ?? null,
      email,
      ip: meta.ip,
      userAgent: meta.userAgent,
      requestId: meta.requestId,
    };
    if (!row || !ok) {
      const l = await adminLockout.recordFailure(this.p.db, email, meta.ip, this.lockoutLimits());
      const locked = l.accountLocked ? { locked: 'account' } : l.sourceLocked ? { locked: 'source' } : undefined;
      await writeAudit(this.p.db, actor, 'auth.login_failed', email || null, locked);
      if (l.sourceLocked)
        this.p.log.warn('administrator sign-in locked for one address after failed attempts', { ip: meta.ip });
      if (l.accountLocked)
        this.p.log.warn('administrator sign-in locked for every address: too many failures from many addresses', {
          ip: meta.ip,
        });
      throw AdminErrors.invalidCredentials();
    }
    await adminLockout.clearSource(this.p.db, email, meta.ip);
    const rehash = needsRehash(row.password_hash) ? await hashPassword(password) : undefined;
    return this.p.db.transaction(async (tx) => {
      if (rehash) await setAdminPassword(tx, row.id, rehash);
      const session = await createSession(tx, row.id, meta);
      await writeAudit(tx, actor, 'auth.login', row.id);
      const admin = adminView(await touchLogin(tx, row.id));
      return { admin, token: session.token, csrf_token: csrfTokenOf(session.token), sessionId: session.id };
    });
  }

  /** The live session of a cookie token, or undefined. */
  session(cookieToken: string | undefined): Promise<LiveSession | undefined> {
    return findSession(this.p.db, cookieToken, this.lifetimes());
  }

  async me(session: LiveSession): Promise<AdminView> {
    const row = await adminById(this.p.db, session.adminId);
    if (!row) throw AdminErrors.unauthorized();
    return adminView(row);
  }

  async logout(session: LiveSession, actor: Actor): Promise<void> {
    await this.audited(actor, 'auth.logout', async (tx, note) => {
      await endSession(tx, session.id);
      note(session.adminId);
    });
  }

  /** Change one's own password: needs the current one; the admin's other sessions end, this one stays. */
  async changePassword(session: LiveSession, current: string, next: string, actor: Actor): Promise<AdminView> {
    const ip = actor.ip ?? '';
    const locked = await adminLockout.lockedOut(this.p.db, session.email, ip);
    if (locked) throw AdminErrors.accountLocked(locked);
    const row = await adminById(this.p.db, session.adminId);
    if (!row) throw AdminErrors.unauthorized();
    if (!(await verifyPassword(String(current ?? ''), row.password_hash))) {
      // A stolen session must not become a way to guess the password.
      await adminLockout.recordFailure(this.p.db, session.email, ip, this.lockoutLimits());
      throw AdminErrors.field('current_password', 'is wrong');
    }
    const hash = await hashPassword(this.checkPassword('new_password', next));
    return this.audited(actor, 'admins.password', async (tx, note) => {
      await setAdminPassword(tx, row.id, hash);
      const ended = await endAdminSessions(tx, row.id, session.id);
      note(row.id, { email: row.email, password: 'changed', sessions_ended: ended });
      return adminView(row);
    });
  }

  // ── audit log ─────────────────────────────────────────────────────────────────

  audit(filter: AuditFilter) {
    return listAudit(this.p.db, filter);
  }

  /** Housekeeping: audit retention and ended sessions. */
  async prune(): Promise<number> {
    await pruneSessions(this.p.db, this.lifetimes());
    return pruneAudit(this.p.db, this.p.settings.get('admin.audit_retention_days'));
  }
}

/** The per-account sign-in limit of administrators, one bucket per (account, client address). */
const ADMIN_LOGIN_ACCOUNT = 'admin_login_account';

/**
 * Forget the administrator's per-account sign-in limits from every client address: an
 * unlock (or a new password) is the operator's word that they may sign in now, and the
 * limit would otherwise still refuse them for up to a minute. The counters are rows of
 * basalt.auth_rate_limits, shared by every instance on the database, so this clears
 * them everywhere.
 */
function clearAdminLimits(tx: Queryable, email: string): Promise<number> {
  return resetBuckets(tx, accountBucketsPrefix(ADMIN_LOGIN_ACCOUNT, email));
}

export function createAdminService(p: Platform): AdminService {
  return new AdminService(p);
}
