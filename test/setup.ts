// Suites start real databases, servers and child processes; the embedded engine's
// first start alone takes seconds, so the 5 s default is too short.
import { setDefaultTimeout } from 'bun:test';
setDefaultTimeout(60_000);
