/**
 * A process's memory as the kernel counts it (/proc/<pid>/status): its resident set now
 * and its peak since it started, in bytes. `pid` is a server's own (`TestServer.pid`).
 */
import { readFileSync } from 'node:fs';

function statusKb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`/proc/${pid}/status has no ${field}`);
  return Number(m[1]) * 1024;
}

/** Resident set size now, in bytes. */
export const rssBytes = (pid: number): number => statusKb(pid, 'VmRSS');

/** Peak resident set size since the process started (high-water mark), in bytes. */
export const peakRssBytes = (pid: number): number => statusKb(pid, 'VmHWM');
