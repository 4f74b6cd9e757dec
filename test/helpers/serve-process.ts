/**
 * `basalt serve` as a child process a test can SIGKILL (test/helpers/cli.ts: the executable, or
 * Bun with src/main.ts), on a free port; resolves once it logged that it listens.
 */
import type { FreshDb } from './engines';
import { basaltCommand, basaltEnv } from './cli';

export interface ServedProcess {
  url: string;
  proc: ReturnType<typeof Bun.spawn>;
}

/** `basalt serve` (test/helpers/cli.ts) on a free port; resolves once it logged that it listens. */
export async function serveProcess(db: FreshDb, env: Record<string, string>): Promise<ServedProcess> {
  const proc = Bun.spawn([...basaltCommand(), 'serve'], {
    env: basaltEnv({ ...db.env, BASALT_WEB_PORT: '0', BASALT_LOG_LEVEL: 'info', ...env }, db.dataDir),
    cwd: db.dataDir,
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const decoder = new TextDecoder();
  let buffered = '';
  let stderr = '';
  void (async () => {
    for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) stderr += decoder.decode(chunk);
  })();
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start within 120 s: ${stderr}`)), 120_000);
    void (async () => {
      // Keep draining stdout for the life of the process so request logs never block it.
      for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) {
        buffered += decoder.decode(chunk);
        const m = /"msg":"listening","main":"([^"]+)"/.exec(buffered);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!.replace(/\/$/, ''));
          buffered = '';
        }
        if (buffered.length > 100_000) buffered = buffered.slice(-1000);
      }
      reject(new Error(`serve exited before listening: ${stderr}`));
    })();
  });
  return { url, proc };
}
