/** File metadata in `ext_media_library.files`; every statement is parameterized. */
import type { ExtensionDb } from 'basalt';
import type { Caller } from './access';
import type { StorageKind } from './storage';

export interface FileRow {
  id: string;
  owner_type: 'user' | 'key';
  owner_id: string;
  name: string;
  content_type: string;
  size: string;
  sha256: string;
  storage: StorageKind;
  storage_key: string;
  created_at: Date;
}

const COLUMNS = 'id, owner_type, owner_id, name, content_type, size, sha256, storage, storage_key, created_at';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A user sees their own files; a key sees all. Returns the WHERE clause and its parameters from `$from`. */
function visible(who: Caller, from: number): { sql: string; params: unknown[] } {
  if (who.type === 'key') return { sql: 'TRUE', params: [] };
  return { sql: `owner_type = 'user' AND owner_id = $${from}`, params: [who.id] };
}

export function filesStore(db: ExtensionDb) {
  const files = db.table('files');
  return {
    async insert(row: Omit<FileRow, 'created_at'>): Promise<FileRow> {
      const { rows } = await db.query<FileRow>(
        `INSERT INTO ${files} (id, owner_type, owner_id, name, content_type, size, sha256, storage, storage_key)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ${COLUMNS}`,
        [
          row.id,
          row.owner_type,
          row.owner_id,
          row.name,
          row.content_type,
          row.size,
          row.sha256,
          row.storage,
          row.storage_key,
        ],
      );
      return rows[0]!;
    },

    /** The file if it exists and the caller may see it (others' files look absent). */
    async find(who: Caller, id: string): Promise<FileRow | undefined> {
      if (!UUID.test(id)) return undefined;
      const v = visible(who, 2);
      const { rows } = await db.query<FileRow>(`SELECT ${COLUMNS} FROM ${files} WHERE id = $1 AND ${v.sql}`, [
        id,
        ...v.params,
      ]);
      return rows[0];
    },

    async list(
      who: Caller,
      opts: { limit: number; offset: number; owner?: { type: string; id: string } },
    ): Promise<{ rows: FileRow[]; total: number }> {
      const v = visible(who, 1);
      const where = [v.sql];
      const params = [...v.params];
      if (opts.owner) {
        params.push(opts.owner.type, opts.owner.id);
        where.push(`owner_type = $${params.length - 1} AND owner_id = $${params.length}`);
      }
      const cond = where.join(' AND ');
      const total = await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${files} WHERE ${cond}`, params);
      const { rows } = await db.query<FileRow>(
        `SELECT ${COLUMNS} FROM ${files} WHERE ${cond} ORDER BY created_at DESC, id LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
        [...params, opts.limit, opts.offset],
      );
      return { rows, total: Number(total.rows[0]!.n) };
    },

    async remove(who: Caller, id: string): Promise<FileRow | undefined> {
      if (!UUID.test(id)) return undefined;
      const v = visible(who, 2);
      const { rows } = await db.query<FileRow>(`DELETE FROM ${files} WHERE id = $1 AND ${v.sql} RETURNING ${COLUMNS}`, [
        id,
        ...v.params,
      ]);
      return rows[0];
    },
  };
}

export type FilesStore = ReturnType<typeof filesStore>;
