/** BoundedMap (src/util/bounded-map.ts): the least recently used entry goes past `max`, and `onEvict` hears of it. */
import { expect, test } from 'bun:test';
import { BoundedMap } from '../../src/util/bounded-map';

test('past max the least recently used goes (get and set are uses, peek is not); onEvict hears only of those', () => {
  const evicted: [string, number][] = [];
  const m = new BoundedMap<string, number>(3, (k, v) => evicted.push([k, v]));
  m.set('a', 1).set('b', 2).set('c', 3);
  expect(m.get('a')).toBe(1); // a is now the most recent
  expect(m.peek('b')).toBe(2); // b stays the least recent
  m.set('d', 4);
  expect([...m].map(([k]) => k)).toEqual(['c', 'a', 'd']);
  m.set('c', 30); // an update is a use
  m.set('e', 5);
  expect([...m]).toEqual([
    ['d', 4],
    ['c', 30],
    ['e', 5],
  ]);
  m.delete('d');
  m.clear();
  expect(evicted).toEqual([
    ['b', 2],
    ['a', 1],
  ]);
  expect([m.size, m.has('e'), m.get('e')]).toEqual([0, false, undefined]);
});
