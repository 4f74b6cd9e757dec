/**
 * The statements a wire session keeps prepared by their text, for both engines' batches
 * (src/db/embedded-wire.ts, src/db/wire/connection.ts): at most PREPARED_MAX, the least recently
 * used closed beyond (in the batch being written); those a failed batch may have left uncertain
 * closed at the start of the next; and the rule for a statement gone stale (STALE: the session
 * no longer has it, or the schema changed its result) — all are let go of, and the batch,
 * rolled back as a whole, runs once more parsed anew, outside a transaction only.
 */
import { BoundedMap } from '../../util/bounded-map';
import { CLOSE, PREPARED_MAX, STALE, type Writer } from '../wire-writer';

export class PreparedStatements<P extends { readonly name: string }> {
  private readonly kept: BoundedMap<string, P>;
  private named = 0;
  /** Names to close at the start of the next batch (let go of, or left uncertain by a failed batch). */
  private readonly closing: string[] = [];
  /** Names the batch being written parses. */
  private readonly parsed: string[] = [];

  /** `w`: the session's writer, which every batch is written into; `prefix`: of the statements' names. */
  constructor(
    private readonly w: Writer,
    private readonly prefix: string,
  ) {
    this.kept = new BoundedMap<string, P>(PREPARED_MAX, (_sql, old) => close(w, old.name));
  }

  /** A batch begins (its writer reset): the statements let go of are closed first; closing one the session does not have is no error. */
  begin(): void {
    for (const name of this.closing) close(this.w, name);
    this.closing.length = 0;
    this.parsed.length = 0;
  }

  /** The statement prepared for `sql`, now the most recently used; undefined: the batch parses it (`name`, `add`). */
  get(sql: string): P | undefined {
    return this.kept.get(sql);
  }

  /** A name for a statement the batch parses. */
  name(): string {
    return this.prefix + ++this.named;
  }

  /** `p`, parsed by this batch, kept for `sql`; beyond PREPARED_MAX, the least recently used is closed. */
  add(sql: string, p: P): void {
    this.parsed.push(p.name);
    this.kept.set(sql, p);
  }

  /**
   * The batch failed with SQLSTATE `code`: the statements it parsed may or may not exist now, so
   * they are closed before the next batch and parsed again when needed; a stale statement lets
   * go of all. Whether the batch should run once more: a stale statement, where `mayRerun` (not
   * inside a transaction, whose statement's error aborted it, nor a second time).
   */
  failed(code: unknown, mayRerun: boolean): boolean {
    const stale = STALE.has(String(code ?? ''));
    for (const [sql, p] of [...this.kept]) {
      if (!stale && !this.parsed.includes(p.name)) continue;
      this.kept.delete(sql);
      this.closing.push(p.name);
    }
    return stale && mayRerun;
  }
}

function close(w: Writer, name: string): void {
  w.begin(CLOSE).byte(0x53).cstring(name).end(); // 'S': a statement
}
