/**
 * The schema editor (docs/admin-api.md, "Schema editor"), over HTTP on both engines: tables
 * created (identity or uuid keys, relations, "owned by the signed-in user") and changed from
 * the admin API, each change previewed (SQL and warnings, nothing changed) and applied as one
 * audited transaction written as the next migration file, recorded as applied; a fresh
 * database built from the directory ends with the same schema (a catalog dump of every table
 * compared); warnings counted before a change; bad names, types and expressions refused
 * naming the field.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES, freshDb } from '../helpers/engines';
import { startServer, type TestServer } from '../helpers/server';
import { adminReq, signInAdmin, type AdminAuth } from '../helpers/admin';
import { signInUser } from '../helpers/users';
import { createKey } from '../helpers/keys';
import { expectAError } from '../helpers/envelopes';
import { startAdminServer } from './support';

const BASE = `CREATE TABLE legacy (id serial PRIMARY KEY, label text, code text, n int);
INSERT INTO legacy (label, code, n) VALUES ('a', 'x', 1), (NULL, 'x', -1), (NULL, 'y', 2);
CREATE VIEW legacy_codes AS SELECT id, code FROM legacy;
ALTER TABLE legacy ENABLE ROW LEVEL SECURITY;
CREATE POLICY by_n ON legacy FOR SELECT TO basalt_user USING (n > 0);
CREATE TABLE big (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v int);
INSERT INTO big (v) SELECT g FROM generate_series(1, 12000) g;
ANALYZE big;
`;

describe.each(ENGINES)('schema editor on %s', (engine) => {
  let s: TestServer;
  let a: AdminAuth;
  const dir = mkdtempSync(join(tmpdir(), 'basalt-admin-schema-'));
  const files = () => readdirSync(dir).sort();
  const preview = (changes: unknown[]) => adminReq(s, a, 'POST', '/api/admin/data/tables/preview', { changes });
  const apply = (changes: unknown[]) => adminReq(s, a, 'POST', '/api/admin/data/tables', { changes });
  const structure = (server: TestServer, auth: AdminAuth, table: string) =>
    adminReq(server, auth, 'GET', `/api/admin/data/tables/${table}`);
  beforeAll(async () => {
    writeFileSync(join(dir, '001_base.sql'), BASE);
    s = await startAdminServer(engine, { env: { BASALT_MIGRATIONS_DIR: dir } });
    a = await signInAdmin(s);
  }, 240_000);
  afterAll(() => s.stop());

  test('create tables with keys, relations and an owned table: previewed, then applied as one migration', async () => {
    const changes = [
      {
        op: 'create_table',
        table: 'authors',
        primary_key: 'uuid',
        columns: [
          { name: 'name', type: 'text', not_null: true },
          { name: 'email', type: 'varchar(200)', unique: true },
          { name: 'motto', type: 'text', default: { value: "it's; DROP TABLE legacy; --" } },
        ],
      },
      {
        op: 'create_table',
        table: 'posts',
        owned: true,
        columns: [
          { name: 'title', type: 'text', not_null: true },
          { name: 'author_id', type: 'uuid', references: { table: 'authors', on_delete: 'cascade' } },
          { name: 'published', type: 'boolean', not_null: true, default: { value: 'false' } },
          { name: 'created_at', type: 'timestamptz', default: { expression: 'now()' } },
        ],
      },
    ];
    const before = files();
    const p = await preview(changes);
    expect(p.status).toBe(200);
    const sql = p.body.data.statements.join(';\n');
    expect(sql).toContain('CREATE TABLE "public"."authors" (\n  "id" uuid DEFAULT gen_random_uuid() PRIMARY KEY,');
    expect(sql).toContain("\"motto\" text DEFAULT 'it''s; DROP TABLE legacy; --'");
    expect(sql).toContain(
      '"id" bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n  "owner" uuid NOT NULL DEFAULT basalt.uid()',
    );
    expect(sql).toContain('REFERENCES "public"."authors" ON DELETE CASCADE');
    expect(sql).toContain('ENABLE ROW LEVEL SECURITY');
    expect(sql).toContain('CREATE POLICY "own" ON "public"."posts" AS PERMISSIVE FOR ALL TO basalt_user');
    expect(p.body.data.warnings).toEqual([]);
    // A preview changes nothing: no table, no file.
    expectAError(await structure(s, a, 'posts'), 404, 'not_found');
    expect(files()).toEqual(before);

    const r = await apply(changes);
    expect(r.status).toBe(200);
    expect(r.body.data.statements).toEqual(p.body.data.statements);
    expect(r.body.data.migration.file).toBe(join(dir, '002_panel_authors_create.sql'));
    const text = readFileSync(r.body.data.migration.file, 'utf8');
    for (const st of r.body.data.statements) expect(text).toContain(`${st};`);
    // Private, and written whole under another name first: nothing else is left in the folder.
    expect(statSync(r.body.data.migration.file).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir).sort()).toEqual([...before, '002_panel_authors_create.sql'].sort());
    const log = await adminReq(s, a, 'GET', '/api/admin/audit?action=data.schema');
    expect(log.body.data.entries[0]).toMatchObject({
      target: 'authors, posts',
      diff: { migration: '002_panel_authors_create.sql' },
    });

    const posts = (await structure(s, a, 'posts')).body.data;
    expect(posts.rls).toBe(true);
    expect(posts.columns.map((c: { name: string }) => c.name)).toEqual([
      'id',
      'owner',
      'title',
      'author_id',
      'published',
      'created_at',
    ]);
    expect(posts.columns[0]).toMatchObject({ type: 'bigint', identity: 'always', not_null: true });
    expect(posts.columns[1]).toMatchObject({ type: 'uuid', default: 'basalt.uid()', not_null: true });
    expect(posts.constraints).toContainEqual({
      name: 'posts_author_id_fkey',
      type: 'foreign_key',
      definition: 'FOREIGN KEY (author_id) REFERENCES authors(id) ON DELETE CASCADE',
    });
    expect((await structure(s, a, 'authors')).body.data.columns[3]).toMatchObject({
      name: 'motto',
      default: "'it''s; DROP TABLE legacy; --'::text",
    });

    // Owned by the signed-in user: shown in the Access view, and in effect for users at once.
    const access = await adminReq(s, a, 'GET', '/api/admin/data/posts/access');
    expect(access.body.data).toMatchObject({ rls: true, warnings: [] });
    expect(access.body.data.roles.basalt_user.delete).toBe(true);
    expect(access.body.data.policies).toEqual([
      expect.objectContaining({ name: 'own', using: '(owner = basalt.uid())', with_check: '(owner = basalt.uid())' }),
    ]);
    const ada = await signInUser(s);
    const bob = await signInUser(s);
    const ins = await s.req('POST', '/api/v1/db/query', {
      headers: ada.headers(),
      body: { entity: 'posts', action: 'insert', data: { title: 'mine' }, fields: ['title', 'owner', 'published'] },
    });
    expect(ins.body.data.rows).toEqual([{ title: 'mine', owner: ada.user.id, published: false }]);
    const seen = await s.req('POST', '/api/v1/db/query', {
      headers: bob.headers(),
      body: { entity: 'posts', action: 'select' },
    });
    expect(seen.body.data.rows).toEqual([]);
    // The attacker's side: Bob cannot write a row in Ada's name, nor take or change hers.
    const forged = await s.req('POST', '/api/v1/db/query', {
      headers: bob.headers(),
      body: { entity: 'posts', action: 'insert', data: { title: 'forged', owner: ada.user.id } },
    });
    expect(forged.status).toBe(403);
    const taken = await s.req('POST', '/api/v1/db/query', {
      headers: bob.headers(),
      body: {
        entity: 'posts',
        action: 'update',
        data: { owner: bob.user.id, title: 'taken' },
        filters: [{ field: 'title', op: 'eq', value: 'mine' }],
        fields: ['title'],
      },
    });
    expect(taken.status).toBe(200);
    expect(taken.body.data.rows).toEqual([]);
    const still = await s.req('POST', '/api/v1/db/query', {
      headers: ada.headers(),
      body: { entity: 'posts', action: 'select', fields: ['title', 'owner'] },
    });
    expect(still.body.data.rows).toEqual([{ title: 'mine', owner: ada.user.id }]);
  }, 120_000);

  test('change columns, constraints and indexes; each apply is the next migration file', async () => {
    const r = await apply([
      { op: 'add_column', table: 'authors', column: { name: 'age', type: 'int' } },
      { op: 'rename_column', table: 'authors', column: 'motto', to: 'tagline' },
      { op: 'alter_column', table: 'authors', column: 'age', type: 'bigint', default: { value: '18' } },
      { op: 'add_check', table: 'authors', name: 'adult', expression: 'age >= 18' },
      { op: 'add_index', table: 'authors', columns: ['name'] },
      { op: 'add_index', table: 'authors', columns: ['name', 'age'], unique: true, name: 'authors_name_age' },
      { op: 'add_unique', table: 'posts', columns: ['title', 'author_id'] },
      { op: 'add_column', table: 'legacy', column: { name: 'author_id', type: 'uuid' } },
      {
        op: 'add_foreign_key',
        table: 'legacy',
        columns: ['author_id'],
        references: { table: 'authors' },
        on_delete: 'set null',
      },
    ]);
    expect(r.status).toBe(200);
    expect(r.body.data.migration.file).toBe(join(dir, '003_panel_authors_schema.sql'));
    const authors = (await structure(s, a, 'authors')).body.data;
    expect(authors.columns.find((c: { name: string }) => c.name === 'age')).toMatchObject({
      type: 'bigint',
      default: "'18'::bigint",
    });
    expect(authors.constraints).toContainEqual({ name: 'adult', type: 'check', definition: 'CHECK ((age >= 18))' });
    expect(authors.indexes.map((i: { name: string }) => i.name)).toEqual([
      'authors_email_key',
      'authors_name_age',
      'authors_name_idx',
      'authors_pkey',
    ]);
    const legacy = (await structure(s, a, 'legacy')).body.data;
    expect(legacy.constraints).toContainEqual(
      expect.objectContaining({ type: 'foreign_key', definition: expect.stringContaining('ON DELETE SET NULL') }),
    );

    const r2 = await apply([
      { op: 'drop_index', table: 'authors', name: 'authors_name_idx' },
      { op: 'drop_constraint', table: 'authors', name: 'adult' },
      { op: 'alter_column', table: 'authors', column: 'age', default: null, not_null: false },
      { op: 'drop_column', table: 'authors', column: 'tagline' },
    ]);
    expect(r2.status).toBe(200);
    expect(r2.body.data.migration.file).toBe(join(dir, '004_panel_authors_schema.sql'));
    const after = (await structure(s, a, 'authors')).body.data;
    expect(after.columns.map((c: { name: string }) => c.name)).toEqual(['id', 'name', 'email', 'age']);
    expect(after.constraints.map((c: { name: string }) => c.name)).not.toContain('adult');
  }, 120_000);

  test('warnings before a change: rows a new rule refuses (counted), dependents, keys, realtime, a large rewrite', async () => {
    await createKey(s, { permissions: ['db:query'], tables: ['legacy'] });
    const rt = await adminReq(s, a, 'POST', '/api/admin/data/legacy/access', {
      changes: [{ op: 'realtime', enabled: true }],
    });
    expect(rt.status).toBe(200);
    const before = files();
    const p = await preview([{ op: 'alter_column', table: 'legacy', column: 'label', not_null: true }]);
    // The refusal names the change, with the rows counted first.
    expectAError(p, 400, 'validation_error');
    expect(p.body.error.details.fields['changes[0]']).toMatch(
      /^PostgreSQL refused the change: .*contains null values.* \(2 rows are in the way: null in label; the change fails until they are fixed\.\)$/,
    );
    const unique = await preview([{ op: 'add_unique', table: 'legacy', columns: ['code'] }]);
    expect(unique.body.error.details.fields['changes[0]']).toContain(
      '(2 rows are in the way: the same code as another row;',
    );
    const check = await preview([{ op: 'add_check', table: 'legacy', expression: 'n > 0' }]);
    expect(check.body.error.details.fields['changes[0]']).toContain(
      '(1 row is in the way: failing the check; the change fails until it is fixed.)',
    );

    // A rename: what reads the column, the key that whitelists the table, realtime.
    const rename = await preview([{ op: 'rename_column', table: 'legacy', column: 'n', to: 'amount' }]);
    expect(rename.status).toBe(200);
    const codes = (w: { code: string }[]) => w.map((x) => x.code).sort();
    expect(codes(rename.body.data.warnings)).toEqual(['api_keys', 'dependent_policies', 'realtime']);
    expect(rename.body.data.warnings.find((w: { code: string }) => w.code === 'api_keys')).toMatchObject({
      count: 1,
      message: expect.stringContaining('1 service key whitelists table legacy'),
    });
    // A drop of a column a view reads: warned, then refused by PostgreSQL; nothing applied.
    const drop = await preview([{ op: 'drop_column', table: 'legacy', column: 'code' }]);
    expectAError(drop, 400, 'validation_error');
    expect(drop.body.error.details.fields['changes[0]']).toContain('legacy_codes');
    // A type change of a large table: the rewrite is announced with its size.
    const big = await preview([{ op: 'alter_column', table: 'big', column: 'v', type: 'text' }]);
    expect(big.status).toBe(200);
    expect(big.body.data.warnings).toEqual([
      expect.objectContaining({
        code: 'table_rewrite',
        message: expect.stringContaining('rewrites big (about 12,000 rows'),
      }),
    ]);
    expect(big.body.data.statements).toEqual(['ALTER TABLE "public"."big" ALTER COLUMN "v" TYPE text USING "v"::text']);
    // varchar → text needs no rewrite.
    const cheap = await preview([{ op: 'alter_column', table: 'authors', column: 'email', type: 'text' }]);
    expect(cheap.body.data.warnings).toEqual([
      expect.objectContaining({ code: 'dependent_indexes', message: expect.stringContaining('authors_email_key') }),
    ]);
    expect(files()).toEqual(before);
  }, 120_000);

  test('bad names, types and expressions: 400 naming the field, nothing applied', async () => {
    const before = files();
    const field = async (changes: unknown[], name: string, message: RegExp) => {
      const r = await apply(changes);
      expectAError(r, 400, 'validation_error');
      expect(Object.keys(r.body.error.details.fields)).toEqual([name]);
      expect(r.body.error.details.fields[name]).toMatch(message);
    };
    const table = (columns: unknown[], name = 'nice') => [{ op: 'create_table', table: name, columns }];
    await field(table([], 'bad"name'), 'changes[0].table', /must start with a letter/);
    await field(table([{ name: 'x y', type: 'text' }]), 'changes[0].columns[0].name', /must start with a letter/);
    await field(
      table([{ name: 'x', type: 'text; DROP TABLE legacy' }]),
      'changes[0].columns[0].type',
      /not a type name/,
    );
    await field(table([{ name: 'x', type: 'no_such_type' }]), 'changes[0].columns[0].type', /unknown type/);
    await field(table([{ name: 'x', type: 'trigger' }]), 'changes[0].columns[0].type', /pseudo-type/);
    await field(table([{ name: 'x', type: 'basalt.users' }]), 'changes[0].columns[0].type', /platform's schema/);
    await field(
      table([{ name: 'x', type: 'int', references: { table: 'nope' } }]),
      'changes[0].columns[0].references.table',
      /no table 'nope'/,
    );
    await field([{ op: 'drop_column', table: 'legacy', column: 'nope' }], 'changes[0].column', /no column 'nope'/);
    await field(
      [{ op: 'add_column', table: 'nope', column: { name: 'x', type: 'int' } }],
      'changes[0].table',
      /no table/,
    );
    await field(
      [{ op: 'add_check', table: 'legacy', expression: 'true); DROP TABLE legacy; --' }],
      'changes[0].expression',
      /PostgreSQL refused the expression/,
    );
    await field(
      [{ op: 'add_check', table: 'legacy', expression: "set_config('role', 'x', false) IS NOT NULL" }],
      'changes[0].expression',
      /calls set_config/,
    );
    // The second change fails: the first is not applied either.
    await field(
      [
        { op: 'add_column', table: 'legacy', column: { name: 'fine', type: 'int' } },
        { op: 'add_column', table: 'legacy', column: { name: 'fine', type: 'int' } },
      ],
      'changes[1]',
      /already exists/,
    );
    expect((await structure(s, a, 'legacy')).body.data.columns.map((c: { name: string }) => c.name)).not.toContain(
      'fine',
    );
    expect((await adminReq(s, a, 'POST', '/api/admin/data/tables', { changes: [] })).status).toBe(400);
    // A NUL in a name PostgreSQL cannot take as text: the field, or no such table (never a 500).
    await field([{ op: 'drop_column', table: 'leg\u0000acy', column: 'n' }], 'changes[0]', /PostgreSQL refused/);
    expectAError(await structure(s, a, 'leg%00acy'), 404, 'not_found');
    expect(files()).toEqual(before);
  });

  test('a check expression PostgreSQL would refuse in a CHECK is never evaluated first (preview or apply)', async () => {
    const before = files();
    // A subquery (here reading the platform's secrets) is no CHECK: refused before any row is
    // counted, so neither the count of the warning nor an error message can carry what it reads.
    for (const expression of [
      "(SELECT count(*) FROM basalt.secrets WHERE value LIKE 'a%') = 0",
      '(SELECT value FROM basalt.secrets LIMIT 1)::int > 0',
      'n > (SELECT max(n) FROM legacy)',
      'count(*) > 0',
      'generate_series(1, n) > 0',
    ])
      for (const send of [preview, apply]) {
        const r = await send([{ op: 'add_check', table: 'legacy', expression }]);
        expectAError(r, 400, 'validation_error');
        expect(Object.keys(r.body.error.details.fields)).toEqual(['changes[0].expression']);
        expect(r.body.error.details.fields['changes[0].expression']).toMatch(/PostgreSQL refused the expression/);
      }
    // Nor a server function the platform's role (maybe a superuser) would run over every row.
    for (const [expression, fn] of [
      ['lo_get(n) IS NOT NULL', 'lo_get'],
      ['pg_promote(true, n) OR true', 'pg_promote'],
      // The platform's own (SECURITY DEFINER) functions: an event forged per row at the apply.
      ["pg_typeof(basalt.platform_event('user.created', '{}'::jsonb)) IS NOT NULL", 'platform_event'],
    ] as const) {
      const r = await preview([{ op: 'add_check', table: 'legacy', expression }]);
      expectAError(r, 400, 'validation_error');
      expect(r.body.error.details.fields['changes[0].expression']).toContain(`calls ${fn}`);
    }
    // A check failing on a row while its refusals are counted: the field, not a 500.
    const zero = await preview([{ op: 'add_check', table: 'legacy', expression: '100 / (n + 1) > 0' }]);
    expectAError(zero, 400, 'validation_error');
    expect(zero.body.error.details.fields['changes[0].expression']).toMatch(/division by zero/);
    expect(files()).toEqual(before);
  });

  test('a lock not granted in time: 409, nothing applied (external: a transaction beside the server)', async () => {
    if (engine !== 'external') return;
    const before = files();
    const { default: postgres } = await import('postgres');
    const other = postgres(s.db.url, { max: 1 });
    try {
      await other.begin(async (tx) => {
        await tx`LOCK TABLE legacy IN ACCESS SHARE MODE`;
        const started = Date.now();
        const r = await apply([{ op: 'add_column', table: 'legacy', column: { name: 'late', type: 'int' } }]);
        expectAError(r, 409, 'conflict');
        expect(Date.now() - started).toBeGreaterThanOrEqual(4_000);
      });
      // A table locked by a migration: the reads before a change wait 5 s at most too.
      await other.begin(async (tx) => {
        await tx`LOCK TABLE legacy IN ACCESS EXCLUSIVE MODE`;
        for (const change of [
          { op: 'add_column', table: 'legacy', column: { name: 'late', type: 'int', not_null: true } },
          { op: 'add_check', table: 'legacy', expression: 'n > -5' },
          { op: 'add_unique', table: 'legacy', columns: ['code'] },
        ])
          expectAError(await preview([change]), 409, 'conflict');
      });
      // Another apply holding the migrations' lock (a long rewrite, a start migrating) past 5 s.
      await other.begin(async (tx) => {
        await tx`SELECT pg_advisory_xact_lock(${0x6261_7361})`;
        const r = await apply([{ op: 'add_column', table: 'legacy', column: { name: 'late', type: 'int' } }]);
        expectAError(r, 409, 'conflict');
      });
    } finally {
      await other.end();
    }
    expect(files()).toEqual(before);
    expect((await structure(s, a, 'legacy')).body.data.columns.map((c: { name: string }) => c.name)).not.toContain(
      'late',
    );
  }, 60_000);

  test('a default value with backslashes and quotes is that value, whatever standard_conforming_strings says', async () => {
    const value = "C:\\temp\\'; DROP TABLE legacy; --";
    const r = await apply([
      { op: 'add_column', table: 'authors', column: { name: 'path', type: 'text', default: { value } } },
    ]);
    expect(r.status).toBe(200);
    // An E'' literal (backslashes doubled) reads the same with the setting off, in the file too.
    expect(r.body.data.statements).toEqual([
      `ALTER TABLE "public"."authors" ADD COLUMN "path" text DEFAULT E'C:\\\\temp\\\\''; DROP TABLE legacy; --'`,
    ]);
    const cols = (await structure(s, a, 'authors')).body.data.columns;
    expect(cols.find((c: { name: string }) => c.name === 'path').default).toBe(
      "'C:\\temp\\''; DROP TABLE legacy; --'::text",
    );
  });

  test('a fresh database built from migrations.dir ends with the same schema', async () => {
    const db2 = await freshDb(engine);
    const s2 = await startServer(engine, { db: db2, env: { BASALT_MIGRATIONS_DIR: dir } });
    try {
      const a2 = await signInAdmin(s2);
      const names = (x: { name: string }[]) => x.map((t) => t.name).sort();
      const here = names((await adminReq(s, a, 'GET', '/api/admin/data/tables')).body.data.tables);
      const there = names((await adminReq(s2, a2, 'GET', '/api/admin/data/tables')).body.data.tables);
      expect(there).toEqual(here);
      expect(here).toEqual(['authors', 'big', 'legacy', 'legacy_codes', 'posts']);
      for (const t of ['authors', 'big', 'legacy', 'posts']) {
        const mine = await structure(s, a, t);
        expect(mine.status).toBe(200);
        expect((await structure(s2, a2, t)).body.data).toEqual(mine.body.data);
        const rules = (r: { body: { data: Record<string, unknown> } }) => {
          const { table, rls, roles, policies, realtime } = r.body.data;
          return { table, rls, roles, policies, realtime };
        };
        const access = await adminReq(s, a, 'GET', `/api/admin/data/${t}/access`);
        expect(rules(await adminReq(s2, a2, 'GET', `/api/admin/data/${t}/access`))).toEqual(rules(access));
      }
    } finally {
      await s2.stop();
      await db2.drop();
    }
  }, 240_000);
});
