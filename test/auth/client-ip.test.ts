/**
 * clientIp: which address a request is counted under (rate limits, sessions). The
 * peer is believed; X-Forwarded-For only when the peer is a trusted proxy, and then
 * only the hops our proxies appended (walked right to left).
 */
import { describe, expect, test } from 'bun:test';
import { clientIp, normalizeIp } from '../../src/http/request-info';

const PROXY = ['127.0.0.1'];
const BLOCKS = ['10.0.0.0/8', '192.168.1.7', 'fd00::/8', 'not an address', '10.0.0.0/99'];

const cases: [string, string, string | null, string[], string][] = [
  ['no header: the peer', '203.0.113.9', null, PROXY, '203.0.113.9'],
  ['untrusted peer: a forged header is ignored', '203.0.113.9', '198.51.100.1', PROXY, '203.0.113.9'],
  ['untrusted peer with a trusted-looking header', '203.0.113.9', '127.0.0.1', PROXY, '203.0.113.9'],
  ['no trusted proxies at all', '127.0.0.1', '198.51.100.1', [], '127.0.0.1'],
  ['trusted peer: the hop it saw', '127.0.0.1', '198.51.100.1', PROXY, '198.51.100.1'],
  [
    'trusted peer: a client-forged left part is skipped',
    '127.0.0.1',
    '1.1.1.1, 2.2.2.2, 198.51.100.1',
    PROXY,
    '198.51.100.1',
  ],
  [
    'chain of trusted proxies walked right to left',
    '10.1.2.3',
    '1.1.1.1, 198.51.100.1, 192.168.1.7, 10.9.9.9',
    BLOCKS,
    '198.51.100.1',
  ],
  ['CIDR block: a peer inside is trusted', '10.200.0.1', '198.51.100.2', BLOCKS, '198.51.100.2'],
  ['CIDR block: a peer outside is not', '11.0.0.1', '198.51.100.2', BLOCKS, '11.0.0.1'],
  ['single address entry matches only itself', '192.168.1.8', '198.51.100.2', BLOCKS, '192.168.1.8'],
  ['IPv6 block', 'fd12::1', '2001:db8::5', BLOCKS, '2001:db8::5'],
  ['IPv6 outside the block', 'fe80::1', '2001:db8::5', BLOCKS, 'fe80::1'],
  ['IPv4-mapped peer matches an IPv4 entry', '::ffff:127.0.0.1', '198.51.100.3', PROXY, '198.51.100.3'],
  ['IPv4-mapped hop is normalized', '127.0.0.1', '::FFFF:198.51.100.4', PROXY, '198.51.100.4'],
  ['IPv4-mapped untrusted peer is normalized', '::ffff:203.0.113.9', '198.51.100.1', PROXY, '203.0.113.9'],
  ['hop with a port', '127.0.0.1', '198.51.100.5:4711', PROXY, '198.51.100.5'],
  ['bracketed IPv6 hop with a port', '127.0.0.1', '[2001:DB8::7]:443', PROXY, '2001:db8::7'],
  ['every hop trusted: the leftmost', '127.0.0.1', '10.0.0.1, 10.0.0.2', ['127.0.0.1', '10.0.0.0/8'], '10.0.0.1'],
  [
    'garbage hop ends the walk at the last trusted address',
    '127.0.0.1',
    '198.51.100.1, unknown, 10.0.0.2',
    ['127.0.0.1', '10.0.0.0/8'],
    '10.0.0.2',
  ],
  ['empty hops are skipped', '127.0.0.1', ' , 198.51.100.6 ,', PROXY, '198.51.100.6'],
  [
    'invalid entries never match (not an address, /99)',
    '10.0.0.1',
    '198.51.100.1',
    ['not an address', '10.0.0.0/99'],
    '10.0.0.1',
  ],
  ['/0 trusts every IPv4 peer, not IPv6', '::1', '198.51.100.1', ['0.0.0.0/0'], '::1'],
];

describe('clientIp', () => {
  test.each(cases)('%s', (_name, peer, xff, trusted, expected) => {
    expect(clientIp(peer, xff, trusted)).toBe(expected);
  });

  test('normalizeIp', () => {
    expect(
      ['::ffff:10.0.0.1', ' 10.0.0.1 ', '10.0.0.1:80', '[::1]:8080', '2001:DB8::1', '::ffff:0a00:0001'].map(
        normalizeIp,
      ),
    ).toEqual(['10.0.0.1', '10.0.0.1', '10.0.0.1', '::1', '2001:db8::1', '::ffff:0a00:0001']);
  });
});
