/**
 * `basalt types` (docs/client.md, Types) on both engines: the declarations follow the grants
 * of each role (column grants included) and the schema's foreign keys; `createClient<DB>`
 * with them compiles a right program under `tsc --strict` and refuses a wrong table, column,
 * value type or an ungranted column.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ENGINES, freshDb, type FreshDb } from '../helpers/engines';
import { runCli } from '../helpers/cli';

const ROOT = resolve(import.meta.dir, '../..');
const SCHEMA = `
CREATE TABLE authors (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), name text NOT NULL);
CREATE TABLE notes (
  id bigserial PRIMARY KEY,
  author_id uuid REFERENCES authors (id),
  body text NOT NULL,
  done boolean NOT NULL DEFAULT false,
  meta jsonb,
  tags text[],
  secret text
);
CREATE TABLE hidden (id int PRIMARY KEY);
-- A key column the user may not read: no relation the Database API would follow, either way.
CREATE TABLE drafts (id int PRIMARY KEY, author_id uuid REFERENCES authors (id), body text);
GRANT SELECT (id, body) ON drafts TO basalt_user;
GRANT SELECT ON authors TO basalt_user;
GRANT SELECT (id, author_id, body, done, meta, tags), INSERT (body, done, author_id), UPDATE (body, done) ON notes TO basalt_user;
GRANT SELECT (id, body) ON notes TO basalt_anon;
`;

const GOOD = `
const b = createClient<DB>('http://127.0.0.1:5000');
export async function run(): Promise<string> {
  const { rows, total } = await b.from('notes').select(['id', 'body', 'tags'], { total: true }).eq('done', false)
    .or((q) => q.ilike('body', '%x%').isNull('author_id')).order('id', 'desc').limit(5);
  const id: string = rows[0]!.id;
  const tags: (string | null)[] | null = rows[0]!.tags;
  const n: number | undefined = total;
  await b.from('notes').insert([{ body: 'x' }, { body: 'y', done: true }]);
  await b.from('notes').update({ done: true }).in('id', ['1', '2']);
  const e = await b.from('notes').select(['id']).expand('author_id', ['name']);
  const name: string | undefined = e.rows[0]!.expand.author_id?.name;
  const a = await b.from('authors').select().expand('notes_via_author_id', ['body']);
  const first: string | undefined = a.rows[0]!.expand.notes_via_author_id[0]?.body;
  b.realtime.subscribe(['notes'], (ev) => {
    if (ev.event === 'change') console.log(ev.table, ev.row.body.length);
  });
  return id + tags + n + name + first;
}
`;

/** Each a line that must not compile, with the error it must get. */
const BAD: Record<string, [string, RegExp]> = {
  table: [`b.from('nope');`, /"nope"/],
  column: [`b.from('notes').select(['nope']);`, /"nope"/],
  value: [`b.from('notes').insert({ body: 42 });`, /number.*string/],
  filter: [`b.from('notes').select().eq('done', 'yes');`, /"yes"|string.*boolean/],
  ungranted: [`b.from('notes').select(['secret']);`, /"secret"/],
  readonly: [`b.from('notes').update({ author_id: null });`, /author_id/],
  hidden: [`b.from('hidden').select();`, /"hidden"/],
};

