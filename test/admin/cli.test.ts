/** `basalt admin create|list|passwd|delete` (docs/admin.md), through the same service as the admin API. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { runCli } from '../helpers/cli';

describe.each(ENGINES)('basalt admin (CLI) on %s', (engine) => {
  let db: FreshDb;
  const cli = (...args: string[]) => runCli(args, db.env);
  beforeAll(async () => {
    db = await freshDb(engine);
  }, 60_000);
  afterAll(() => db.drop());

  test('create, list, passwd, delete; the last administrator stays', async () => {
    const one = await cli('admin', 'create', '--email', 'Ops@Example.com', '--password', 'first password 1');
    expect(one.stderr).toBe('');
    expect(one.code).toBe(0);
    expect(one.stdout).toContain('created administrator ops@example.com');
    expect((await cli('admin', 'create', '--email', 'ops@example.com', '--password', 'first password 1')).stderr).toMatch(/already exists/);
    expect((await cli('admin', 'create', '--email', 'two@example.com', '--password', 'second password 2')).code).toBe(0);

    const list = await cli('admin', 'list', '--json');
    expect(JSON.parse(list.stdout).map((a: any) => a.email)).toEqual(['ops@example.com', 'two@example.com']);
    expect(list.stdout).not.toContain('password');

    expect((await cli('admin', 'passwd', '--email', 'two@example.com', '--password', 'changed password 3')).stdout).toContain('sessions have ended');
    expect((await cli('admin', 'delete', '--email', 'two@example.com')).code).toBe(0);
    const last = await cli('admin', 'delete', '--email', 'ops@example.com');
    expect(last.code).toBe(1);
    expect(last.stderr).toMatch(/last administrator cannot be deleted/);
    expect((await cli('admin', 'delete', '--email', 'nobody@example.com')).stderr).toMatch(/does not exist/);
  }, 120_000);

  const usage: [string, string[], RegExp][] = [
    ['create without --password', ['admin', 'create', '--email', 'a@example.com'], /needs --password/],
    ['create with a short password', ['admin', 'create', '--email', 'a@example.com', '--password', 'short'], /password: must be at least/],
    ['create with a bad e-mail', ['admin', 'create', '--email', 'nope', '--password', 'long enough 123'], /email/],
    ['delete without --email', ['admin', 'delete'], /needs --email/],
  ];
  test.each(usage)('%s → a clear error, non-zero exit', async (_n, args, message) => {
    const r = await cli(...args);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(message);
  }, 60_000);
});
