/**
 * /api/openapi.json as a contract: traffic through every operation — successes and
 * errors, in both access modes — and every answer checked against the served document
 * with ajv (JSON Schema 2020-12, the dialect of OpenAPI 3.1): the status is documented
 * for the operation, the media type is one it lists, the JSON body matches its schema,
 * the headers it requires are there and the headers clients act on (Retry-After, ETag,
 * Content-Range, Idempotent-Replayed, X-Request-Id) are documented where sent; and every
 * request the server accepted is one the document allows (media type, JSON body, query). The
 * document itself: byte-identical before and after the traffic, valid under
 * @seriousme/openapi-schema-validator and clean under `redocly lint`
 * (recommended rules, redocly.yaml).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { Validator } from '@seriousme/openapi-schema-validator';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ENGINES } from '../helpers/engines';
import { ON_SOURCE, startServer, type TestServer } from '../helpers/server';
import { createKey } from '../helpers/keys';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink';
import { PNG, REPO_EXTENSIONS } from '../extensions/support';
import { deref } from './support';
import { Secret, TOTP } from 'otpauth';
import { startProvider } from '../auth/provider';
import { eventually } from '../helpers/wait';

const ROOT = resolve(import.meta.dir, '../..');
const WATCHED_HEADERS = ['x-request-id', 'retry-after', 'etag', 'content-range', 'idempotent-replayed'];

type Doc = Record<string, any>;

/** Checks answers against the document; remembers which operations were exercised. */
class Conformance {
  readonly ajv = addFormats(new Ajv2020({ strict: true, strictTypes: false, allErrors: true }));
  readonly seen = new Map<string, Set<string>>();
  private readonly validators = new Map<string, ReturnType<Ajv2020['compile']>>();
  private readonly routes: { method: string; re: RegExp; op: Doc }[] = [];

  constructor(readonly doc: Doc) {
    this.ajv.addKeyword('example');
    const defs = JSON.parse(JSON.stringify(doc.components.schemas).replaceAll('#/components/schemas/', '#/$defs/'));
    this.ajv.addSchema({ $id: 'urn:basalt:components', $defs: defs });
    for (const [path, item] of Object.entries(doc.paths as Doc)) {
      const re = new RegExp('^' + path.replace(/\{[^}]+\}/g, '[^/]+') + '$');
      for (const [method, op] of Object.entries(item as Doc)) this.routes.push({ method, re, op });
    }
  }

  /**
   * A request the server accepted (2xx/3xx) must be one the document allows: its media type
   * listed, its JSON body valid against the request schema, its query values valid. This
   * catches a document stricter than the server.
   */
  checkRequest(method: string, path: string, type: string | undefined, body: string | undefined): string[] {
    const [bare, search] = path.split('?') as [string, string | undefined];
    const route = this.routes.find((r) => r.method === method.toLowerCase() && r.re.test(bare));
    if (!route) return [];
    const where = `${route.op.operationId} request`;
    const problems: string[] = [];
    for (const [name, value] of new URLSearchParams(search ?? '')) {
      const param = (route.op.parameters ?? []).find((p: Doc) => p.in === 'query' && p.name === name);
      if (!param) {
        problems.push(`${where}: query parameter ${name} not documented`);
        continue;
      }
      const v = param.schema.type === 'integer' || param.schema.type === 'number' ? Number(value) : value;
      const validate = this.compile(`${route.op.operationId}/query/${name}`, param.schema);
      if (!validate(v))
        problems.push(
          `${where}: query ${name}=${value} accepted by the server but invalid per the document: ${this.ajv.errorsText(validate.errors)}`,
        );
    }
    if (body === undefined || body === '') {
      if (route.op.requestBody?.required) problems.push(`${where}: accepted without a body, documented as required`);
      return problems;
    }
    const media = (type ?? '').split(';')[0]!.trim().toLowerCase();
    const content = deref(this.doc, route.op.requestBody)?.content ?? {};
    if (!content[media])
      return [...problems, `${where}: ${media} accepted but not documented (${Object.keys(content).join(', ')})`];
    if (media !== 'application/json') return problems;
    const validate = this.compile(`${route.op.operationId}/request`, route.op.requestBody.content[media].schema);
    if (!validate(JSON.parse(body)))
      problems.push(
        `${where}: body accepted by the server but invalid per the document: ${this.ajv.errorsText(validate.errors)} — ${body.slice(0, 200)}`,
      );
    return problems;
  }

  private compile(id: string, schema: Doc): ReturnType<Ajv2020['compile']> {
    let validate = this.validators.get(id);
    if (!validate) {
      const s = JSON.parse(JSON.stringify(schema).replaceAll('#/components/schemas/', 'urn:basalt:components#/$defs/'));
      validate = this.ajv.compile({ $id: `urn:basalt:op:${id}`, ...s });
      this.validators.set(id, validate);
    }
    return validate;
  }

  check(method: string, path: string, status: number, headers: Headers, body: string): string[] {
    const problems: string[] = [];
    const route = this.routes.find((r) => r.method === method.toLowerCase() && r.re.test(path.split('?')[0]!));
    if (!route) return [`${method} ${path}: no operation in the document`];
    const opId = route.op.operationId as string;
    const where = `${opId} ${status}`;
    (this.seen.get(opId) ?? this.seen.set(opId, new Set()).get(opId)!).add(String(status));
    const response = deref(this.doc, route.op.responses[String(status)] ?? route.op.responses.default);
    if (!response)
      return [`${where}: status not documented (documented: ${Object.keys(route.op.responses).join(' ')})`];
    const declared = Object.fromEntries(
      Object.entries((response.headers ?? {}) as Doc).map(([k, v]) => [k.toLowerCase(), v]),
    );
    for (const [name, h] of Object.entries(declared))
      if (h.required && !headers.has(name)) problems.push(`${where}: required header ${name} missing`);
    for (const name of WATCHED_HEADERS)
      if (headers.has(name) && !declared[name]) problems.push(`${where}: header ${name} sent but not documented`);
    const retry = headers.get('retry-after');
    if (retry !== null && !/^\d+$/.test(retry)) problems.push(`${where}: Retry-After is not an integer: ${retry}`);
    if (body.length === 0) {
      if (response.content && method !== 'HEAD' && status !== 304)
        problems.push(`${where}: documented a body, got none`);
      return problems;
    }
    if (method === 'HEAD') return [...problems, `${where}: HEAD answered with a body`];
    const type = (headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    const content = (response.content ?? {}) as Doc;
    const key = content[type]
      ? type
      : content[type.replace(/\/.*/, '/*')]
        ? type.replace(/\/.*/, '/*')
        : content['*/*']
          ? '*/*'
          : undefined;
    if (!key)
      return [
        ...problems,
        `${where}: media type ${type} not documented (${Object.keys(content).join(', ') || 'no body'})`,
      ];
    if (type !== 'application/json') return problems;
    const validate = this.compile(`${opId}/${status}/${key}`, route.op.responses[String(status)].content[key].schema);
    if (!validate(JSON.parse(body)))
      problems.push(`${where}: body does not match: ${this.ajv.errorsText(validate.errors)} — ${body.slice(0, 300)}`);
    return problems;
  }
}

