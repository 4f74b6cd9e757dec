/**
 * `basalt admin create|list|passwd|unlock|delete` and `basalt users
 * sign-in-methods|reset-mfa|unlink|unlock` (docs/admin.md). The same services as the
 * admin API; changes are written to the audit log as done by the command line (actor
 * `cli` and the operating-system user).
 */
import type { Command } from '../../cli/command';
import { operand, printList, UsageError } from '../../cli/command';
import { CLI_ACTOR } from './audit';
import { findUser, resetUserMfa, unlinkUserIdentity } from './user-sign-in';

const when = (d: Date | null) => (d ? d.toISOString().replace(/\.\d{3}Z$/, 'Z') : '-');

function required(values: Record<string, unknown>, name: string, command: string): string {
  const v = values[name];
  if (typeof v !== 'string' || !v) throw new UsageError(`${command} needs --${name}`);
  return v;
}

export const adminCommands: Command[] = [
  {
    name: 'admin create',
    usage: 'basalt admin create --email E --password P',
    summary: 'Create an administrator of the panel (separate from site users).',
    options: { email: { type: 'string' }, password: { type: 'string' } },
    platform: { migrate: false },
    async run({ platform, values, io }) {
      const a = await platform!.services.admin.create(
        required(values, 'email', 'admin create'),
        required(values, 'password', 'admin create'),
        CLI_ACTOR,
      );
      io.out(`created administrator ${a.email} (${a.id}); sign in at <main base url>/_/`);
    },
  },
  {
    name: 'admin list',
    usage: 'basalt admin list [--json]',
    summary: 'List administrators.',
    options: { json: { type: 'boolean' } },
    platform: { migrate: false },
    async run({ platform, values, io }) {
      const list = await platform!.services.admin.listWithLocks();
      printList(io, list, {
        json: values.json,
        empty: "no administrators; create one with 'basalt admin create --email E --password P'",
        print: (a) => {
          const locked = a.lock.locked_until ? [`LOCKED until ${when(a.lock.locked_until)}`] : [];
          io.out(
            [
              a.id,
              a.email.padEnd(32),
              `created ${when(a.created_at)}`,
              `last sign-in ${when(a.last_login_at)}`,
              ...locked,
            ].join('  '),
          );
          for (const src of a.lock.sources)
            io.out(
              `    failing from ${src.ip}: ${src.failures} in the window${src.locked_until ? `, locked out until ${when(src.locked_until)}` : ''}`,
            );
        },
      });
    },
  },
  {
    name: 'admin passwd',
    usage: 'basalt admin passwd --email E --password P',
    summary: "Set an administrator's password; their sessions end and their sign-in locks are lifted.",
    options: { email: { type: 'string' }, password: { type: 'string' } },
    platform: { migrate: false },
    async run({ platform, values, io }) {
      const a = await platform!.services.admin.setPassword(
        required(values, 'email', 'admin passwd'),
        required(values, 'password', 'admin passwd'),
        CLI_ACTOR,
      );
      io.out(`password of ${a.email} changed; their sessions have ended`);
    },
  },
  {
    name: 'admin unlock',
    usage: 'basalt admin unlock EMAIL (or --email E)',
    summary:
      "Lift an administrator's sign-in locks (every address), forget the failures and the account's sign-in limit.",
    options: { email: { type: 'string' } },
    platform: { migrate: false },
    async run({ platform, values, positionals, io }) {
      const email = positionals[0] ?? required(values, 'email', 'admin unlock');
      const r = await platform!.services.admin.unlock(email, CLI_ACTOR);
      io.out(
        r.cleared
          ? `sign-in of ${r.admin.email} unlocked (${r.cleared} failure counter${r.cleared === 1 ? '' : 's'} cleared)`
          : `${r.admin.email} was not locked; nothing to clear`,
      );
    },
  },
  {
    name: 'admin delete',
    usage: 'basalt admin delete --email E',
    summary: 'Delete an administrator (never the last one).',
    options: { email: { type: 'string' } },
    platform: { migrate: false },
    async run({ platform, values, io }) {
      const a = await platform!.services.admin.delete(required(values, 'email', 'admin delete'), CLI_ACTOR);
      io.out(`deleted administrator ${a.email}`);
    },
  },
  {
    name: 'users sign-in-methods',
    usage: 'basalt users sign-in-methods EMAIL|ID [--json]',
    summary: "A site user's ways to sign in: password, linked providers (with their ids), second factor.",
    options: { json: { type: 'boolean' } },
    platform: { migrate: false },
    async run({ platform, positionals, values, io }) {
      const user = await findUser(platform!, userArg(positionals, 'users sign-in-methods'));
      const m = await platform!.services.auth.methods.methods(user.id);
      if (values.json) return io.out(JSON.stringify({ user: { id: user.id, email: user.email }, ...m }, null, 2));
      io.out(`${user.email} (${user.id})`);
      io.out(`  password: ${m.has_password ? 'set' : 'none'}`);
      io.out(`  second factor: ${m.totp_enabled ? `TOTP on, ${m.recovery_codes_left} recovery code(s) left` : 'off'}`);
      for (const i of m.identities)
        io.out(`  provider ${i.provider}: ${i.id}  ${i.email ?? '-'}  last used ${i.last_used_at}`);
    },
  },
  {
    name: 'users reset-mfa',
    usage: 'basalt users reset-mfa EMAIL|ID',
    summary: "Turn a site user's second factor off (lost authenticator); audited.",
    platform: { migrate: false },
    async run({ platform, positionals, io }) {
      const user = await findUser(platform!, userArg(positionals, 'users reset-mfa'));
      const removed = await resetUserMfa(platform!, user, CLI_ACTOR);
      io.out(
        removed
          ? `second factor of ${user.email} turned off; they sign in with their first factor alone`
          : `${user.email} had no second factor; nothing changed`,
      );
    },
  },
  {
    name: 'users unlink',
    usage: 'basalt users unlink EMAIL|ID --identity PROVIDER|IDENTITY_ID',
    summary: 'Unlink a provider from a site user (never their last way to sign in); audited.',
    options: { identity: { type: 'string' } },
    platform: { migrate: false },
    async run({ platform, positionals, values, io }) {
      const user = await findUser(platform!, userArg(positionals, 'users unlink'));
      const r = await unlinkUserIdentity(platform!, user, required(values, 'identity', 'users unlink'), CLI_ACTOR);
      io.out(`unlinked ${r.provider} (${r.id}) from ${user.email}`);
    },
  },
  {
    name: 'users unlock',
    usage: 'basalt users unlock EMAIL|ID',
    summary: "Lift a site user's sign-in locks (every address) and forget the failures; audited.",
    platform: { migrate: false },
    async run({ platform, positionals, io }) {
      const user = await findUser(platform!, userArg(positionals, 'users unlock'));
      const cleared = await platform!.services.admin.audited(CLI_ACTOR, 'users.unlock', async (tx, note) => {
        const n = await platform!.services.auth.unlock(user.email, tx);
        note(user.id, { counters_cleared: n }, user.email);
        return n;
      });
      io.out(
        cleared
          ? `sign-in of ${user.email} unlocked (${cleared} failure counter${cleared === 1 ? '' : 's'} cleared)`
          : `${user.email} was not locked; nothing to clear`,
      );
    },
  },
];

function userArg(positionals: string[], command: string): string {
  return operand(positionals, `${command} needs the user's e-mail address or id`);
}
