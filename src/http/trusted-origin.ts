/**
 * Whether a request's own origin (built from its Host header) may be written into what
 * others follow — mail links, runtime config — when no base URL is configured: a loopback
 * host (development) or an origin listed in `web.cors_origins`. Any other Host header may
 * be an attacker's (docs/auth.md, "Links in mails"; docs/configuration.md, "Runtime config").
 */
export function trustedOrigin(corsOrigins: string[], origin: string): boolean {
  if (corsOrigins.includes(origin)) return true;
  let host: string;
  try {
    host = new URL(origin).hostname;
  } catch {
    return false;
  }
  return host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
