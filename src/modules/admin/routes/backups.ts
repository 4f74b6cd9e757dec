/**
 * Backups screen (docs/admin-api.md §Backups, docs/backup.md), through the backup
 * service. On an external database every route answers 409 `not_supported`: backups of
 * a server the platform does not own are pg_dump's, the provider's snapshots or PITR.
 */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import { signedIn } from '../guard';
import { writeAudit } from '../audit';
import { AdminErrors } from '../errors';
import { Responses, reply, replyCreated } from '../responses';
import { BackupError, backupService, NOT_SUPPORTED_MESSAGE, type CreatedBackup } from '../../backup/service';
import { checkWalChain, chooseBase, PitrError, pitrBases, restorableWindow } from '../../backup/pitr';
import { walArchiveDir } from '../../backup/wal-archive';
import { readRestoreRequest, writeRestoreRequest } from '../../backup/restore-request';
import { Bodies } from '../model';

function mapped(e: unknown, name?: string): never {
  if (e instanceof BackupError) {
    if (e.code === 'not_supported') throw AdminErrors.notSupported(e.message);
    throw AdminErrors.notFound(`The backup '${String(name ?? '').slice(0, 100)}'`);
  }
  throw e;
}

export function backupsRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  const backups = () => backupService(p);
  return app
    .get(
      '/backups',
      async () => {
        try {
          const list = await backups().list();
          return ok({
            backups: list,
            dir: backups().dir,
            pitr: {
              window: await restorableWindow(backups().dir, walArchiveDir(p.dataDir)),
              pending: readRestoreRequest(p.dataDir) ?? null,
            },
          });
        } catch (e) {
          mapped(e);
        }
      },
      { response: reply(Responses.backups) },
    )
    .post(
      '/backups',
      async ({ request, set, server, admin }) => {
        const { actor } = signedIn(admin);
        // A large site's backup can take longer than the listener's idle timeout (60 s): no timeout for this request.
        server?.timeout?.(request, 0);
        let b: CreatedBackup;
        try {
          b = await backups().create({ trigger: 'admin' });
        } catch (e) {
          mapped(e);
        }
        // Written after the backup: on the embedded engine a transaction around it would hold the database it copies.
        await writeAudit(p.db, actor, 'backups.create', b.name, { size: b.size, files: b.files, held_ms: b.held_ms });
        set.status = 201;
        const { row_counts: _counts, ...backup } = b;
        return ok({ backup });
      },
      { response: replyCreated(Responses.backup) },
    )
    .post(
      '/backups/restore',
      async ({ body, admin }) => {
        const { actor } = signedIn(admin);
        if (!backups().supported) mapped(new BackupError('not_supported', NOT_SUPPORTED_MESSAGE));
        // The same checks `basalt restore --to` makes before it changes anything: a base backup
        // before the moment, and the WAL archive whole up to it.
        let target: Date | 'latest';
        if (body.to === 'latest') target = 'latest';
        else {
          target = new Date(body.to);
          if (!/(Z|[+-]\d\d:?\d\d)$/i.test(body.to) || Number.isNaN(target.getTime()))
            throw AdminErrors.field('to', "a time with its zone (2026-12-01T10:00:00Z), or 'latest'");
          if (target.getTime() > Date.now()) throw AdminErrors.field('to', 'a moment in the past');
        }
        try {
          const base = chooseBase(await pitrBases(backups().dir), target);
          checkWalChain(walArchiveDir(p.dataDir), base.manifest.wal, target, { serving: true });
        } catch (e) {
          if (e instanceof PitrError) throw AdminErrors.conflict(`Cannot restore to ${body.to}: ${e.message}.`);
          throw e;
        }
        const request = {
          to: target === 'latest' ? 'latest' : target.toISOString(),
          requested_by: actor.email ?? 'an administrator',
          requested_at: new Date().toISOString(),
        };
        writeRestoreRequest(p.dataDir, request);
        await writeAudit(p.db, actor, 'backups.restore_requested', request.to);
        return ok(request);
      },
      { body: Bodies.restoreTo, response: reply(Responses.restoreRequested) },
    )
    .get('/backups/:name/download', ({ params }) => {
      let path: string;
      try {
        path = backups().pathFor(params.name);
      } catch (e) {
        mapped(e, params.name);
      }
      return new Response(Bun.file(path), {
        headers: {
          'content-type': 'application/gzip',
          'content-disposition': `attachment; filename="${params.name}"`,
          'cache-control': 'no-store',
        },
      });
    })
    .delete(
      '/backups/:name',
      async ({ params, admin }) => {
        const { actor } = signedIn(admin);
        try {
          await backups().delete(params.name);
        } catch (e) {
          mapped(e, params.name);
        }
        await writeAudit(p.db, actor, 'backups.delete', params.name);
        return ok({});
      },
      { response: reply(Responses.empty) },
    );
}
