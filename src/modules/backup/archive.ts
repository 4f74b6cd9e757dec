/**
 * The backup archive format (docs/backup.md): a gzip-compressed POSIX tar whose first
 * member is the manifest `basalt-backup.json`, then directories and files. Written and
 * read as streams (an archive is never held in memory); long names use PAX `path`
 * records. Only regular files and directories are written or accepted.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';

export type Entry =
  | { type: 'dir'; path: string }
  | { type: 'file'; path: string; size: number; source: string }
  | { type: 'file'; path: string; size: number; data: Uint8Array };

const BLOCK = 512;
const ZERO = new Uint8Array(BLOCK);

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, '0') + '\0';
}

function header(name: string, size: number, type: '0' | '5' | 'x', mtime: number): Uint8Array {
  const h = Buffer.alloc(BLOCK);
  h.write(name, 0, 100, 'utf8');
  h.write(octal(type === '5' ? 0o755 : 0o600, 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii');
  h.write(octal(0, 8), 116, 'ascii');
  h.write(octal(size, 12), 124, 'ascii');
  h.write(octal(mtime, 12), 136, 'ascii');
  h.fill(0x20, 148, 156); // checksum field counts as spaces
  h.write(type, 156, 'ascii');
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += h[i]!;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 'ascii');
  return h;
}

function pad(size: number): Uint8Array {
  const rest = size % BLOCK;
  return rest ? ZERO.subarray(0, BLOCK - rest) : ZERO.subarray(0, 0);
}

/** Header block(s) of one entry; a PAX record carries names over 100 bytes. */
function headers(path: string, size: number, type: '0' | '5', mtime: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  if (Buffer.byteLength(path) > 99) {
    const body = (() => {
      // "<len> path=<value>\n" where <len> counts itself.
      const rest = ` path=${path}\n`;
      let len = Buffer.byteLength(rest) + 1;
      while (String(len).length + Buffer.byteLength(rest) !== len) len++;
      return Buffer.from(`${len}${rest}`);
    })();
    out.push(header('PaxHeader', body.length, 'x', mtime), body, pad(body.length));
  }
  out.push(header(Buffer.byteLength(path) > 99 ? path.slice(0, 90) : path, size, type, mtime));
  return out;
}

async function* tarStream(entries: Iterable<Entry>): AsyncGenerator<Uint8Array> {
  const mtime = Math.floor(Date.now() / 1000);
  for (const e of entries) {
    if (e.type === 'dir') {
      yield* headers(e.path.endsWith('/') ? e.path : e.path + '/', 0, '5', mtime);
      continue;
    }
    yield* headers(e.path, e.size, '0', mtime);
    let written = 0;
    if ('data' in e) {
      yield e.data;
      written = e.data.length;
    } else {
      for await (const chunk of createReadStream(e.source, { highWaterMark: 1 << 20 })) {
        const c = chunk as Buffer;
        // The staged copy is immutable; a size change means something else wrote to it.
        if (written + c.length > e.size) throw new Error(`${e.path} grew while it was archived`);
        written += c.length;
        yield c;
      }
    }
    if (written !== e.size) throw new Error(`${e.path} changed size while it was archived`);
    yield pad(e.size);
  }
  yield ZERO;
  yield ZERO;
}

/** Write `entries` as a tar.gz at `path`. */
export async function writeArchive(path: string, entries: Iterable<Entry>, level = 6): Promise<void> {
  await pipeline(Readable.from(tarStream(entries)), createGzip({ level }), createWriteStream(path, { mode: 0o600 }));
}

/** The archive cannot be read: not gzip, truncated, or altered. */
export class ArchiveDamagedError extends Error {}

export interface ReadEntry {
  type: 'dir' | 'file';
  path: string;
  size: number;
}

/**
 * Read a tar.gz as a stream. `onEntry` is called for each entry; for a file it returns a
 * sink receiving the bytes in order (or undefined to skip them), then `end()`.
 */
