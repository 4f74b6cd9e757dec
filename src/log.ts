/** Structured logs: one JSON object per line on stdout (errors on stderr). */
export type Level = 'debug' | 'info' | 'warn' | 'error' | 'silent';
const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
  /** Whether a line at `lvl` would be written now: lets a hot path skip building its fields. */
  enabled(lvl: Exclude<Level, 'silent'>): boolean;
}

export function createLogger(level: () => Level, base: Record<string, unknown> = {}): Logger {
  const emit = (lvl: Exclude<Level, 'silent'>, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[lvl] < ORDER[level()]) return;
    // The replacer costs as much again as the rest of the line: only when a value needs it.
    const replacer = needsReplacer(base) || needsReplacer(fields) ? errorReplacer : undefined;
    const line = JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...base, ...fields }, replacer);
    (lvl === 'error' || lvl === 'warn' ? process.stderr : process.stdout).write(line + '\n');
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (f) => createLogger(level, { ...base, ...f }),
    enabled: (lvl) => ORDER[lvl] >= ORDER[level()],
  };
}

/** An object (an Error, or one that may hold one) or a bigint among the values. */
function needsReplacer(fields: Record<string, unknown> | undefined): boolean {
  if (!fields) return false;
  for (const k in fields) {
    const v = fields[k];
    if ((typeof v === 'object' && v !== null) || typeof v === 'bigint') return true;
  }
  return false;
}

function errorReplacer(_k: string, v: unknown) {
  if (v instanceof Error) return { name: v.name, message: v.message, stack: v.stack };
  if (typeof v === 'bigint') return v.toString();
  return v;
}
