/**
 * Password hashing with argon2id through Bun.password (native, off the JS thread).
 *
 * Parameters: m = 19 MiB, t = 2, p = 1 — the OWASP Password Storage Cheat Sheet's
 * first argon2id configuration. Bun's default (64 MiB, t = 2) costs ~3x the time and
 * 64 MiB per concurrent login; 19 MiB keeps a burst of logins within a small server's
 * memory while staying well above GPU-cracking economics. The parameters are stored
 * in every hash, so a later change applies on each user's next login (rehash).
 */
export const ARGON2 = { algorithm: 'argon2id' as const, memoryCost: 19_456, timeCost: 2 };

/**
 * Passwords longer than this many characters (Unicode code points, as the minimum) are
 * refused before hashing (bounded work per request). A password is hashed exactly as
 * sent: no trimming, no normalization (docs/auth.md, E-mail addresses and passwords).
 */
export const PASSWORD_MAX_LENGTH = 1024;
/** The request schemas' bound, in UTF-16 units: room for PASSWORD_MAX_LENGTH code points outside the BMP. */
export const PASSWORD_MAX_UTF16 = 2 * PASSWORD_MAX_LENGTH;

/**
 * At most this many hashes run at once; the rest wait their turn. Each costs 19 MiB,
 * so a burst of logins cannot take the process's memory with it.
 */
export const MAX_CONCURRENT_HASHES = Math.max(2, navigator.hardwareConcurrency * 2);
let running = 0;
let peak = 0;

/** Highest number of hashes that ran at once since start (observability, tests). */
export function peakConcurrentHashes(): number {
  return peak;
}
const waiting: (() => void)[] = [];

async function bounded<T>(work: () => Promise<T>): Promise<T> {
  if (running >= MAX_CONCURRENT_HASHES) await new Promise<void>((resolve) => waiting.push(resolve));
  else running++;
  peak = Math.max(peak, running);
  try {
    return await work();
  } finally {
    const next = waiting.shift();
    if (next)
      next(); // hand the slot over directly
    else running--;
  }
}

let hashes = 0;

/** Number of new hashes made since start (observability, tests: which requests paid for one). */
export function hashesMade(): number {
  return hashes;
}

export function hashPassword(password: string): Promise<string> {
  hashes++;
  return bounded(() => Bun.password.hash(password, ARGON2));
}

export async function verifyPassword(password: string, hash: string): Promise<boolean> {
  try {
    return await bounded(() => Bun.password.verify(password, hash));
  } catch {
    return false; // a malformed stored hash never matches
  }
}

/** True when the stored hash was made with other parameters than today's. */
export function needsRehash(hash: string): boolean {
  const m = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$/.exec(hash);
  return !m || Number(m[1]) !== ARGON2.memoryCost || Number(m[2]) !== ARGON2.timeCost || m[3] !== '1';
}

let dummy: Promise<string> | undefined;

/**
 * A hash of a random password with today's parameters. Logins for unknown e-mail
 * addresses verify against it, so they cost the same as a wrong password.
 */
export function dummyHash(): Promise<string> {
  return (dummy ??= hashPassword(crypto.randomUUID()));
}

/** The policy's problem with a new password, or undefined when it is acceptable. */
export function passwordProblem(password: string, minLength: number): string | undefined {
  if (!password.isWellFormed()) return 'must be valid Unicode text (no lone surrogates)';
  let length = 0;
  for (const _ of password) length++; // code points, not UTF-16 units
  if (length < minLength) return `must be at least ${minLength} characters`;
  if (length > PASSWORD_MAX_LENGTH) return `must be at most ${PASSWORD_MAX_LENGTH} characters`;
  return undefined;
}
