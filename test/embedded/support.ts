/**
 * The compiled executable on the embedded engine, for the durability, availability,
 * file-mode and signal suites: one cluster created once per run (initdb is slow on a
 * busy machine) with a `notes` table and a service key for it, copied for each test.
 */
import { cpSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { installBinary, runBinary } from '../helpers/binary';
import { createKeyByCli } from '../helpers/keys';

export const NOTES_SQL = 'CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL);\n';

interface Template {
  exe: string;
  /** A stopped data dir holding the cluster, the table and the key. */
  data: string;
  key: string;
}
let template: Promise<Template> | undefined;

function prepare(): Promise<Template> {
  return (template ??= (async () => {
    const { dir, exe } = await installBinary();
    mkdirSync(join(dir, 'migrations'));
    writeFileSync(join(dir, 'migrations', '001_notes.sql'), NOTES_SQL);
    const env = { BASALT_LOG_LEVEL: 'warn', BASALT_DATABASE_EMBEDDED_SYNC: 'off' };
    const migrated = await runBinary(exe, ['migrate'], dir, env);
    if (migrated.code !== 0) throw new Error(`basalt migrate failed: ${migrated.stderr}`);
    const { key } = await createKeyByCli(exe, dir, env, {
      service: 'tests',
      permissions: ['db:*', 'mail:send'],
      tables: ['notes'],
    });
    return { exe, data: join(dir, 'basalt_data'), key };
  })());
}

/**
 * A directory with its own copy of the executable, the migrations and the prepared data
 * dir (at `data`, default `<dir>/basalt_data`), and the key of the `notes` table.
 */
export async function preparedInstance(
  data?: string,
): Promise<{ dir: string; exe: string; data: string; key: string }> {
  const t = await prepare();
  const dir = mkdtempSync(join(tmpdir(), 'basalt-embedded-'));
  const exe = join(dir, 'basalt');
  cpSync(t.exe, exe);
  mkdirSync(join(dir, 'migrations'));
  writeFileSync(join(dir, 'migrations', '001_notes.sql'), NOTES_SQL);
  const target = data ?? join(dir, 'basalt_data');
  cpSync(t.data, target, { recursive: true });
  return { dir, exe, data: target, key: t.key };
}

/** One Database API statement on `notes` through the server at `url`. */
export function dbQuery(url: string, key: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(url + '/api/v1/db/query', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ entity: 'notes', ...body }),
  });
}