export async function readArchive(
  path: string,
  onEntry: (
    e: ReadEntry,
  ) => Promise<{ write(chunk: Uint8Array): void | Promise<void>; end(): void | Promise<void> } | undefined>,
): Promise<void> {
  const src = createReadStream(path);
  const gunzip = createGunzip();
  src.on('error', (e) => gunzip.destroy(e));
  src.pipe(gunzip);

  let buf: Buffer = Buffer.alloc(0);
  const it = gunzip[Symbol.asyncIterator]();
  let eof = false;
  async function fill(n: number): Promise<boolean> {
    while (buf.length < n && !eof) {
      let r: IteratorResult<Buffer>;
      try {
        r = await it.next();
      } catch (e) {
        const err = e as NodeJS.ErrnoException;
        if (/incorrect header/.test(err.message))
          throw new ArchiveDamagedError('this is not a Basalt backup (not a gzip file)');
        if (/unexpected end/.test(err.message))
          throw new ArchiveDamagedError('the archive is truncated (it ends early)');
        if (err.code?.startsWith('Z_') || /invalid|incorrect/.test(err.message))
          throw new ArchiveDamagedError(`the archive is damaged (its compressed data is corrupt: ${err.message})`);
        throw e;
      }
      if (r.done) eof = true;
      else buf = buf.length ? Buffer.concat([buf, r.value]) : r.value;
    }
    return buf.length >= n;
  }
  function take(n: number): Buffer {
    const out = buf.subarray(0, n);
    buf = buf.subarray(n);
    return out;
  }

  let paxPath: string | undefined;
  try {
    for (;;) {
      if (!(await fill(BLOCK)))
        throw new ArchiveDamagedError('the archive is truncated (it ends in the middle of an entry)');
      const h = take(BLOCK);
      if (h.every((b) => b === 0)) break; // end-of-archive marker
      let sum = 0;
      for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]!;
      const stored = parseInt(h.subarray(148, 156).toString('ascii').replace(/\0.*$/, '').trim(), 8);
      if (stored !== sum) throw new ArchiveDamagedError('the archive is damaged (a tar header fails its checksum)');
      const size = parseInt(h.subarray(124, 136).toString('ascii').replace(/\0.*$/, '').trim() || '0', 8);
      const type = String.fromCharCode(h[156]!);
      const cstr = (from: number, len: number) => {
        const s = h.subarray(from, from + len);
        const z = s.indexOf(0);
        return (z === -1 ? s : s.subarray(0, z)).toString('utf8');
      };
      const prefix = h.subarray(257, 262).toString('ascii') === 'ustar' ? cstr(345, 155) : '';
      const name = paxPath ?? (prefix ? `${prefix}/${cstr(0, 100)}` : cstr(0, 100));
      paxPath = undefined;
      const padded = Math.ceil(size / BLOCK) * BLOCK;
      if (type === 'x') {
        if (size > 1 << 20 || !(await fill(padded)))
          throw new ArchiveDamagedError('the archive is damaged (a PAX header is damaged or cut short)');
        const text = take(padded).subarray(0, size).toString('utf8');
        const m = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(text);
        paxPath = m?.[1];
        continue;
      }
      if (type === '5') {
        await onEntry({ type: 'dir', path: name.replace(/\/+$/, ''), size: 0 });
        continue;
      }
      if (type !== '0' && type !== '\0')
        throw new ArchiveDamagedError(
          `the archive holds an entry of unexpected type '${type}' (${name.slice(0, 100)}); it is not a Basalt backup or it is damaged`,
        );
      const sink = await onEntry({ type: 'file', path: name, size });
      let left = size;
      while (left > 0) {
        if (!(await fill(1)))
          throw new ArchiveDamagedError(`the archive is truncated (it ends inside ${name.slice(0, 100)})`);
        const chunk = take(Math.min(left, buf.length));
        left -= chunk.length;
        if (sink) await sink.write(chunk);
      }
      if (sink) await sink.end();
      if (!(await fill(padded - size)))
        throw new ArchiveDamagedError(`the archive is truncated (it ends inside ${name.slice(0, 100)})`);
      take(padded - size);
    }
    // Drain: the gzip trailer (CRC32, length) is checked only at the very end.
    while (!eof) await fill(buf.length + 1);
  } finally {
    src.destroy();
    gunzip.destroy();
  }
}
