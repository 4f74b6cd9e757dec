/**
 * Access-token forgery and leniency (docs/auth.md, Tokens and sessions). Tokens are
 * made here with node:crypto and the platform's real signing key (set as auth.jwt_secret, so the
 * test knows it on the compiled executable too), so each case differs
 * from a valid token in exactly one way: a missing `exp`, a malformed claim, a padded
 * or re-spelled signature, another algorithm. Every one is 401 in the area's envelope,
 * never accepted and never a 500 — on Public Auth (`/me`) and through the user guard
 * in the Files module (format C).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHmac } from 'node:crypto';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { startAuthServer } from '../auth/support';
import { signInUser } from '../helpers/users';
import { expectAError, expectCError } from '../helpers/envelopes';

const SECRET = 'the signing key of the access-token strictness suite';
const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

function sign(
  secret: string,
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
  alg = 'sha256',
): string {
  const input = `${b64(header)}.${b64(payload)}`;
  return `${input}.${createHmac(alg, secret).update(input).digest('base64url')}`;
}

/** The same 32 signature bytes in another spelling: the unused low bits of the last character set. */
function respell(token: string): string {
  const sig = token.slice(token.lastIndexOf('.') + 1);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const last = alphabet[alphabet.indexOf(sig.at(-1)!) | 1]!;
  return token.slice(0, -1) + last;
}

