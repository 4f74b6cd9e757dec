/**
 * The embedded engine's view of its data dir: PGlite's NodeFS (Emscripten's NODEFS, each
 * PostgreSQL file a real file on disk) with two things Emscripten leaves out.
 *
 * - **fsync.** PostgreSQL's `fsync(fd)` reaches Emscripten's `fd_sync`, which calls the
 *   stream's `fsync` operation — and NODEFS has none, so it returned success without
 *   touching the disk (and `fdatasync` is a no-op syscall in Emscripten: the engine is
 *   started with `wal_sync_method=fsync` so WAL flushes take the `fsync` path, see
 *   src/db/embedded.ts). Here `fsync` is `fsyncSync` on the real file descriptor: WAL
 *   at commit, data files and `pg_control` at checkpoint, directories after a rename
 *   (PostgreSQL's `fsync_fname`). A failure is reported to PostgreSQL as the errno,
 *   which it turns into a PANIC (`data_sync_retry = off`): the engine stops rather than
 *   carry on over data the disk may not hold. With group commit (`WalSyncs`, `full`), a WAL
 *   segment's `fsync` is answered at once and done by the next shared sync
 *   (src/db/group-commit.ts), and the WAL noted so far is synced in line before any other
 *   `fsync` and before any write outside `pg_wal/`, so PostgreSQL's order of writes holds.
 * - **Private modes.** Files and folders PostgreSQL creates are 0600 / 0700 whatever the
 *   process umask (PostgreSQL asks for 0666 / 0777 inside the WebAssembly, where its own
 *   umask does not reach the real files).
 *
 * docs/operations.md, "Durability" and "File modes".
 */
import { fsyncSync } from 'node:fs';
import { NodeFS } from '@electric-sql/pglite/nodefs';
import type { PGlite } from '@electric-sql/pglite';
import type { WalSyncs } from './group-commit';

/** What `fsync` was called on, counted per kind (tests and the start-up log). */
export interface SyncCounts {
  /** WAL segments (`pg_wal/`): commits and WAL flushes. */
  wal: number;
  /** `global/pg_control`: checkpoints and start-up. */
  control: number;
  /** Everything else: relation files, SLRUs, state files, directories. */
  other: number;
}

interface FsStream {
  nfd?: number;
  node: unknown;
}
interface Attr {
  mode?: number;
}
interface NodeOps {
  mknod(parent: unknown, name: string, mode: number, dev: number): unknown;
  setattr(node: unknown, attr: Attr): void;
  rename(oldNode: unknown, newDir: unknown, newName: string): void;
  unlink(parent: unknown, name: string): void;
}
/** The engine's module as far as a restore command needs it (Emscripten's, and PGlite's hook). */
interface EngineModule {
  NODEFS: EmscriptenNodeFs;
  onRuntimeInitialized?: () => void;
  addFunction(fn: (ptr: number) => number, signature: string): number;
  UTF8ToString(ptr: number): string;
  _pgl_set_system_fn(fn: number): void;
}

/**
 * What the WAL archive (src/modules/backup/wal-archive.ts) needs of the file layer: to hear of a
 * WAL segment before PostgreSQL removes or recycles it (so none is lost unarchived), and, for a
 * point-in-time restore, to answer PostgreSQL's `restore_command`, which it runs with `system()`.
 */
export interface WalHooks {
  /** `path` (a WAL segment on disk) is about to be removed or renamed for reuse. Synchronous; never throws. */
  beforeSegmentGone?: (path: string) => void;
  /** Runs `restore_command`: a wait status as `system()` returns it (0, or exit code << 8). Synchronous. */
  system?: (command: string) => number;
}
type Write = (stream: FsStream, buffer: Uint8Array, offset: number, length: number, position?: number) => number;
interface EmscriptenNodeFs {
  stream_ops: { fsync?: (stream: FsStream) => number; setattr(stream: FsStream, attr: Attr): void; write: Write };
  node_ops: NodeOps;
  realPath(node: unknown): string;
  /** Runs `fn`, turning a Node error into the errno Emscripten's FS throws. */
  tryFSOperation<T>(fn: () => T): T;
}
/**
 * What a stream's file is, for syncs: a WAL segment, anything else in pg_wal/, pg_control,
 * scratch (what no recovery reads: the NOTIFY queue, subtransactions, temporary files), the rest.
 */
