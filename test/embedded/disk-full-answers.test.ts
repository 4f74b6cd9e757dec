/**
 * PostgreSQL's `disk_full` (SQLSTATE 53100) is 503 `disk_full` in every area's envelope,
 * on both engines, and `/readyz` reports it (docs/operations.md, "A full disk"). The
 * error is raised by the real engine from triggers on the tables each area writes, as
 * a full disk raises it from `could not extend file`; test/embedded/full-disk.test.ts
 * fills a real disk under the executable.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { DiskFullError } from '../../src/db/engine';
import { ENGINES } from '../helpers/engines';
import { expectAError, expectBError, expectCError, replyOf } from '../helpers/envelopes';
import { createKey } from '../helpers/keys';
import { startServer, type TestServer } from '../helpers/server';
import { REPO_EXTENSIONS } from '../extensions/support';

const FULL = `CREATE FUNCTION public.disk_is_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`;
const onInsert = (table: string) =>
  `CREATE TRIGGER disk_is_full BEFORE INSERT ON ${table} FOR EACH ROW EXECUTE FUNCTION public.disk_is_full()`;

describe.each(ENGINES)('a full disk on %s', (engine) => {
  let s: TestServer;
  let key: string;

  beforeAll(async () => {
    s = await startServer(engine, { env: { BASALT_EXTENSIONS_DIR: REPO_EXTENSIONS, BASALT_LOG_LEVEL: 'silent' } });
    const db = s.platform.db;
    await db.exec('CREATE TABLE public.notes (id serial PRIMARY KEY, body text)');
    key = await createKey(s, { permissions: ['db:*', 'mail:send', 'files:upload'], tables: ['notes'] });
    await db.exec(FULL);
    for (const t of ['public.notes', 'basalt.users', 'basalt.mail_jobs', 'ext_media_library.files'])
      await db.exec(onInsert(t));
  });
  afterAll(async () => {
    await s?.stop();
    // The last disk-full time is the process's (one platform per process): the suites
    // after this one in the same test process must not see its readiness report.
    DiskFullError.lastAt = 0;
  });

  test('Database API (envelope A): 503 disk_full with Retry-After; /readyz says so', async () => {
    DiskFullError.lastAt = 0;
    const res = await fetch(`${s.publicUrl}/api/v1/db/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ entity: 'notes', action: 'insert', data: { body: 'x' } }),
    });
    expect(res.headers.get('retry-after')).toBe('60');
    expectAError(await replyOf(res), 503, 'disk_full');
    expectAError(await replyOf(await fetch(`${s.url}/readyz`)), 503, 'disk_full');
    // Reads go on.
    const read = await s.req('POST', '/api/v1/db/query', {
      body: { entity: 'notes', action: 'select' },
      headers: { 'x-api-key': key },
    });
    expect(read.status).toBe(200);
  });

  test('Public Auth (envelope A): register answers 503 disk_full', async () => {
    const res = await fetch(`${s.publicUrl}/api/v1/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'full@example.com', password: 'a long enough password 1' }),
    });
    expectAError(await replyOf(res), 503, 'disk_full');
  });

  test('Mail (envelope B): send answers 503 disk_full', async () => {
    await s.platform.settings.set('mail.smtp_url', 'smtp://127.0.0.1:9');
    await s.platform.settings.set('mail.from', 'app@example.com');
    const res = await fetch(`${s.url}/api/v1/mail/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ to: ['ada@example.com'], subject: 's', text: 't' }),
    });
    expectBError(await replyOf(res), 503, 'disk_full');
  });

  test('Files (envelope C): upload answers 503 disk_full', async () => {
    const form = new FormData();
    form.append('file', new Blob(['hello']), 'a.txt');
    const res = await fetch(`${s.url}/api/v1/files`, { method: 'POST', body: form, headers: { 'x-api-key': key } });
    expectCError(await replyOf(res), 503, 'disk_full');
  });
});