async function firstBytes(res: Response): Promise<string> {
  const reader = res.body!.getReader();
  const { value } = await reader.read();
  await reader.cancel();
  return new TextDecoder().decode(value);
}

/** The document each server of this process served first: every one must be the same bytes. */
const firstServed: string[] = [];

describe.each(ENGINES)('the OpenAPI document as a contract on %s', (engine) => {
  let s: TestServer;
  let sink: SmtpSink;
  let served: string;
  let doc: Doc;
  let c: Conformance;
  const problems: string[] = [];
  let n = 0;
  const keys: Record<string, string> = {};

  /** The token of the latest mail of `kind` to `to` (waits for it). */
  async function mailedToken(to: string, kind: 'verify-email' | 'reset-password'): Promise<string> {
    const [mail] = (
      await sink.waitFor(1, 10_000, (m) => m.to.includes(to) && m.text.includes(`/${kind}?token=`))
    ).slice(-1);
    const link = /https?:\/\/\S+token=[^\s"<]+/.exec(mail!.text)![0];
    return decodeURIComponent(new URL(link).searchParams.get('token')!);
  }

  /** One request, checked against the document. `ip` is a fresh client address unless given. */
  async function hit(
    method: string,
    path: string,
    o: {
      json?: unknown;
      raw?: BodyInit;
      type?: string;
      headers?: Record<string, string>;
      ip?: string;
      redirect?: RequestRedirect;
    } = {},
  ) {
    const headers: Record<string, string> = {
      'x-forwarded-for': o.ip ?? `198.18.${(++n >> 8) & 255}.${n & 255}`,
      ...(o.headers ?? {}),
    };
    let body = o.raw;
    if (o.json !== undefined) body = JSON.stringify(o.json);
    if (o.json !== undefined || o.type) headers['content-type'] = o.type ?? 'application/json';
    const main = path.startsWith('/api/v1/mail') || path.startsWith('/api/v1/files');
    const res = await fetch((main ? s.url : s.publicUrl) + path, { method, headers, body, redirect: o.redirect });
    // An event stream never ends: its first bytes stand for the body.
    const text = res.headers.get('content-type')?.startsWith('text/event-stream')
      ? await firstBytes(res)
      : await res.text();
    problems.push(...c.check(method, path, res.status, res.headers, text));
    if (res.status < 400)
      problems.push(
        ...c.checkRequest(
          method,
          path,
          body instanceof FormData ? 'multipart/form-data' : headers['content-type'],
          typeof body === 'string' ? body : body === undefined ? undefined : '(form)',
        ),
      );
    let parsed: any;
    try {
      parsed = JSON.parse(text);
    } catch {}
    return { status: res.status, headers: res.headers, body: parsed, text };
  }

  beforeAll(async () => {
    sink = await startSmtpSink();
    s = await startServer(engine, {
      env: { BASALT_EXTENSIONS_DIR: REPO_EXTENSIONS, BASALT_WEB_TRUSTED_PROXIES: '127.0.0.1' },
      migrations: {
        '001_items.sql':
          "CREATE TABLE public.items (id serial PRIMARY KEY, name text NOT NULL, note text); SELECT basalt.realtime_enable('items');",
      },
    });
    // The document as first served: before any other request has reached the server.
    served = await (await fetch(s.publicUrl + '/api/openapi.json')).text();
    doc = JSON.parse(served);
    c = new Conformance(doc);
    // Mail as live settings (not the environment, which would pin them), so a test can take it away.
    await s.settings.set('mail.from', 'app@example.com');
    await s.settings.set('mail.smtp_url', sink.url);
    keys.db = await createKey(s, { permissions: ['db:*'], tables: ['items'] });
    keys.dbOther = await createKey(s, { permissions: ['db:query'], tables: ['orders'] });
    keys.mail = await createKey(s, { permissions: ['mail:send'] });
    keys.files = await createKey(s, { permissions: ['files:*'] });
    keys.site = await createKey(s, { type: 'public', site: true } as never);
  });
  afterAll(async () => {
    await s?.stop();
    await sink?.close();
  });

  test('Public Auth: providers, e-mail codes, second factor', async () => {
    const idp = await startProvider();
    try {
      await s.settings.set('auth.oauth_providers', idp.settings(['test']));
      await s.settings.set('auth.redirect_allowlist', ['https://app.example.com']);
      const back = encodeURIComponent('https://app.example.com/done');
      expect(
        (
          await hit(
            'GET',
            `/api/v1/auth/oauth/test/start?redirect_to=${encodeURIComponent('https://evil.example.com/')}`,
          )
        ).status,
      ).toBe(400);
      expect((await hit('GET', '/api/v1/auth/oauth/test/callback?state=unknown&code=x')).status).toBe(400);
      // The linking confirmation page's post, with a token no page gave.
      expect((await hit('POST', '/api/v1/auth/oauth/test/callback?confirm=unknown')).status).toBe(400);
      idp.as({ sub: 'conformance', email: 'conf-oidc@example.com', email_verified: true });
      const start = await hit('GET', `/api/v1/auth/oauth/test/start?redirect_to=${back}`, { redirect: 'manual' });
      expect(start.status).toBe(302);
      const atIdp = await fetch(start.headers.get('location')!, { redirect: 'manual' });
      const callback = new URL(atIdp.headers.get('location')!);
      const cb = await hit('GET', callback.pathname + callback.search, {
        redirect: 'manual',
        headers: { cookie: start.headers.get('set-cookie')!.split(';')[0]! },
      });
      expect(cb.status).toBe(302);
      const code = new URLSearchParams(new URL(cb.headers.get('location')!).hash.slice(1)).get('code')!;
      const ex = await hit('POST', '/api/v1/auth/oauth/exchange', { json: { code } });
      expect(ex.status).toBe(200);
      expect((await hit('POST', '/api/v1/auth/oauth/exchange', { json: { code } })).status).toBe(400);
      const bearer = { authorization: `Bearer ${ex.body.data.access_token}` };
      const link = await hit('POST', '/api/v1/auth/oauth/test/link', {
        json: { redirect_to: 'https://app.example.com/' },
        headers: bearer,
      });
      expect(link.status).toBe(200);
      // The linking flow: the callback's confirmation page (200, HTML), declined there (303, nothing linked).
      idp.as({ sub: 'conformance-link', email: 'conf-link@example.com', email_verified: true });
      const linkUrl = new URL(link.body.data.url);
      const linkStart = await hit('GET', linkUrl.pathname + linkUrl.search, { redirect: 'manual' });
      const cookies = linkStart.headers
        .getSetCookie()
        .map((c: string) => c.split(';')[0])
        .join('; ');
      const linkAtIdp = new URL(
        (await fetch(linkStart.headers.get('location')!, { redirect: 'manual' })).headers.get('location')!,
      );
      const page = await hit('GET', linkAtIdp.pathname + linkAtIdp.search, {
        redirect: 'manual',
        headers: { cookie: cookies },
      });
      expect(page.status).toBe(200);
      const decline = /action="\?([^"]*decline[^"]*)"/.exec(page.text)![1]!.replaceAll('&#38;', '&');
      const declined = await hit('POST', `${linkAtIdp.pathname}?${decline}`, {
        redirect: 'manual',
        headers: { cookie: cookies },
      });
      expect(declined.status).toBe(303);
      const methods = await hit('GET', '/api/v1/auth/identities', { headers: bearer });
      expect(methods.status).toBe(200);
      const only = methods.body.data.identities[0].id;
      expect((await hit('DELETE', `/api/v1/auth/identities/${only}`, { headers: bearer })).status).toBe(409);
      // With a second provider account linked, one may go (the link is written to the
      // database directly, so on the source only; the 409 above exercised the operation).
      if (ON_SOURCE) {
        await s.platform.db.query(
          `INSERT INTO basalt.auth_identities (user_id, provider, subject) VALUES ($1, 'other', 'conformance')`,
          [ex.body.data.user.id],
        );
        expect((await hit('DELETE', `/api/v1/auth/identities/${only}`, { headers: bearer })).status).toBe(200);
      }

      expect((await hit('POST', '/api/v1/auth/otp/request', { json: { email: 'conf-otp@example.com' } })).status).toBe(
        202,
      );
      const mail = await eventually(() => sink.messages.find((m) => m.to.includes('conf-otp@example.com')), {
        until: (m) => m !== undefined,
      });
      const otp = /\b(\d{6})\b/.exec(mail!.text)![1]!;
      expect(
        (
          await hit('POST', '/api/v1/auth/otp/verify', {
            json: { email: 'conf-otp@example.com', code: otp === '000000' ? '000001' : '000000' },
          })
        ).status,
      ).toBe(401);
      const viaOtp = await hit('POST', '/api/v1/auth/otp/verify', {
        json: { email: 'conf-otp@example.com', code: otp },
      });
      expect(viaOtp.status).toBe(200);
      const user = { authorization: `Bearer ${viaOtp.body.data.access_token}` };
      // Codes of steps -1, 0, +1, each once: begin early in a 30 s step.
      const left = 30_000 - (Date.now() % 30_000);
      if (left < 8_000) await Bun.sleep(left + 50);
      const enroll = await hit('POST', '/api/v1/auth/mfa/totp/enroll', { headers: user });
      expect(enroll.status).toBe(200);
      const totp = (offset: number) =>
        new TOTP({ secret: Secret.fromBase32(enroll.body.data.secret) }).generate({
          timestamp: Date.now() + offset * 30_000,
        });
      expect(
        (await hit('POST', '/api/v1/auth/mfa/totp/confirm', { json: { code: totp(-1) }, headers: user })).status,
      ).toBe(200);
      const before = sink.messages.filter((m) => m.to.includes('conf-otp@example.com')).length;
      await hit('POST', '/api/v1/auth/otp/request', { json: { email: 'conf-otp@example.com' } });
      const next = await eventually(() => sink.messages.filter((m) => m.to.includes('conf-otp@example.com')), {
        until: (m) => m.length > before,
      });
      const step = await hit('POST', '/api/v1/auth/otp/verify', {
        json: { email: 'conf-otp@example.com', code: /\b(\d{6})\b/.exec(next[before]!.text)![1]! },
      });
      expect(step.body.data.mfa_required).toBe(true);
      expect(
        (
          await hit('POST', '/api/v1/auth/mfa/verify', {
            json: { mfa_token: step.body.data.mfa_token, code: totp(-1) },
          })
        ).status,
      ).toBe(401);
      const done = await hit('POST', '/api/v1/auth/mfa/verify', {
        json: { mfa_token: step.body.data.mfa_token, code: totp(0) },
      });
      expect(done.status).toBe(200);
      const off = await hit('DELETE', '/api/v1/auth/mfa/totp', {
        json: { code: totp(1) },
        headers: { authorization: `Bearer ${done.body.data.access_token}` },
      });
      expect(off.status).toBe(200);
    } finally {
      await idp.stop();
    }
  });

  test('Public Auth and runtime config (open mode)', async () => {
    const email = `conf-${Date.now().toString(36)}@example.com`;
    let password = 'correct horse battery';
    expect((await hit('GET', '/api/v1/public/runtime-config')).status).toBe(200);
    expect((await hit('POST', '/api/v1/auth/register', { json: { email, password } })).status).toBe(201);
    expect((await hit('POST', '/api/v1/auth/register', { json: { email, password } })).status).toBe(409);
    expect((await hit('POST', '/api/v1/auth/register', { json: { email: 'nope', password } })).status).toBe(422);
    expect((await hit('POST', '/api/v1/auth/register', { raw: '{bad', type: 'application/json' })).status).toBe(400);
    expect(
      (await hit('POST', '/api/v1/auth/register', { raw: 'email=a', type: 'application/x-www-form-urlencoded' }))
        .status,
    ).toBe(415);
    expect(
      (await hit('POST', '/api/v1/auth/register', { json: { email, password: 'x'.repeat(1_100_000) } })).status,
    ).toBe(413);
    // A field the schema does not name is accepted (dropped) — the document must not say otherwise.
    const login = await hit('POST', '/api/v1/auth/login', { json: { email, password, remember: true } });
    expect(login.status).toBe(200);
    const { access_token, refresh_token } = login.body.data;
    const bearer = { authorization: `Bearer ${access_token}` };
    expect((await hit('POST', '/api/v1/auth/login', { json: { email, password: 'wrong password' } })).status).toBe(401);
    expect((await hit('GET', '/api/v1/auth/me', { headers: bearer })).status).toBe(200);
    expect((await hit('GET', '/api/v1/auth/me')).status).toBe(401);
    const refreshed = await hit('POST', '/api/v1/auth/refresh', { json: { refresh_token } });
    expect(refreshed.status).toBe(200);
    expect((await hit('POST', '/api/v1/auth/refresh', { json: { refresh_token: 'not-a-token' } })).status).toBe(401);
    expect((await hit('POST', '/api/v1/auth/password/forgot', { json: { email } })).status).toBe(200);
    expect(
      (
        await hit('POST', '/api/v1/auth/password/reset', {
          json: { token: 'k3Jd9sQw0PzL1xVb.nope', password: 'another long passphrase' },
        })
      ).status,
    ).toBe(400);
    expect((await hit('POST', '/api/v1/auth/verify-email', { json: { token: 'k3Jd9sQw0PzL1xVb.nope' } })).status).toBe(
      400,
    );
    expect((await hit('POST', '/api/v1/auth/verify-email/resend', { json: { email } })).status).toBe(200);
    expect(
      (await hit('POST', '/api/v1/auth/verify-email', { json: { token: await mailedToken(email, 'verify-email') } }))
        .status,
    ).toBe(200);
    const reset = await mailedToken(email, 'reset-password');
    expect(
      (await hit('POST', '/api/v1/auth/password/reset', { json: { token: reset, password: 'the reset passphrase' } }))
        .status,
    ).toBe(200);
    const relog = await hit('POST', '/api/v1/auth/login', { json: { email, password: 'the reset passphrase' } });
    expect(relog.status).toBe(200);
    password = 'the reset passphrase';
    const bearer2 = { authorization: `Bearer ${relog.body.data.access_token}` };
    expect(
      (
        await hit('POST', '/api/v1/auth/password/change', {
          json: { current_password: 'wrong one', new_password: 'a new long passphrase' },
          headers: bearer2,
        })
      ).status,
    ).toBe(400);
    expect(
      (
        await hit('POST', '/api/v1/auth/password/change', {
          json: { current_password: password, new_password: 'a new long passphrase' },
          headers: bearer2,
        })
      ).status,
    ).toBe(200);
    // Logout: malformed body → 400; no credentials → 401; a refresh token alone is enough; the body is optional.
    expect(
      (await hit('POST', '/api/v1/auth/logout', { raw: '{bad', type: 'application/json', headers: bearer2 })).status,
    ).toBe(400);
    expect((await hit('POST', '/api/v1/auth/logout', { json: {} })).status).toBe(401);
    const again = await hit('POST', '/api/v1/auth/login', { json: { email, password: 'a new long passphrase' } });
    expect(
      (await hit('POST', '/api/v1/auth/logout', { json: { refresh_token: again.body.data.refresh_token } })).status,
    ).toBe(200);
    const third = await hit('POST', '/api/v1/auth/login', { json: { email, password: 'a new long passphrase' } });
    expect(
      (
        await hit('POST', '/api/v1/auth/logout', {
          headers: { authorization: `Bearer ${third.body.data.access_token}` },
        })
      ).status,
    ).toBe(200);
    // Per-account limit: 429 with Retry-After.
    const ip = '198.19.0.1';
    let last = 0;
    for (let i = 0; i < 7 && last !== 429; i++)
      last = (await hit('POST', '/api/v1/auth/login', { json: { email, password: `wrong ${i}` }, ip })).status;
    expect(last).toBe(429);
    // Without mail: 503 mail_not_configured on resend.
    await s.settings.unset('mail.smtp_url');
    try {
      expect((await hit('POST', '/api/v1/auth/verify-email/resend', { json: { email } })).status).toBe(503);
    } finally {
      await s.settings.set('mail.smtp_url', sink.url);
    }
  });

  test('Database API', async () => {
    const k = { 'x-api-key': keys.db! };
    expect(
      (
        await hit('POST', '/api/v1/db/query', {
          json: { entity: 'items', action: 'insert', data: { name: 'a' } },
          headers: k,
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await hit('POST', '/api/v1/db/query', {
          json: { entity: 'items', action: 'select', sort: [{ field: 'id', direction: 'Desc' }], total: true },
          headers: k,
        })
      ).status,
    ).toBe(200);
    expect((await hit('POST', '/api/v1/db/query', { json: { entity: 'items', action: 'select' } })).status).toBe(401);
    expect(
      (
        await hit('POST', '/api/v1/db/query', {
          json: { entity: 'items', action: 'select' },
          headers: { 'x-api-key': keys.dbOther! },
        })
      ).status,
    ).toBe(403);
    expect(
      (await hit('POST', '/api/v1/db/query', { json: { entity: 'items', action: 'select', bogus: 1 }, headers: k }))
        .status,
    ).toBe(400);
    expect((await hit('POST', '/api/v1/db/query', { raw: '{bad', type: 'application/json', headers: k })).status).toBe(
      400,
    );
    expect(
      (await hit('POST', '/api/v1/db/query', { raw: 'a=b', type: 'application/x-www-form-urlencoded', headers: k }))
        .status,
    ).toBe(415);
    expect(
      (
        await hit('POST', '/api/v1/db/query', {
          json: { entity: 'items', action: 'select', transaction_id: crypto.randomUUID() },
          headers: k,
        })
      ).status,
    ).toBe(404);
    // Transactions: optional bodies, malformed ones refused.
    expect(
      (await hit('POST', '/api/v1/db/transaction/begin', { raw: '{bad', type: 'application/json', headers: k })).status,
    ).toBe(400);
    const tx = (await hit('POST', '/api/v1/db/transaction/begin', { headers: k })).body.data.transaction_id;
    expect(
      (await hit('POST', `/api/v1/db/transaction/${tx}/commit`, { raw: '{bad', type: 'application/json', headers: k }))
        .status,
    ).toBe(400);
    expect((await hit('POST', `/api/v1/db/transaction/${tx}/commit`, { json: {}, headers: k })).status).toBe(200);
    const tx2 = (await hit('POST', '/api/v1/db/transaction/begin', { json: {}, headers: k })).body.data.transaction_id;
    expect(
      (
        await hit('POST', '/api/v1/db/query', {
          json: { entity: 'items', action: 'insert', data: { note: 'no name' }, transaction_id: tx2 },
          headers: k,
        })
      ).status,
    ).toBeGreaterThanOrEqual(400);
    expect((await hit('POST', `/api/v1/db/transaction/${tx2}/commit`, { headers: k })).status).toBe(409);
    const tx3 = (await hit('POST', '/api/v1/db/transaction/begin', { headers: k })).body.data.transaction_id;
    expect(
      (
        await hit('POST', `/api/v1/db/transaction/${tx3}/rollback`, {
          raw: '{bad',
          type: 'application/json',
          headers: k,
        })
      ).status,
    ).toBe(400);
    expect((await hit('POST', `/api/v1/db/transaction/${tx3}/rollback`, { headers: k })).status).toBe(200);
    expect((await hit('POST', `/api/v1/db/transaction/${tx3}/rollback`, { headers: k })).status).toBe(404);
  });

  test('Realtime', async () => {
    const k = { 'x-api-key': keys.db! };
    expect((await hit('GET', '/api/v1/realtime?tables=items', { headers: k })).status).toBe(200);
    expect((await hit('GET', '/api/v1/realtime?tables=items')).status).toBe(401);
    expect((await hit('GET', '/api/v1/realtime?tables=orders', { headers: k })).status).toBe(403);
    expect((await hit('GET', '/api/v1/realtime', { headers: k })).status).toBe(400);
    const ticket = await hit('POST', '/api/v1/realtime/ticket', { headers: k });
    expect(ticket.status).toBe(200);
    expect((await hit('GET', `/api/v1/realtime?tables=items&ticket=${ticket.body.data.ticket}`)).status).toBe(200);
    expect((await hit('GET', `/api/v1/realtime?tables=items&ticket=${ticket.body.data.ticket}`)).status).toBe(401);
    expect((await hit('POST', '/api/v1/realtime/ticket', { headers: { 'x-api-key': 'sk_nope' } })).status).toBe(401);
  });

  test('Mail API', async () => {
    const k = { 'x-api-key': keys.mail! };
    const msg = { to: ['ada@example.com'], subject: 'Hello', text: 'Hi.' };
    const idem = { ...k, 'idempotency-key': crypto.randomUUID() };
    const queued = await hit('POST', '/api/v1/mail/send', { json: msg, headers: idem });
    expect(queued.status).toBe(202);
    const replay = await hit('POST', '/api/v1/mail/send', { json: msg, headers: idem });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect((await hit('POST', '/api/v1/mail/send', { json: { ...msg, sync: true }, headers: k })).status).toBe(200);
    expect((await hit('POST', '/api/v1/mail/send', { json: { ...msg, subject: 'Other' }, headers: idem })).status).toBe(
      422,
    );
    expect(
      (
        await hit('POST', '/api/v1/mail/send', {
          json: { to: ['ada@example.com'], template: 'no_such_template' },
          headers: k,
        })
      ).status,
    ).toBe(404);
    expect((await hit('POST', '/api/v1/mail/send', { json: { to: [] }, headers: k })).status).toBe(400);
    expect((await hit('POST', '/api/v1/mail/send', { raw: '{bad', type: 'application/json', headers: k })).status).toBe(
      400,
    );
    expect((await hit('POST', '/api/v1/mail/send', { raw: 'to=a', type: 'text/plain', headers: k })).status).toBe(415);
    expect((await hit('POST', '/api/v1/mail/send', { json: msg })).status).toBe(401);
    expect((await hit('POST', '/api/v1/mail/send', { json: msg, headers: { 'x-api-key': keys.db! } })).status).toBe(
      403,
    );
    expect((await hit('GET', `/api/v1/mail/jobs/${queued.body.data.job_id}`, { headers: k })).status).toBe(200);
    expect((await hit('GET', `/api/v1/mail/jobs/${crypto.randomUUID()}`, { headers: k })).status).toBe(404);
    await s.settings.unset('mail.smtp_url');
    try {
      expect((await hit('POST', '/api/v1/mail/send', { json: msg, headers: k })).status).toBe(503);
    } finally {
      await s.settings.set('mail.smtp_url', sink.url);
    }
  });

  test('Files API, including paging bounds', async () => {
    const k = { 'x-api-key': keys.files! };
    const form = () => {
      const f = new FormData();
      f.append('file', new Blob([PNG], { type: 'image/png' }), 'dot.png');
      return f;
    };
    const up = await hit('POST', '/api/v1/files', { raw: form(), headers: k });
    expect(up.status).toBe(201);
    const id = up.body.file.id;
    expect((await hit('POST', '/api/v1/files', { raw: form() })).status).toBe(401);
    expect((await hit('POST', '/api/v1/files', { json: { file: 'x' }, headers: k })).status).toBe(415);
    expect((await hit('GET', '/api/v1/files?limit=10&offset=0', { headers: k })).status).toBe(200);
    for (const [q, field] of [
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=00', 'limit'],
      ['limit=-1', 'limit'],
      ['offset=-1', 'offset'],
      ['limit=abc', 'limit'],
    ] as const) {
      const r = await hit('GET', `/api/v1/files?${q}`, { headers: k });
      expect(r.status, q).toBe(400);
      expect(r.body.error, q).toContain(`${field}:`);
    }
    expect((await hit('GET', `/api/v1/files/${id}`, { headers: k })).status).toBe(200);
    expect((await hit('GET', `/api/v1/files/${crypto.randomUUID()}`, { headers: k })).status).toBe(404);
    const full = await hit('GET', `/api/v1/files/${id}/content`, { headers: k });
    expect(full.status).toBe(200);
    expect(full.headers.get('content-type')).toBe('image/png');
    expect((await hit('GET', `/api/v1/files/${id}/content`, { headers: { ...k, range: 'bytes=0-3' } })).status).toBe(
      206,
    );
    expect(
      (
        await hit('GET', `/api/v1/files/${id}/content`, {
          headers: { ...k, 'if-none-match': full.headers.get('etag')! },
        })
      ).status,
    ).toBe(304);
    expect(
      (await hit('GET', `/api/v1/files/${id}/content`, { headers: { ...k, range: 'bytes=100000-' } })).status,
    ).toBe(416);
    expect((await hit('GET', `/api/v1/files/${id}/content`)).status).toBe(401);
    expect((await hit('HEAD', `/api/v1/files/${id}/content`, { headers: k })).status).toBe(200);
    expect((await hit('HEAD', `/api/v1/files/${crypto.randomUUID()}/content`, { headers: k })).status).toBe(404);
    expect((await hit('DELETE', `/api/v1/files/${id}`, { headers: k })).status).toBe(200);
    expect((await hit('DELETE', `/api/v1/files/${id}`, { headers: k })).status).toBe(404);
  });

  test('extension routes (contact form)', async () => {
    const form = { name: 'Ada', email: 'ada@example.com', message: 'Hello' };
    expect((await hit('POST', '/api/module/contact-form/submit', { json: form })).status).toBe(503);
    await s.setExtensionSetting('contact-form', 'to', 'owner@example.com');
    await s.setExtensionSetting('contact-form', 'rate_limit_per_hour', 1);
    const ip = '198.19.1.1';
    expect((await hit('POST', '/api/module/contact-form/submit', { json: form, ip })).status).toBe(202);
    expect((await hit('POST', '/api/module/contact-form/submit', { json: form, ip })).status).toBe(429);
    expect((await hit('POST', '/api/module/contact-form/submit', { json: { name: 'Ada' } })).status).toBe(400);
    expect(
      (await hit('POST', '/api/module/contact-form/submit', { raw: '{bad', type: 'application/json' })).status,
    ).toBe(400);
    expect(
      (
        await hit('POST', '/api/module/contact-form/submit', {
          raw: 'name=Ada&email=ada%40example.com&message=Hi',
          type: 'application/x-www-form-urlencoded',
        })
      ).status,
    ).toBe(202);
  });

  test('api_key_required mode: 401 api_key_required on every public prefix, the key opens them', async () => {
    await s.settings.set('web.public_api_access_mode', 'api_key_required');
    try {
      const site = { 'x-api-key': keys.site! };
      expect((await hit('GET', '/api/v1/public/runtime-config')).status).toBe(401);
      expect((await hit('GET', '/api/v1/public/runtime-config', { headers: { 'x-api-key': 'pk_nope' } })).status).toBe(
        401,
      );
      expect((await hit('GET', '/api/v1/public/runtime-config', { headers: site })).status).toBe(200);
      const email = `conf-key-${Date.now().toString(36)}@example.com`;
      const password = 'correct horse battery';
      expect((await hit('POST', '/api/v1/auth/register', { json: { email, password } })).status).toBe(401);
      expect((await hit('POST', '/api/v1/auth/register', { json: { email, password }, headers: site })).status).toBe(
        201,
      );
      const login = await hit('POST', '/api/v1/auth/login', { json: { email, password }, headers: site });
      expect(login.status).toBe(200);
      const bearer = { authorization: `Bearer ${login.body.data.access_token}` };
      expect((await hit('GET', '/api/v1/auth/me', { headers: bearer })).status).toBe(401);
      expect((await hit('GET', '/api/v1/auth/me', { headers: { ...bearer, ...site } })).status).toBe(200);
      expect((await hit('POST', '/api/v1/auth/password/forgot', { json: { email } })).status).toBe(401);
      expect((await hit('POST', '/api/v1/auth/logout', { headers: bearer })).status).toBe(401);
      expect((await hit('POST', '/api/v1/db/query', { json: { entity: 'items', action: 'select' } })).status).toBe(401);
      expect((await hit('POST', '/api/v1/db/transaction/begin', {})).status).toBe(401);
      expect(
        (
          await hit('POST', '/api/module/contact-form/submit', {
            json: { name: 'Ada', email: 'ada@example.com', message: 'Hi' },
          })
        ).status,
      ).toBe(401);
    } finally {
      await s.settings.set('web.public_api_access_mode', 'open');
    }
  });

  test('every answer matched the document, and every operation was exercised', () => {
    expect(problems).toEqual([]);
    const ops = Object.values(doc.paths as Doc).flatMap((item) =>
      Object.values(item as Doc).map((op: Doc) => op.operationId as string),
    );
    expect(ops.filter((id) => !c.seen.has(id))).toEqual([]);
    // Unlinking a provider succeeds only once a second way to sign in exists, which the
    // suite writes to the database directly: on the source only (its 409 is checked everywhere).
    const successOnSourceOnly = ON_SOURCE ? [] : ['deleteAuthIdentitiesById'];
    for (const id of ops.filter((o) => !successOnSourceOnly.includes(o)))
      expect(
        [...c.seen.get(id)!].some((st) => Number(st) < 400),
        `${id} had no success`,
      ).toBe(true);
  });

  test('the checker itself catches an undocumented status, a wrong body, a missing header, an undocumented media type, and a request the document forbids', () => {
    const h = (o: Record<string, string> = {}) =>
      new Headers({ 'x-request-id': 'r1', 'content-type': 'application/json', ...o });
    const fresh = new Conformance(doc);
    expect(fresh.check('GET', '/api/v1/auth/me', 418, h(), '{}')[0]).toContain('not documented');
    expect(fresh.check('GET', '/api/v1/auth/me', 200, h(), '{"success":true,"data":{"user":{}}}')[0]).toContain(
      'does not match',
    );
    expect(
      fresh.check('GET', '/api/v1/auth/me', 200, new Headers({ 'content-type': 'application/json' }), '{}')[0],
    ).toContain('x-request-id missing');
    expect(
      fresh.check(
        'POST',
        '/api/v1/auth/login',
        429,
        h(),
        JSON.stringify({ success: false, error: { code: 'rate_limited', message: 'x' } }),
      )[0],
    ).toContain('retry-after missing');
    expect(fresh.check('GET', '/api/v1/auth/me', 200, h({ 'content-type': 'text/html' }), '<p>')[0]).toContain(
      'media type text/html',
    );
    // The request side: what the server accepted must be allowed by the document.
    expect(
      fresh.checkRequest('POST', '/api/v1/auth/login', 'application/x-www-form-urlencoded', 'email=a')[0],
    ).toContain('not documented');
    expect(fresh.checkRequest('GET', '/api/v1/files?limit=500', undefined, undefined)[0]).toContain(
      'invalid per the document',
    );
    expect(fresh.checkRequest('POST', '/api/v1/auth/login', 'application/json', undefined)[0]).toContain(
      'documented as required',
    );
    expect(fresh.checkRequest('POST', '/api/v1/auth/logout', 'application/json', undefined)).toEqual([]);
  });

  test('the served document is byte-identical after the traffic, on both listeners', async () => {
    expect(await (await fetch(s.publicUrl + '/api/openapi.json')).text()).toBe(served);
    expect(await (await fetch(s.url + '/api/openapi.json')).text()).toBe(served);
    // The defect it guards against: Elysia's compile added additionalProperties:false to auth bodies.
    expect(doc.components.schemas.LoginRequest.additionalProperties).toBeUndefined();
    // A later server in the same process (after an earlier one's traffic compiled the shared
    // route schemas) serves the very same document.
    firstServed.push(served);
    expect(firstServed.every((d) => d === firstServed[0])).toBe(true);
  });

  test('valid under @seriousme/openapi-schema-validator and clean under redocly lint', async () => {
    // Its own OpenAPI 3.1 schema (ajv's `strict` is forced off inside it: see its README).
    const v = new Validator();
    expect(await v.validate(structuredClone(doc))).toEqual({ valid: true });
    const dir = mkdtempSync(join(tmpdir(), 'basalt-openapi-'));
    try {
      writeFileSync(join(dir, 'openapi.json'), served);
      // The config and its named exceptions (.redocly.lint-ignore.yaml, keyed `openapi.json`) beside the document.
      for (const f of ['redocly.yaml', '.redocly.lint-ignore.yaml']) copyFileSync(join(ROOT, f), join(dir, f));
      const lint = Bun.spawnSync(
        [
          'node',
          join(ROOT, 'node_modules/@redocly/cli/bin/cli.js'),
          'lint',
          join(dir, 'openapi.json'),
          '--config',
          join(dir, 'redocly.yaml'),
          '--format',
          'stylish',
        ],
        {
          env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
        },
      );
      const out = lint.stdout.toString() + lint.stderr.toString();
      expect(lint.exitCode, out).toBe(0);
      expect(out, out).toContain('Your API description is valid');
      expect(out, out).not.toMatch(/You have \d+ warning/);
      // Exactly the two redirects are excepted (an exception that no longer matches would hide nothing).
      expect(out, out).toContain('2 problems are explicitly ignored');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
