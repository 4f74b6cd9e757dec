/** File names as clients send them are untrusted: keep a readable, harmless name. */

const MAX_NAME_BYTES = 255;

/**
 * The last path segment, NFC-normalized, without control characters or the
 * characters Windows and shells treat specially, without leading dots (no hidden
 * files), at most 255 UTF-8 bytes; `file` when nothing is left.
 */
export function sanitizeName(raw: string | undefined): string {
  let name = (raw ?? '').normalize('NFC');
  name = name.split(/[\\/]/).pop() ?? '';
  name = name
    .replace(/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/g, '')
    .replace(/[<>:"|?*]/g, '_')
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/^\.+/, '')
    .replace(/[. ]+$/, '');
  while (new TextEncoder().encode(name).length > MAX_NAME_BYTES) name = [...name].slice(0, -1).join('');
  return name || 'file';
}

/** `Content-Disposition` with an ASCII fallback and the exact UTF-8 name (RFC 6266 / 5987). */
export function contentDisposition(kind: 'inline' | 'attachment', name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name).replace(/['()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase())}`;
}
