/** The content type of an upload, from its bytes; the client's claim is never used. */
import { fileTypeFromBuffer } from 'file-type';

/** Binary formats file-type knows (images, documents, archives, media); otherwise text or octet-stream. */
export async function detectType(head: Uint8Array): Promise<string> {
  const found = await fileTypeFromBuffer(head);
  if (found) return found.mime;
  return looksLikeText(head) ? 'text/plain; charset=utf-8' : 'application/octet-stream';
}

/** Valid UTF-8 without control characters other than tab, line breaks and form feed. */
function looksLikeText(head: Uint8Array): boolean {
  if (head.length === 0) return false;
  // The head may end inside a multi-byte character: drop up to 3 trailing continuation bytes.
  let end = head.length;
  for (let i = 0; i < 3 && end > 0 && (head[end - 1]! & 0xc0) === 0x80; i++) end--;
  if (end > 0 && head[end - 1]! >= 0xc0) end--;
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(head.subarray(0, end));
    return !/[\u0000-\u0008\u000b\u000e-\u001f\u007f]/.test(text);
  } catch {
    return false;
  }
}