type Kind = 'segment' | 'wal' | 'control' | 'scratch' | 'other';
const SEGMENT = /\/pg_wal\/[0-9A-F]{24}$/;
const SCRATCH = /\/(pg_notify|pg_subtrans|pgsql_tmp)\//;
/** Files written only once the WAL before them is on disk (PostgreSQL's order). */
const afterWal = (kind: Kind) => kind === 'other' || kind === 'control';
type EmOpts = Parameters<NodeFS['init']>[1];

const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;

export class DurableNodeFS extends NodeFS {
  readonly syncs: SyncCounts = { wal: 0, control: 0, other: 0 };

  /** `group`: WAL segments are synced by group commit (src/db/group-commit.ts) instead of in line. */
  constructor(
    dir: string,
    private readonly group?: WalSyncs,
    private readonly hooks: WalHooks = {},
  ) {
    super(dir);
  }

  override async init(pg: PGlite, opts: EmOpts) {
    const { emscriptenOpts } = await super.init(pg, opts);
    const preRun = [emscriptenOpts.preRun ?? []].flat() as ((mod: { NODEFS: EmscriptenNodeFs }) => void)[];
    return {
      emscriptenOpts: {
        ...emscriptenOpts,
        preRun: [
          ...preRun,
          (mod: EngineModule) => {
            this.patch(mod.NODEFS);
            this.systemHook(mod);
          },
        ],
      },
    } as Awaited<ReturnType<NodeFS['init']>>;
  }

  /**
   * PGlite answers every `system()` of PostgreSQL with 1, which PostgreSQL reads as a child
   * killed by a signal (a restore then stops, FATAL). When a `system` hook is given, it
   * replaces PGlite's, installed once the runtime is up (where PGlite installs its own).
   */
  private systemHook(mod: EngineModule): void {
    const system = this.hooks.system;
    if (!system) return;
    if (typeof mod._pgl_set_system_fn !== 'function' || typeof mod.addFunction !== 'function')
      throw new Error('embedded engine: this PGlite build lacks _pgl_set_system_fn (src/db/embedded-fs.ts)');
    const pglite = mod.onRuntimeInitialized;
    mod.onRuntimeInitialized = () => {
      pglite?.();
      mod._pgl_set_system_fn(mod.addFunction((ptr) => system(mod.UTF8ToString(ptr)), 'pi'));
    };
  }

