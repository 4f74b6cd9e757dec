/**
 * Fan-out of one batch of outbox events to a set of streams (docs/realtime.md, "Cost"):
 * 1. per table the streams follow, list the page's captured rows (after and before each
 *    change) and keys, and the identities (service, each user, anon) following it;
 * 2. one statement per (identity, table) evaluates every captured row as that identity
 *    (`RowReader.visible`: grants and policies, asked of PostgreSQL), one per table decodes the keys;
 * 3. walk the events in id order; each event's frame is built once per identity and
 *    queued to every stream of that identity that subscribes to it.
 */
import type { Table } from '../database/catalog';
import type { OutboxEvent } from './outbox';
import type { RowReader, RowsByIndex } from './rows';
import type { Identity } from './principal';
import { frame, type Stream } from './stream';

export interface FanoutCounters {
  sent: number;
  droppedByRules: number;
}

export interface FanoutDeps {
  reader: RowReader;
  /** The data schema (events of other schemas are nobody's). */
  schema: string;
  /** The catalog's table, or undefined (dropped since). */
  table: (name: string) => Promise<{ table?: Table }>;
  counters: FanoutCounters;
  /** An identity whose rows could not be evaluated (it sees nothing of that page). */
  onError: (cause: unknown) => void;
}

/** Deliver `events` (ascending ids) to `streams`; every stream's cursor ends at the last id. */
export async function fanout(deps: FanoutDeps, events: OutboxEvent[], streams: Iterable<Stream>): Promise<void> {
  if (!events.length) return;
  const last = events[events.length - 1]!.id;
  const byTable = new Map<string, Stream[]>();
  const byChannel = new Map<string, Stream[]>();
  const all: Stream[] = [];
  for (const s of streams) {
    if (s.closed || s.cutIfBehind()) continue;
    all.push(s);
    for (const t of s.tables) push(byTable, t, s);
    for (const c of s.channels) push(byChannel, c, s);
  }

  // 1. Per table: the captured rows and keys the page needs; the identities following it.
  const tables = new Map<string, PerTable | null>();
  const slots = new Map<OutboxEvent, Slots>();
  for (const ev of events) {
    if (!ev.table || ev.schema !== deps.schema || !byTable.has(ev.table)) continue;
    let t = tables.get(ev.table);
    if (t === undefined) {
      const found = await deps.table(ev.table);
      t = found.table ? { table: found.table, images: [], keys: [], identities: new Map(), seen: new Map() } : null;
      tables.set(ev.table, t);
      if (t) for (const s of byTable.get(ev.table)!) t.identities.set(s.identityKey, s.identity);
    }
    if (!t) continue;
    const slot: Slots = { key: t.keys.push(ev.pk!) - 1 };
    if (ev.newRow) slot.row = t.images.push(ev.newRow) - 1;
    if (ev.oldRow) slot.old = t.images.push(ev.oldRow) - 1;
    slots.set(ev, slot);
  }

  // 2. One statement per (identity, table) over every captured row; one per table decodes the keys.
  const asks: { t: PerTable; ik: string; identity: Identity }[] = [];
  const keyReads: Promise<void>[] = [];
  for (const t of tables.values()) {
    if (!t) continue;
    for (const [ik, identity] of t.identities) asks.push({ t, ik, identity });
    keyReads.push(deps.reader.keys(t.table, t.keys).then((rows) => void (t.keyRows = rows)));
  }
  const seen = await deps.reader.visible(
    asks.map((a) => ({ identity: a.identity, table: a.t.table, images: a.t.images })),
    deps.onError,
  );
  for (let i = 0; i < asks.length; i++) asks[i]!.t.seen.set(asks[i]!.ik, seen[i]!);
  await Promise.all(keyReads);

  // 3. Frames in id order, built once per identity.
  for (const ev of events) {
    if (ev.channel) {
      const subs = byChannel.get(ev.channel);
      if (!subs) continue;
      let chunk: Uint8Array | undefined;
      for (const s of subs) {
        if (ev.audience && !(s.identity.kind === 'user' && ev.audience.includes(s.identity.userId))) continue;
        chunk ??= frame('message', { channel: ev.channel, data: JSON.parse(ev.payload ?? 'null') }, ev.id);
        if (s.deliver(ev.id, chunk)) deps.counters.sent++;
      }
      continue;
    }
    const t = ev.table ? tables.get(ev.table) : undefined;
    const slot = slots.get(ev);
    if (!t || !slot) continue;
    const perIdentity = new Map<string, Uint8Array | null>();
    for (const s of byTable.get(ev.table!)!) {
      let chunk = perIdentity.get(s.identityKey);
      if (chunk === undefined) {
        chunk = changeFrame(ev, slot, s.identity.kind === 'service', t.seen.get(s.identityKey), t.keyRows);
        perIdentity.set(s.identityKey, chunk);
      }
      if (!chunk) deps.counters.droppedByRules++;
      else if (s.deliver(ev.id, chunk)) deps.counters.sent++;
    }
  }
  for (const s of all) if (s.cursor < last) s.cursor = last;
}

interface PerTable {
  table: Table;
  /** Captured rows (JSON texts) the page's events refer to by index. */
  images: string[];
  /** Primary-key objects (JSON texts) of the page's events, by index. */
  keys: string[];
  identities: Map<string, Identity>;
  /** Identity key → the captured rows it sees. */
  seen: Map<string, RowsByIndex>;
  keyRows?: RowsByIndex;
}

/** Where an event's row after, row before and key sit in its table's lists. */
interface Slots {
  key: number;
  row?: number;
  old?: number;
}

/**
 * The frame of a row change for one identity: the row after an insert or update when it
 * sees it; a delete (key only) when an update took the row out of its view, and for a
 * delete of a row it saw (the row before, captured since migration 175; a delete captured
 * before it has no row and goes to service keys only); nothing when it saw the row neither
 * before nor after. Service keys see every row.
 */
function changeFrame(
  ev: OutboxEvent,
  slot: Slots,
  service: boolean,
  seen: RowsByIndex | undefined,
  keys: RowsByIndex | undefined,
) {
  const key = keys?.get(slot.key);
  const sawBefore = service || (slot.old !== undefined && !!seen?.has(slot.old));
  if (ev.action === 'delete')
    return key && sawBefore ? frame('change', { table: ev.table, action: 'delete', row: key }, ev.id) : null;
  const row = slot.row === undefined ? undefined : seen?.get(slot.row);
  if (row) return frame('change', { table: ev.table, action: ev.action, row }, ev.id);
  if (ev.action === 'update' && slot.old !== undefined && sawBefore && key)
    return frame('change', { table: ev.table, action: 'delete', row: key }, ev.id);
  return null;
}

function push<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const list = m.get(k);
  if (list) list.push(v);
  else m.set(k, [v]);
}
