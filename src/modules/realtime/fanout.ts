/**
 * Fan-out of one batch of outbox events to a set of streams (docs/realtime.md, "Cost"):
 * 1. group the streams by identity; for each identity and table, collect the changed keys
 *    of inserts and updates its streams subscribe to;
 * 2. one statement per (identity, table) reads those rows as that identity
 *    (`RowReader.rows`), one per table decodes the keys of deletes;
 * 3. walk the events in id order; each event's frame is built once per identity and
 *    queued to every stream of that identity that subscribes to it.
 */
import type { Table } from '../database/catalog';
import type { OutboxEvent } from './outbox';
import type { RowReader, RowsByKey } from './rows';
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
  /** The catalog's table, or undefined (dropped since); with the catalog load time. */
  table: (name: string) => Promise<{ table?: Table; loadedAt: number }>;
  counters: FanoutCounters;
}

type Change = { table: Table; loadedAt: number };

/** Deliver `events` (ascending ids) to `streams`; every stream's cursor ends at the last id. */
export async function fanout(deps: FanoutDeps, events: OutboxEvent[], streams: Iterable<Stream>): Promise<void> {
  if (!events.length) return;
  const last = events[events.length - 1]!.id;
  const byTable = new Map<string, Stream[]>();
  const byChannel = new Map<string, Stream[]>();
  const all: Stream[] = [];
  for (const s of streams) {
    if (s.closed) continue;
    all.push(s);
    for (const t of s.tables) push(byTable, t, s);
    for (const c of s.channels) push(byChannel, c, s);
  }

  // 1. What each identity must read.
  const tables = new Map<string, Change | null>();
  const wanted = new Map<string, { identity: Identity; keys: Map<string, Set<string>> }>();
  const deleted = new Map<string, Set<string>>();
  for (const ev of events) {
    if (!ev.table || ev.schema !== deps.schema || !byTable.has(ev.table)) continue;
    if (!tables.has(ev.table)) {
      const t = await deps.table(ev.table);
      tables.set(ev.table, t.table ? { table: t.table, loadedAt: t.loadedAt } : null);
    }
    if (!tables.get(ev.table)) continue;
    // Keys in the API's representation: for deletes, and for updates that left a view.
    if (ev.action !== 'insert') add(deleted, ev.table, ev.pk!);
    if (ev.action === 'delete') continue;
    for (const s of byTable.get(ev.table)!) {
      let w = wanted.get(s.identityKey);
      if (!w) wanted.set(s.identityKey, (w = { identity: s.identity, keys: new Map() }));
      add(w.keys, ev.table, ev.pk!);
    }
  }

  // 2. One statement per identity and table; one per table for deleted keys.
  const seen = new Map<string, RowsByKey>(); // `${identityKey}\0${table}` → rows
  const reads: Promise<void>[] = [];
  for (const [ik, w] of wanted)
    for (const [name, keys] of w.keys) {
      const c = tables.get(name)!;
      reads.push(
        deps.reader
          .rows(w.identity, c.table, [...keys], c.loadedAt)
          .then((rows) => void seen.set(`${ik}\0${name}`, rows)),
      );
    }
  const gone = new Map<string, RowsByKey>();
  for (const [name, keys] of deleted) {
    const c = tables.get(name)!;
    reads.push(deps.reader.keys(c.table, [...keys]).then((rows) => void gone.set(name, rows)));
  }
  await Promise.all(reads);

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
    const subs = ev.table && tables.get(ev.table) ? byTable.get(ev.table) : undefined;
    if (!subs) continue;
    const perIdentity = new Map<string, Uint8Array | null>();
    for (const s of subs) {
      let chunk = perIdentity.get(s.identityKey);
      if (chunk === undefined) {
        chunk = changeFrame(ev, seen.get(`${s.identityKey}\0${ev.table}`), gone.get(ev.table!));
        perIdentity.set(s.identityKey, chunk);
      }
      if (!chunk) deps.counters.droppedByRules++;
      else if (s.deliver(ev.id, chunk)) deps.counters.sent++;
    }
  }
  for (const s of all) if (s.cursor < last) s.cursor = last;
}

/**
 * The frame of a row change for one identity: its row after an insert or update; a
 * delete (key only) when an update left its view; nothing when an insert is hidden from it.
 */
function changeFrame(ev: OutboxEvent, rows: RowsByKey | undefined, gone: RowsByKey | undefined): Uint8Array | null {
  const key = ev.pk!;
  if (ev.action === 'delete') {
    const row = gone?.get(key);
    return row ? frame('change', { table: ev.table, action: 'delete', row }, ev.id) : null;
  }
  const row = rows?.get(key);
  if (row) return frame('change', { table: ev.table, action: ev.action, row }, ev.id);
  if (ev.action === 'insert') return null;
  // Out of view now: the subscriber drops the row it may hold.
  const pk = gone?.get(key);
  return pk ? frame('change', { table: ev.table, action: 'delete', row: pk }, ev.id) : null;
}

function push<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const list = m.get(k);
  if (list) list.push(v);
  else m.set(k, [v]);
}

function add(m: Map<string, Set<string>>, k: string, v: string): void {
  const set = m.get(k);
  if (set) set.add(v);
  else m.set(k, new Set([v]));
}
