/**
 * A real SMTP server on 127.0.0.1 (smtp-server) that keeps every message it
 * receives, parsed by mailparser. Tests point `mail.smtp_url` at `sink.url` and
 * assert on what arrived. It can refuse the next N messages (or the next N to one
 * recipient) with any SMTP reply code, hold messages unanswered (to catch a sender mid-send), or answer each one
 * only after a delay (a slow server).
 *
 * @example
 * const sink = await startSmtpSink();
 * const s = await startServer(engine, { env: { BASALT_MAIL_SMTP_URL: sink.url, BASALT_MAIL_FROM: 'app@example.com' } });
 * // … send …
 * const [m] = await sink.waitFor(1);
 * expect(m.subject).toBe('Hello');
 */
import { SMTPServer } from 'smtp-server';
import { simpleParser } from 'mailparser';

export interface SinkMessage {
  /** Envelope: MAIL FROM and RCPT TO as the server saw them. */
  envelopeFrom: string;
  envelopeTo: string[];
  from: string;
  to: string[];
  subject: string;
  text: string;
  /** The HTML part as sent, or '' when there is none. */
  html: string;
  messageId: string;
  headers: Map<string, unknown>;
  raw: string;
  receivedAt: number;
}

export interface SmtpSink {
  port: number;
  /** smtp://127.0.0.1:<port> */
  url: string;
  messages: SinkMessage[];
  /**
   * Refuse the next `n` messages at end of DATA with `code` (4xx temporary, 5xx permanent);
   * with `to`, only messages with that envelope recipient (others pass), so a mail still in
   * flight from an earlier step cannot take a refusal meant for the next one.
   */
  refuse(n: number, code?: number, message?: string, opts?: { to?: string }): void;
  /** Messages refused so far. */
  readonly refused: number;
  /**
   * Leave messages unanswered after DATA until `release()` (the client waits). A held
   * message whose client disconnects is discarded, as a real server would.
   */
  hold(): void;
  release(): void;
  /**
   * Answer every message `ms` after its DATA (0: at once again), like a slow server. A
   * delayed message counts as held; its client disconnecting discards it.
   */
  delay(ms: number): void;
  /** Messages currently held (by hold() or delay()). */
  readonly heldCount: number;
  /**
   * Resolves with the messages once at least `n` arrived (only those `match` accepts,
   * when given); rejects after `timeoutMs` (default 10 s).
   */
  waitFor(n: number, timeoutMs?: number, match?: (m: SinkMessage) => boolean): Promise<SinkMessage[]>;
  clear(): void;
  close(): Promise<void>;
}

export async function startSmtpSink(): Promise<SmtpSink> {
  const messages: SinkMessage[] = [];
  const waiters = new Set<() => void>();
  let refuseLeft = 0;
  let refuseCode = 451;
  let refuseText = 'Temporary failure, try again later';
  let refuseTo: string | undefined;
  let refused = 0;
  let held = false;
  let delayMs = 0;
  // Answers held back, per SMTP session; dropped when the client disconnects (it never saw a 250, so nothing was delivered).
  const heldCallbacks: { session: string; answer: () => void }[] = [];

  const server = new SMTPServer({
    secure: false,
    disabledCommands: ['STARTTLS'],
    authOptional: true,
    allowInsecureAuth: true,
    logger: false,
    size: 50 * 1024 * 1024,
    // close() should not wait 30 s for a client's pooled connection to go away.
    closeTimeout: 200,
    disableReverseLookup: true,
    onClose(session) {
      for (let i = heldCallbacks.length - 1; i >= 0; i--)
        if (heldCallbacks[i]!.session === session.id) heldCallbacks.splice(i, 1);
    },
    onAuth(auth, _session, cb) {
      cb(null, { user: auth.username });
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', () => {});
      stream.on('end', async () => {
        const answer = async () => {
          if (
            refuseLeft > 0 &&
            (refuseTo === undefined || session.envelope.rcptTo.some((r) => r.address === refuseTo))
          ) {
            refuseLeft--;
            refused++;
            const err = new Error(refuseText) as Error & { responseCode: number };
            err.responseCode = refuseCode;
            return cb(err);
          }
          const raw = Buffer.concat(chunks);
          try {
            const parsed = await simpleParser(raw);
            const addrs = (v: unknown): string[] => {
              const list = Array.isArray(v) ? v : v ? [v] : [];
              return list.flatMap((a: { value?: { address?: string }[] }) =>
                (a.value ?? []).map((x) => x.address ?? ''),
              );
            };
            messages.push({
              envelopeFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
              envelopeTo: session.envelope.rcptTo.map((r) => r.address),
              from: addrs(parsed.from)[0] ?? '',
              to: addrs(parsed.to),
              subject: parsed.subject ?? '',
              text: parsed.text ?? '',
              html: typeof parsed.html === 'string' ? parsed.html : '',
              messageId: parsed.messageId ?? '',
              headers: parsed.headers as Map<string, unknown>,
              raw: raw.toString('utf8'),
              receivedAt: Date.now(),
            });
            cb(null);
            for (const w of [...waiters]) w();
          } catch (e) {
            cb(e as Error);
          }
        };
        const pending = { session: session.id, answer: () => void answer() };
        if (held) heldCallbacks.push(pending);
        else if (delayMs > 0) {
          heldCallbacks.push(pending);
          setTimeout(() => {
            const i = heldCallbacks.indexOf(pending);
            if (i < 0) return; // released early, or the client went away
            heldCallbacks.splice(i, 1);
            pending.answer();
          }, delayMs);
        } else await answer();
      });
    },
  });
  // A client that vanishes mid-DATA (killed process) is normal here.
  server.on('error', () => {});

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as { port: number }).port;

  return {
    port,
    url: `smtp://127.0.0.1:${port}`,
    messages,
    refuse(n, code = 451, message, opts = {}) {
      refuseLeft = n;
      refuseTo = opts.to;
      refuseCode = code;
      refuseText = message ?? (code >= 500 ? 'Message rejected' : 'Temporary failure, try again later');
    },
    get refused() {
      return refused;
    },
    hold() {
      held = true;
    },
    delay(ms) {
      delayMs = ms;
    },
    get heldCount() {
      return heldCallbacks.length;
    },
    release() {
      held = false;
      for (const h of heldCallbacks.splice(0)) h.answer();
    },
    waitFor(n, timeoutMs = 10_000, match = () => true) {
      const found = () => messages.filter(match);
      if (found().length >= n) return Promise.resolve(found());
      return new Promise((resolve, reject) => {
        const check = () => {
          const got = found();
          if (got.length >= n) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve(got);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`smtp sink: expected ${n} message(s) within ${timeoutMs} ms, got ${found().length}`));
        }, timeoutMs);
        waiters.add(check);
      });
    },
    clear() {
      messages.length = 0;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
