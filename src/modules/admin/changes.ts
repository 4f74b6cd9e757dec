/**
 * Audited changes made both from the panel (the admin API) and from the command line
 * (`basalt keys …`, `basalt templates …`): one function each, so a change and its
 * audit row are written the same way whoever asks (docs/admin.md "Audit log"). The
 * actor says who: an administrator, or CLI_ACTOR (the command line and its OS user).
 */
import type { Basalt } from '../../services';
import { templateStore, type MailTemplate } from '../mail/templates';
import type { CreateKeyInput, KeyInfo } from '../keys/model';
import type { Actor } from './audit';
import type { JobRow } from '../jobs/store';
import { AdminErrors } from './errors';

/** Create an API key; the audit row names it by id and display, never its secret. */
export async function createKey(p: Basalt, actor: Actor, input: CreateKeyInput): Promise<KeyInfo & { key: string }> {
  const created = await p.services.admin.audited(actor, 'keys.create', async (tx, note) => {
    const k = await p.services.keys.create(input, tx);
    note(k.id, {
      type: k.type,
      name: k.name,
      service: k.service,
      permissions: k.permissions,
      tables: k.tables,
      expires_at: k.expires_at,
      site: k.site,
      display: k.display,
    });
    return k;
  });
  if (created.site) await p.settings.load(); // the site key setting was written in the transaction
  return created;
}

/** Revoke an API key (404 `key_not_found` from the key service for an unknown id). */
export async function revokeKey(p: Basalt, actor: Actor, id: string): Promise<KeyInfo> {
  // The key's open transactions end and its waiting requests are refused first: on the
  // embedded engine one of them may hold the database the audited transaction needs.
  await p.services.keys.revoked(String(id));
  return p.services.admin.audited(actor, 'keys.revoke', async (tx, note) => {
    const k = await p.services.keys.revoke(id, tx);
    note(k.id, { display: k.display, name: k.name });
    return k;
  });
}

/** Create or replace a mail template; the audit row keeps the subject before and after. */
export function putTemplate(
  p: Basalt,
  actor: Actor,
  t: { name: string; subject: string; html: string | null; text: string | null },
): Promise<{ template: MailTemplate; created: boolean }> {
  return p.services.admin.audited(actor, 'templates.put', async (tx, note) => {
    const before = await templateStore(tx).get(t.name);
    const saved = await templateStore(tx).put(t);
    note(saved.name, {
      created: !before,
      subject: { before: before?.subject ?? null, after: saved.subject },
      html_chars: { before: before?.html?.length ?? 0, after: saved.html?.length ?? 0 },
      text_chars: { before: before?.text?.length ?? 0, after: saved.text?.length ?? 0 },
    });
    return { template: saved, created: !before };
  });
}

/** Delete a mail template; 404 when there is none of that name. */
export function deleteTemplate(p: Basalt, actor: Actor, name: string): Promise<void> {
  return p.services.admin.audited(actor, 'templates.delete', async (tx, note) => {
    const before = await templateStore(tx).get(name);
    if (!before || !(await templateStore(tx).delete(name)))
      throw AdminErrors.notFound(`The template '${String(name).slice(0, 100)}'`);
    note(name, { subject: { before: before.subject, after: null } });
  });
}

/** Queue a dead or cancelled job of an extension again (404 `job_not_found`, 409 `job_not_retryable`). */
export function retryJob(p: Basalt, actor: Actor, id: string): Promise<JobRow> {
  return p.services.admin.audited(actor, 'jobs.retry', async (tx, note) => {
    const job = await p.services.jobs.retry(id, tx);
    note(job.id, { extension: job.extension, name: job.name, kind: job.kind });
    return job;
  });
}

/** Cancel a queued job of an extension (404 `job_not_found`, 409 `job_not_cancellable`). */
export function cancelJob(p: Basalt, actor: Actor, id: string): Promise<JobRow> {
  return p.services.admin.audited(actor, 'jobs.cancel', async (tx, note) => {
    const job = await p.services.jobs.cancel(id, tx);
    note(job.id, { extension: job.extension, name: job.name, kind: job.kind });
    return job;
  });
}
