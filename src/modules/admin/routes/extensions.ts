/** Extensions screen (docs/admin-api.md §Extensions): loaded and failed extensions, their routes and settings. */
import type { Basalt } from '../../../services';
import type { AdminApp, Ok } from '../area';
import { signedIn } from '../guard';
import { ConfigError } from '../../../config/validate';
import { AdminErrors } from '../errors';
import { Bodies } from '../model';
import { Responses, reply } from '../responses';
import type { ExtensionSettingView } from '../../../extensions/settings-store';

/** A setting of an extension as the panel shows it: a secret's value never, where a pinned one comes from. */
function settingView(s: ExtensionSettingView) {
  const pinned = s.source === 'env' || s.source === 'flag' || s.source === 'file';
  return {
    key: s.key,
    value: s.secret ? null : s.value,
    source: s.source === 'env' || s.source === 'flag' ? ('environment' as const) : s.source,
    pinned_by: pinned ? (s.origin ?? s.source) : null,
    secret: s.secret,
    description: s.description,
  };
}

function extensionView(p: Basalt, name: string) {
  const e = p.services.extensions.get(name);
  if (!e) throw AdminErrors.notFound(`The extension '${name.slice(0, 100)}'`);
  return e;
}

export function extensionsRoutes(app: AdminApp, p: Basalt, ok: Ok): AdminApp {
  return app
    .get(
      '/extensions',
      () =>
        ok({
          extensions: p.services.extensions.list().map((e) => ({
            name: e.name,
            version: e.version ?? null,
            description: e.description ?? null,
            state: e.status,
            error: e.error ?? null,
            routes: e.routes.map((r) => {
              const [method = '', ...path] = r.split(' ');
              return { method, path: path.join(' ') };
            }),
            settings: e.settings.map(settingView),
          })),
          // The absolute folder scanned at start (extensions.dir resolved): where a new one goes.
          dir: p.services.extensions.dir,
        }),
      { response: reply(Responses.extensions) },
    )
    .put(
      '/extensions/:name/settings/:key',
      async ({ params, body, admin }) => {
        const e = extensionView(p, params.name);
        const settings = p.services.extensions.settings(e.name);
        if (!settings)
          throw AdminErrors.invalidState(
            `The extension ${e.name} did not load; its settings cannot be changed until it does.`,
          );
        const current = e.settings.find((s) => s.key === params.key);
        if (!current)
          throw AdminErrors.notFound(`The setting '${String(params.key).slice(0, 100)}' of extension ${e.name}`);
        if (current.source === 'env' || current.source === 'file')
          throw AdminErrors.settingPinned(`ext.${e.name}.${current.key}`, current.origin ?? current.source);
        try {
          await p.services.admin.audited(signedIn(admin).actor, 'extensions.settings.set', async (tx, note) => {
            if (body.value === null) await settings.unset(current.key, tx);
            else await settings.set(current.key, body.value, tx);
            note(`${e.name}.${current.key}`, {
              before: current.secret ? '[redacted]' : current.value,
              after: current.secret ? '[redacted]' : body.value,
            });
          });
        } catch (err) {
          if (err instanceof ConfigError) throw AdminErrors.field(current.key, err.message.replace(/^settings: /, ''));
          throw err;
        }
        await p.services.extensions.store.load();
        const s = extensionView(p, e.name).settings.find((x) => x.key === current.key)!;
        return ok({ setting: settingView(s) });
      },
      { body: Bodies.value, response: reply(Responses.extensionSetting) },
    );
}