describe.each(ENGINES)('basalt types on %s', (engine) => {
  let db: FreshDb;
  let dir: string;
  let env: Record<string, string>;
  beforeAll(async () => {
    db = await freshDb(engine);
    dir = mkdtempSync(join(tmpdir(), 'basalt-types-'));
    mkdirSync(join(dir, 'migrations'));
    writeFileSync(join(dir, 'migrations', '001_schema.sql'), SCHEMA);
    env = { ...db.env, BASALT_MIGRATIONS_DIR: join(dir, 'migrations') };
    const migrated = await runCli(['migrate'], env, { cwd: dir });
    expect({ code: migrated.code, stderr: migrated.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
  });
  afterAll(() => db?.drop());

  const types = async (...args: string[]) => {
    const r = await runCli(['types', ...args], env, { cwd: dir });
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    return r.stdout;
  };

  test('each role sees its grants: columns, optional inserts, relations between tables it reaches', async () => {
    const user = await types('--role', 'user');
    expect(user).toContain('export type DB = {');
    expect(user).toContain(
      'Row: {\n        id: string;\n        author_id: string | null;\n        body: string;\n        done: boolean;\n        meta: unknown | null;\n        tags: (string | null)[] | null;\n      };',
    );
    expect(user).toContain(
      'Insert: {\n        author_id?: string | null;\n        body: string;\n        done?: boolean;\n      };',
    );
    expect(user).toContain('Update: {\n        body?: string;\n        done?: boolean;\n      };');
    expect(user).toContain('Relations: { author_id: "authors"; };');
    expect(user).toContain('Relations: { notes_via_author_id: "notes"; };');
    expect(user).toContain('drafts: {\n      Row: {\n        id: number;\n        body: string | null;\n      };');
    expect(user).not.toContain('drafts_via_author_id');
    expect(user).not.toContain('secret');
    expect(user).not.toContain('hidden');

    const anon = await types('--role', 'anon');
    expect(anon).toContain('Row: {\n        id: string;\n        body: string;\n      };');
    expect(anon).not.toContain('authors');

    const service = await types('--role', 'service');
    expect(service).toContain('secret: string | null;');
    expect(service).toContain('hidden: {');

    // A service key: its whitelist only.
    const created = await runCli(
      [
        'keys',
        'create',
        '--type',
        'service',
        '--service',
        'types',
        '--permissions',
        'db:query',
        '--tables',
        'authors',
        '--json',
      ],
      env,
      { cwd: dir },
    );
    expect(created.code).toBe(0);
    const byKey = await types('--key', JSON.parse(created.stdout).key);
    expect(byKey).toContain('authors: {');
    expect(byKey).not.toContain('notes');

    const refused = await runCli(['types', '--role', 'admin'], env, { cwd: dir });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("--role 'admin': must be one of user, anon, service");
  }, 60_000);

  test('createClient<DB>: tsc --strict compiles a right program and refuses each wrong one', async () => {
    const out = join(dir, 'db.ts');
    await types('--role', 'user', '--out', out);
    const head = `import { createClient } from ${JSON.stringify(join(ROOT, 'clients/js/src/client'))};\nimport type { DB } from './db';\n`;
    const tsc = async (name: string, body: string) => {
      writeFileSync(join(dir, `${name}.ts`), head + body);
      writeFileSync(
        join(dir, `tsconfig.${name}.json`),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            noEmit: true,
            target: 'ES2022',
            module: 'ESNext',
            moduleResolution: 'bundler',
            lib: ['ES2022', 'DOM'],
            types: [],
            skipLibCheck: true,
          },
          files: [`${name}.ts`],
        }),
      );
      const p = Bun.spawn([join(ROOT, 'node_modules/.bin/tsc'), '-p', `tsconfig.${name}.json`], {
        cwd: dir,
        stdout: 'pipe',
        stderr: 'pipe',
      });
      const [stdout, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
      return { code, stdout };
    };
    const good = await tsc('good', GOOD);
    expect(good.stdout).toBe('');
    expect(good.code).toBe(0);
    for (const [name, [line, error]] of Object.entries(BAD)) {
      const r = await tsc(`bad_${name}`, `const b = createClient<DB>('http://x');\n${line}\n`);
      expect({ name, failed: r.code !== 0 }).toEqual({ name, failed: true });
      expect(r.stdout).toMatch(error);
      // Only the wrong line fails (line 4 of the file).
      expect(r.stdout).toContain(`bad_${name}.ts(4,`);
    }
  }, 60_000);
});
