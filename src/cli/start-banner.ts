/**
 * The plain lines `basalt serve` writes on stderr once it listens, beside the JSON log
 * (docs/operations.md "Start-up message"): where the API, its reference and the admin
 * panel are, and how to get an API key while the server runs. Always written, whatever
 * the log level, so a first run tells a newcomer what to do next.
 */
import type { Server } from 'bun';
import type { Platform } from '../platform';

/** How to run another `basalt` command here: the compiled executable, or Bun on the checkout. */
export function cliCommand(): string {
  const compiled = Bun.main.startsWith('/$bunfs/') || Bun.main.includes('~BUN');
  if (!compiled) return 'npx bun src/main.ts';
  const exe = process.execPath;
  const rel = exe.startsWith(process.cwd() + '/') ? './' + exe.slice(process.cwd().length + 1) : exe;
  return rel;
}

/** A base URL a person can paste: a wildcard bind address is shown as 127.0.0.1. */
function base(server: Server<unknown>, configured: string): string {
  if (configured) return configured.replace(/\/$/, '');
  const u = new URL(server.url.href);
  if (u.hostname === '0.0.0.0' || u.hostname === '[::]' || u.hostname === '::') u.hostname = '127.0.0.1';
  return u.origin;
}

/**
 * What database.url reaches, when it matters (docs/operations.md, "Scaling out"): a
 * transaction-mode pooler and where notifications come from, or a pooler found where none is
 * configured. Empty otherwise.
 */
export function poolerLines(p: Platform): string[] {
  const pooling = p.db.pooling;
  if (!pooling) return [];
  const found = pooling.detected ? ` (${pooling.detected})` : '';
  if (pooling.pooler === 'none')
    return found
      ? [
          `  Pooler:         database.url reaches a pooler${found} but database.pooler is none;`,
          '                  in transaction pool_mode set database.pooler = transaction (docs/operations.md "Scaling out").',
        ]
      : [];
  const how =
    pooling.notifications === 'direct'
      ? 'LISTEN and migrations through database.direct_url'
      : `no database.direct_url: notifications polled every ${pooling.pollMs / 1000} s (docs/operations.md "Scaling out")`;
  return [`  Pooler:         transaction mode${found}; ${how}.`];
}

export function startBanner(p: Platform, main: Server<unknown>, pub?: Server<unknown>): string {
  const mainBase = base(main, p.settings.get('web.main_base_url'));
  const publicBase = pub
    ? base(pub, p.settings.get('web.public_base_url'))
    : base(main, p.settings.get('web.public_base_url'));
  const cli = cliCommand();
  const storage = p.db.kind === 'embedded' ? `embedded PostgreSQL in ${p.dataDir}` : 'external PostgreSQL';
  const keyMode =
    p.settings.get('web.public_api_access_mode') === 'api_key_required'
      ? ' (access mode api_key_required: every public route needs a key)'
      : '';
  return [
    '',
    `Basalt ${p.version} is running (${storage}).`,
    `  API:            ${publicBase}/api/v1/…${pub ? `  (mail and files: ${mainBase}/api/v1/…)` : ''}`,
    `  API reference:  ${publicBase}/api/docs  (OpenAPI document: ${publicBase}/api/openapi.json)`,
    `  Admin panel:    ${mainBase}/_/`,
    ...poolerLines(p),
    `  API keys${keyMode}: in another terminal, while this one runs:`,
    `    ${cli} keys create --type service --service my-app --permissions db:query --tables TABLE`,
    // A copied executable has no README beside it: point at what it serves itself.
    cli.startsWith('npx ')
      ? '    then send the printed key as X-API-Key (README.md "Quick start" walks through a first call).'
      : `    then send the printed key as X-API-Key; ${publicBase}/api/docs shows every call with its fields.`,
    '  Stop with Ctrl-C. The lines below are the JSON log (docs/operations.md).',
    '',
  ].join('\n');
}
