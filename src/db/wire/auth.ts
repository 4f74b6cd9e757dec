/**
 * Authentication of a connection of the external wire path (src/db/wire/connection.ts): a
 * cleartext password, MD5 or SCRAM-SHA-256 (RFC 5802 and 7677, without channel binding), as
 * postgres.js answers them; another method is UNSUPPORTED_AUTH (the pool then keeps postgres.js,
 * src/db/external.ts). The methods are checked by test/database/external-wire-auth.test.ts
 * against a scratch cluster.
 */
import crypto from 'node:crypto';
import { connectionError } from './errors';
import type { ResolvedOptions } from './resolved-options';
import type { Writer } from '../wire-writer';

const PASSWORD_MESSAGE = 0x70; // PasswordMessage, SASLInitialResponse and SASLResponse alike

/** One connection's exchange: the SCRAM nonce and the signature the server must return. */
export class Authentication {
  private nonce = '';
  private serverSignature: Buffer = Buffer.alloc(0);

  constructor(private readonly o: Pick<ResolvedOptions, 'user' | 'pass'>) {}

  private async password(): Promise<string> {
    return typeof this.o.pass === 'function' ? await this.o.pass() : this.o.pass;
  }

  /**
   * The answer to an Authentication message (`body`: after its code and length), written into
   * `w`, or null when none is due (AuthenticationOk, SASLFinal checked). Throws for a method
   * this path does not speak and for a SCRAM exchange that does not check out.
   */
  async answer(body: Buffer, w: Writer): Promise<Writer | null> {
    const type = body.readInt32BE(0);
    if (type === 0) return null;
    if (type === 3)
      return w
        .reset()
        .begin(PASSWORD_MESSAGE)
        .cstring(await this.password())
        .end();
    if (type === 5) {
      const salt = Buffer.from(body.subarray(4, 8));
      const inner = md5(Buffer.from((await this.password()) + this.o.user));
      const outer = 'md5' + md5(Buffer.concat([Buffer.from(inner), salt]));
      return w.reset().begin(PASSWORD_MESSAGE).cstring(outer).end();
    }
    if (type === 10) {
      if (!body.toString('utf8', 4).split('\0').includes('SCRAM-SHA-256'))
        throw connectionError('UNSUPPORTED_AUTH', 'the server offers no SASL mechanism this path speaks');
      this.nonce = crypto.randomBytes(18).toString('base64');
      const first = Buffer.from('n,,n=*,r=' + this.nonce);
      return w.reset().begin(PASSWORD_MESSAGE).cstring('SCRAM-SHA-256').bytes(first).end();
    }
    if (type === 11) {
      const nonce = this.nonce;
      const res = Object.fromEntries(
        body
          .toString('utf8', 4)
          .split(',')
          .map((x) => [x[0]!, x.slice(2)]),
      );
      // RFC 5802: the server's nonce extends the client's; anything else is not this exchange.
      if (typeof res.r !== 'string' || res.r.length <= nonce.length || !res.r.startsWith(nonce))
        throw connectionError('SASL_NONCE_MISMATCH', "the server's SCRAM nonce does not extend the client's");
      const keys = scramKeys(await this.password(), Buffer.from(res.s!, 'base64'), Number(res.i));
      const auth = `n=*,r=${nonce},r=${res.r},s=${res.s},i=${res.i},c=biws,r=${res.r}`;
      this.serverSignature = hmac(keys.serverKey, auth);
      const proof = xor(keys.clientKey, hmac(keys.storedKey, auth));
      const final = Buffer.from(`c=biws,r=${res.r},p=${proof.toString('base64')}`);
      return w.reset().begin(PASSWORD_MESSAGE).raw(final).end();
    }
    if (type === 12) {
      const expected = this.serverSignature;
      if (expected.length === 0)
        throw connectionError('SASL_SIGNATURE_MISMATCH', 'the server ended SCRAM before its challenge');
      const given = Buffer.from(body.toString('utf8', 4).split('\0', 1)[0]!.slice(2), 'base64');
      if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected))
        throw connectionError('SASL_SIGNATURE_MISMATCH', 'the server did not return the correct signature');
      return null;
    }
    throw connectionError('UNSUPPORTED_AUTH', `authentication method ${type} is not one this path speaks`);
  }
}

/** RFC 5802's keys of `password` under a salt and iteration count: what both sides of SCRAM-SHA-256 derive. */
function scramKeys(password: string, salt: Buffer, iterations: number) {
  const salted = crypto.pbkdf2Sync(password, salt, iterations, 32, 'sha256');
  const clientKey = hmac(salted, 'Client Key');
  return {
    clientKey,
    storedKey: crypto.createHash('sha256').update(clientKey).digest(),
    serverKey: hmac(salted, 'Server Key'),
  };
}

/**
 * A SCRAM-SHA-256 verifier of `password` (RFC 5803, PostgreSQL's stored form): what a server is
 * given instead of the password (the authenticator's, src/modules/database/authenticator.ts), so
 * no statement log or `pg_stat_activity` shows it.
 */
export function scramVerifier(password: string, iterations = 4096): string {
  const salt = crypto.randomBytes(16);
  const { storedKey, serverKey } = scramKeys(password, salt, iterations);
  const b64 = (b: Buffer) => b.toString('base64');
  return `SCRAM-SHA-256$${iterations}:${b64(salt)}$${b64(storedKey)}:${b64(serverKey)}`;
}

function md5(x: Buffer): string {
  return crypto.createHash('md5').update(x).digest('hex');
}

function hmac(key: Buffer, x: string): Buffer {
  return crypto.createHmac('sha256', key).update(x).digest();
}

function xor(a: Buffer, b: Buffer): Buffer {
  const out = Buffer.allocUnsafe(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i]! ^ b[i]!;
  return out;
}
