/**
 * The local management channel. The embedded database belongs to the one process that
 * serves it, so while `basalt serve` holds a data dir, other `basalt` commands (keys,
 * settings, templates, admin, …) are run *inside* that process: the command line sends
 * its arguments over the unix socket `<data.dir>/basalt.sock` and prints what the
 * command printed there. Only the data dir's owner can open the socket (mode 0600, made
 * under a 077 umask so it is never briefly wider). See docs/operations.md.
 */
import { chmodSync, existsSync, statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { Socket, UnixSocketListener } from 'bun';
import type { CliIO } from './command';
import type { Logger } from '../log';
import { interactive } from '../db/interactive';
import type { HandoverAnswer, HandoverAsk } from '../handover';

export const SOCKET_NAME = 'basalt.sock';
/** Unix socket paths are limited to 107 bytes (sun_path). */
const MAX_PATH = 107;
/** A request is one line of JSON, far smaller than this. */
const MAX_REQUEST = 64 * 1024;

export function socketPath(dataDir: string): string {
  return join(dataDir, SOCKET_NAME);
}

interface Reply {
  /** Lines in the order printed: [stream, text]. */
  lines: ['out' | 'err', string][];
  code: number;
}

/** Runs one command line inside the serving process; returns the exit code. */
export type RunInProcess = (argv: string[], io: CliIO) => Promise<number>;

/**
 * Listen on `<dataDir>/basalt.sock`. On the embedded engine commands run here; on both
 * engines a new `basalt serve` asks here to take this one over (`onHandover`,
 * src/handover.ts). Returns the stop function, or undefined when the path is too long for a
 * unix socket (logged; commands then say to stop the server).
 */
export function startControlSocket(
  dataDir: string,
  run: RunInProcess,
  log: Logger,
  onHandover?: (ask: HandoverAsk) => HandoverAnswer,
): (() => void) | undefined {
  const path = socketPath(dataDir);
  if (Buffer.byteLength(path) > MAX_PATH) {
    log.warn('management socket not started: the data dir path is too long for a unix socket', { path });
    return undefined;
  }
  // The caller made sure no live process answers here (the data dir's lock, or asking): a file left is a dead one's.
  if (existsSync(path)) unlinkSync(path);
  const previous = process.umask(0o077);
  let listener: UnixSocketListener<{ buf: string; done: boolean }>;
  try {
    listener = Bun.listen<{ buf: string; done: boolean }>({
      unix: path,
      socket: {
        open(s) {
          s.data = { buf: '', done: false };
        },
        data(s, chunk) {
          if (s.data.done) return;
          s.data.buf += chunk.toString('utf8');
          if (s.data.buf.length > MAX_REQUEST)
            return finish(s, { lines: [['err', 'basalt: request too large']], code: 2 });
          const nl = s.data.buf.indexOf('\n');
          if (nl === -1) return;
          s.data.done = true;
          let argv: unknown;
          let ask: HandoverAsk | undefined;
          try {
            ({ argv, handover: ask } = JSON.parse(s.data.buf.slice(0, nl)) as {
              argv?: unknown;
              handover?: HandoverAsk;
            });
          } catch {}
          if (ask && typeof ask === 'object') {
            const answer: HandoverAnswer = onHandover
              ? onHandover(ask)
              : { accepted: false, reason: 'this instance cannot be taken over' };
            s.data.done = true;
            s.end(JSON.stringify(answer) + '\n');
            return;
          }
          if (!Array.isArray(argv) || !argv.every((a) => typeof a === 'string')) {
            return finish(s, { lines: [['err', 'basalt: malformed request on the management socket']], code: 2 });
          }
          const lines: Reply['lines'] = [];
          const io: CliIO = { out: (l) => void lines.push(['out', l]), err: (l) => void lines.push(['err', l]) };
          log.info('management command', {
            command: argv
              .filter((a) => !a.startsWith('-'))
              .slice(0, 2)
              .join(' '),
          });
          // Someone waits for the answer: interactive work (src/db/interactive.ts).
          interactive(() => run(argv, io)).then(
            (code) => finish(s, { lines, code }),
            (e) => {
              log.error('management command failed', { cause: e });
              finish(s, {
                lines: [...lines, ['err', 'basalt: the command failed inside the running server; see its log']],
                code: 1,
              });
            },
          );
        },
      },
    });
  } finally {
    process.umask(previous);
  }
  chmodSync(path, 0o600);
  const ino = statSync(path).ino;
  return () => {
    listener.stop(true);
    try {
      // After a takeover the file may already be the new process's socket: leave that one.
      if (statSync(path).ino === ino) unlinkSync(path);
    } catch {}
  };
}

function finish(s: Socket<{ buf: string; done: boolean }>, reply: Reply): void {
  s.data.done = true;
  s.end(JSON.stringify(reply) + '\n');
}

/** Send one request line to the socket at `path`; its whole answer, or undefined when nothing listens there. */
function exchange(path: string, request: unknown): Promise<{ text: string; connected: boolean } | undefined> {
  if (!existsSync(path)) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    let text = '';
    let connected = false;
    const settle = () => resolve({ text, connected });
    Bun.connect<undefined>({
      unix: path,
      socket: {
        open(s) {
          connected = true;
          s.write(JSON.stringify(request) + '\n');
        },
        data(_s, chunk) {
          text += chunk.toString('utf8');
        },
        close: settle,
        error: () => settle(),
        connectError: () => resolve(undefined),
      },
    }).catch(() => resolve(undefined));
  });
}

/**
 * Send `argv` to the process serving `dataDir`, print what it printed, and return its exit
 * code; undefined when nothing listens there (no socket, or a dead process's file).
 */
export async function runRemote(dataDir: string, argv: string[], io: CliIO): Promise<number | undefined> {
  const answer = await exchange(socketPath(dataDir), { argv });
  if (!answer) return undefined;
  let reply: Reply | undefined;
  try {
    reply = JSON.parse(answer.text) as Reply;
  } catch {}
  if (!reply) return answer.connected ? 1 : undefined;
  for (const [stream, line] of reply.lines) io[stream](line);
  return reply.code;
}

/** Ask the process serving `dataDir` to hand over to this one; undefined when none listens there. */
export async function askHandover(dataDir: string, ask: HandoverAsk): Promise<HandoverAnswer | undefined> {
  const answer = await exchange(socketPath(dataDir), { handover: ask });
  if (!answer?.connected) return undefined;
  try {
    const parsed = JSON.parse(answer.text) as HandoverAnswer | Reply;
    if ('accepted' in parsed) return parsed;
  } catch {}
  // A version before takeovers answers a command's reply (or nothing).
  return { accepted: false, reason: 'the running instance is of a version that cannot be taken over' };
}
