/** Display helpers: dates, relative times, numbers, cell values. */

export function dateTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString(undefined, {
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
  });
}

export function ago(iso: string | null | undefined): string {
  if (!iso) return 'never';
  const s = (Date.now() - new Date(iso).getTime()) / 1000;
  if (Number.isNaN(s)) return iso;
  const future = s < 0;
  const a = Math.abs(s);
  const text =
    a < 60
      ? `${Math.round(a)} s`
      : a < 3600
        ? `${Math.round(a / 60)} min`
        : a < 86400
          ? `${Math.round(a / 3600)} h`
          : `${Math.round(a / 86400)} d`;
  return future ? `in ${text}` : `${text} ago`;
}

export const number = (n: number | null | undefined) => (n === null || n === undefined ? '—' : n.toLocaleString());

/** A cell's text, cut so a huge JSON value never freezes the grid. */
export function cell(v: unknown, max = 120): string {
  if (v === null || v === undefined) return '';
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > max ? s.slice(0, max) + '…' : s;
}

/** `<input type=datetime-local>` value → ISO 8601, or undefined. */
export function localToIso(v: string): string | undefined {
  if (!v) return undefined;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

/** A cursor list's page in a query: From and To (local date and time) as ISO 8601, 50 a page, `before`. */
export function rangePage(f: { since: string; until: string }, before?: string) {
  return { since: localToIso(f.since), until: localToIso(f.until), limit: 50, before };
}