  private patch(nodefs: EmscriptenNodeFs): void {
    const counts = this.syncs;
    const group = this.group;
    if (typeof nodefs.tryFSOperation !== 'function')
      throw new Error('embedded engine: this PGlite build lacks NODEFS.tryFSOperation (src/db/embedded-fs.ts)');
    // A stream's file and its kind, found once (realPath walks the node's parents).
    const files = new WeakMap<FsStream, { path: string; kind: Kind }>();
    const fileOf = (stream: FsStream) => {
      let file = files.get(stream);
      if (file === undefined) {
        const path = nodefs.realPath(stream.node);
        const kind: Kind = SEGMENT.test(path)
          ? 'segment'
          : path.includes('/pg_wal/')
            ? 'wal'
            : path.endsWith('/global/pg_control')
              ? 'control'
              : SCRATCH.test(path)
                ? 'scratch'
                : 'other';
        files.set(stream, (file = { path, kind }));
      }
      return file;
    };
    nodefs.stream_ops.fsync = (stream) => {
      if (stream.nfd === undefined) return 0;
      const { path, kind } = fileOf(stream);
      // Emscripten's FS calls this synchronously from the WebAssembly; an errno thrown
      // as FS.ErrnoError would need its class, so failures go back as the errno value.
      try {
        if (group && kind === 'segment') {
          try {
            group.defer(path);
          } catch (e) {
            if (group.failed) throw e;
            // No descriptor of our own (out of them, say): this one is synced in line.
            group.syncNow();
            fsyncSync(stream.nfd);
          }
        } else {
          // Whatever PostgreSQL syncs after the WAL (pg_control, a folder, a data file) finds it on disk.
          group?.syncNow();
          fsyncSync(stream.nfd);
        }
      } catch (e) {
        return errnoOf(e);
      }
      if (kind === 'segment' || kind === 'wal') counts.wal++;
      else if (kind === 'control') counts.control++;
      else counts.other++;
      return 0;
    };
    if (group) {
      // A data page goes to its file only after the WAL up to its LSN is on disk (PostgreSQL's
      // rule, which it keeps by flushing the WAL first: that flush may be one noted, not done).
      // Zeros (a relation extended by new, empty pages) depend on no WAL.
      const write = nodefs.stream_ops.write;
      nodefs.stream_ops.write = (stream, buffer, offset, length, position) => {
        if (group.pending && afterWal(fileOf(stream).kind) && !zeros(buffer, offset, length))
          nodefs.tryFSOperation(() => group.syncNow());
        return write(stream, buffer, offset, length, position);
      };
    }
    const gone = this.hooks.beforeSegmentGone;
    if (gone) {
      // PostgreSQL removes old segments, or renames them to a future name to reuse them.
      const { rename, unlink } = nodefs.node_ops;
      nodefs.node_ops.unlink = (parent, name) => {
        if (/^[0-9A-F]{24}$/.test(name)) {
          const path = `${nodefs.realPath(parent)}/${name}`;
          if (path.endsWith(`/pg_wal/${name}`)) gone(path);
        }
        return unlink(parent, name);
      };
      nodefs.node_ops.rename = (oldNode, newDir, newName) => {
        const path = nodefs.realPath(oldNode);
        if (SEGMENT.test(path)) gone(path);
        return rename(oldNode, newDir, newName);
      };
    }
    // Created, or chmod-ed by PostgreSQL's C library (it sets 0644 on some files it
    // replaces by rename, e.g. pg_internal.init): never more than the owner's.
    const own = (mode: number) => ((mode & S_IFMT) === S_IFDIR ? mode & ~0o7077 : mode & ~0o7177);
    const { mknod, setattr } = nodefs.node_ops;
    nodefs.node_ops.mknod = (parent, name, mode, dev) => mknod(parent, name, own(mode), dev);
    nodefs.node_ops.setattr = (node, attr) =>
      setattr(node, attr.mode === undefined ? attr : { ...attr, mode: own(attr.mode) });
    const fset = nodefs.stream_ops.setattr;
    nodefs.stream_ops.setattr = (stream, attr) =>
      fset(stream, attr.mode === undefined ? attr : { ...attr, mode: own(attr.mode) });
  }
}

/** The WASI errno of a failed Node fs call (EIO when unknown): PostgreSQL reports it. */
function errnoOf(e: unknown): number {
  // WASI errno numbers (Emscripten's FS uses them): https://github.com/WebAssembly/WASI
  const wasi: Record<string, number> = { ENOSPC: 51, EIO: 29, EBADF: 8, EROFS: 69, EDQUOT: 19, EINVAL: 28 };
  return wasi[(e as NodeJS.ErrnoException)?.code ?? ''] ?? 29;
}

/** Whether `length` bytes of `buffer` from `offset` are all zero (a page PostgreSQL reads as new). */
function zeros(buffer: Uint8Array, offset: number, length: number): boolean {
  const end = offset + length;
  for (let i = offset; i < end; i++) if (buffer[i] !== 0) return false;
  return true;
}