describe.each(ENGINES)('access-token strictness on %s', (engine) => {
  let s: TestServer;
  let claims: { sub: string; sid: string; iss: string; iat: number; exp: number };
  let valid: string;
  const HS256 = { alg: 'HS256', typ: 'JWT' };

  beforeAll(async () => {
    s = await startAuthServer(engine, { env: { BASALT_AUTH_JWT_SECRET: SECRET } });
    const session = await signInUser(s);
    claims = JSON.parse(Buffer.from(session.access_token.split('.')[1]!, 'base64url').toString());
    valid = sign(SECRET, HS256, claims);
  });
  afterAll(() => s.stop());

  const me = (token: string) => s.req('GET', '/api/v1/auth/me', { headers: { authorization: `Bearer ${token}` } });
  const files = (token: string) => s.req('GET', '/api/v1/files', { headers: { authorization: `Bearer ${token}` } });
  const without = (key: string) => () => {
    const c: Record<string, unknown> = { ...claims };
    delete c[key];
    return sign(SECRET, HS256, c);
  };
  const withClaim = (key: string, value: unknown) => () => sign(SECRET, HS256, { ...claims, [key]: value });

  test('the control: a token made here with the platform key is accepted', async () => {
    const r = await me(valid);
    expect([r.status, r.body.data?.session_id]).toEqual([200, claims.sid]);
    expect((await files(valid)).status).toBe(200);
  });

  const cases: [string, () => string, string][] = [
    ['no exp', without('exp'), 'unauthorized'],
    ['no iat', without('iat'), 'unauthorized'],
    ['no sub', without('sub'), 'unauthorized'],
    ['no sid', without('sid'), 'unauthorized'],
    ['no iss', without('iss'), 'unauthorized'],
    ['exp as a string', withClaim('exp', '99999999999'), 'unauthorized'],
    ['exp null', withClaim('exp', null), 'unauthorized'],
    ['sid not a UUID', withClaim('sid', 'not-a-uuid'), 'unauthorized'],
    ['sid with SQL', withClaim('sid', "' OR 1=1 --"), 'unauthorized'],
    ['sid a number', withClaim('sid', 42), 'unauthorized'],
    ['sid an object', withClaim('sid', { a: 1 }), 'unauthorized'],
    ['sid with NUL', withClaim('sid', '00000000-0000-0000-0000-00000000000\u0000'), 'unauthorized'],
    ['sub not a UUID', withClaim('sub', 'admin'), 'unauthorized'],
    ['sub an array', () => sign(SECRET, HS256, { ...claims, sub: [claims.sub] }), 'unauthorized'],
    ['another issuer', withClaim('iss', 'someone-else'), 'unauthorized'],
    ['nbf in the future', withClaim('nbf', 9_999_999_999), 'unauthorized'],
    [
      'expired an hour ago',
      () => sign(SECRET, HS256, { ...claims, iat: claims.iat - 7200, exp: Math.floor(Date.now() / 1000) - 3600 }),
      'token_expired',
    ],
    ['unknown session (a valid UUID)', withClaim('sid', '00000000-0000-4000-8000-000000000000'), 'session_revoked'],
    ['trailing = on the signature', () => valid + '=', 'unauthorized'],
    ['trailing == on the signature', () => valid + '==', 'unauthorized'],
    ['the signature re-spelled (stray low bits)', () => respell(valid), 'unauthorized'],
    [
      'padding on the payload',
      () => {
        const [h, p, sig] = valid.split('.');
        return `${h}.${p}=.${sig}`;
      },
      'unauthorized',
    ],
    [
      'standard base64 alphabet in the signature',
      () => valid.replace(/-/g, '+').replace(/_/g, '/') + (/[-_]/.test(valid.split('.')[2]!) ? '' : '+'),
      'unauthorized',
    ],
    ['alg none, no signature', () => `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`, 'unauthorized'],
    ['alg HS512 with the same key', () => sign(SECRET, { alg: 'HS512', typ: 'JWT' }, claims, 'sha512'), 'unauthorized'],
    ['HS256 with another key', () => sign('x'.repeat(48), HS256, claims), 'unauthorized'],
    ['crit header', () => sign(SECRET, { ...HS256, crit: ['exp'] }, claims), 'unauthorized'],
    ['b64:false header', () => sign(SECRET, { ...HS256, b64: false, crit: ['b64'] }, claims), 'unauthorized'],
    [
      'header not JSON',
      () => {
        const input = `${b64('nope')}.${b64(claims)}`;
        return `${input}.${createHmac('sha256', SECRET).update(input).digest('base64url')}`;
      },
      'unauthorized',
    ],
    [
      'payload not JSON',
      () => {
        const input = `${b64(HS256)}.${b64('[1,2')}`;
        return `${input}.${createHmac('sha256', SECRET).update(input).digest('base64url')}`;
      },
      'unauthorized',
    ],
    [
      'payload an array',
      () => {
        const input = `${b64(HS256)}.${b64([claims])}`;
        return `${input}.${createHmac('sha256', SECRET).update(input).digest('base64url')}`;
      },
      'unauthorized',
    ],
    ['four segments', () => valid + '.AAAA', 'unauthorized'],
    ['two segments', () => valid.slice(0, valid.lastIndexOf('.')), 'unauthorized'],
    ['empty signature', () => valid.slice(0, valid.lastIndexOf('.') + 1), 'unauthorized'],
    ['a very long token', () => valid + 'A'.repeat(6000), 'unauthorized'],
  ];

  test.each(cases)('%s → 401 on /me (format A)', async (_name, make, code) => {
    const r = await me(make());
    expectAError(r, 401, code);
  });

  test.each(cases)('%s → 401 through requireUser in the Files module (format C)', async (_name, make, code) => {
    const r = await files(make());
    expectCError(r, 401, code);
  });

  test('tokens the platform issues have the strict shape', async () => {
    const { access_token: access } = await signInUser(s);
    const [h, p, sig] = access.split('.');
    expect(JSON.parse(Buffer.from(h!, 'base64url').toString())).toEqual({ alg: 'HS256', typ: 'JWT' });
    expect(Object.keys(JSON.parse(Buffer.from(p!, 'base64url').toString())).sort()).toEqual([
      'aal', // how the user signed in (docs/auth.md, amr/aal): 1, or 2 after a second factor
      'amr',
      'exp',
      'iat',
      'iss',
      'sid',
      'sub',
    ]);
    expect(sig).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect((await me(access)).status).toBe(200);
  });
});
