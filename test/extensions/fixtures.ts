/** Fixture extensions, as source text written into temp extension dirs by the loader tests. */

/** A working extension: a migration, a setting, db access, guards, both envelopes' helpers. */
export const GOOD = `
import { defineExtension, t } from 'basalt';
export default defineExtension({
  name: 'notes',
  version: '2.1.0',
  settings: {
    greeting: { kind: 'string', default: 'Hello', description: 'Greeting word.' },
    max_notes: { kind: 'int', default: 10, min: 1, max: 100, description: 'Cap.' },
  },
  setup(ctx) {
    ctx.routes
      .get('/greet/:who', ({ params, request }) => ctx.reply(request, { text: ctx.settings.get('greeting') + ', ' + params.who }), {
        params: t.Object({ who: t.String({ maxLength: 20 }) }),
        response: { 200: ctx.schemas.envelope(t.Object({ text: t.String() })) },
        detail: { tags: ['notes'], summary: 'Greet' },
      })
      .post('/notes', async ({ body, request, set }) => {
        const { rows } = await ctx.db.query('INSERT INTO ' + ctx.db.table('notes') + ' (body) VALUES ($1) RETURNING id, body', [body.body]);
        set.status = 201;
        return ctx.reply(request, rows[0]);
      }, {
        body: t.Object({ body: t.String({ minLength: 1 }) }),
        beforeHandle: ctx.requireApiKey('db:query'),
        detail: { tags: ['notes'], summary: 'Add a note' },
      })
      .get('/me', async ({ request }) => ctx.reply(request, { email: (await ctx.user(request)).email }), {
        beforeHandle: ctx.requireUser(),
        detail: { tags: ['notes'], summary: 'Who am I' },
      })
      .get('/boom', () => { throw new Error('internal detail that must not leak'); }, { detail: { tags: ['notes'], summary: 'Fails' } });
  },
});
`;

export const GOOD_MIGRATION = `CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL);`;

export const IMPORT_THROWS = `throw new Error('broken at import');`;

export const SETUP_THROWS = `
import { defineExtension } from 'basalt';
export default defineExtension({ name: 'setup-fails', version: '1.0.0', setup() { throw new Error('broken in setup'); } });
`;

export const NOT_AN_EXTENSION = `export default { hello: 'world' };`;

export const named = (name: string, route = '/ping') => `
import { defineExtension } from 'basalt';
export default defineExtension({ name: '${name}', version: '1.0.0', setup(ctx) { ctx.routes.get('${route}', ({ request }) => ctx.reply(request, { from: '${name}' })); } });
`;

/** Claims the Files prefix (as media-library does); its shutdown hook leaves a `stopped` file in its data dir. */
export const claimsFiles = (name: string) => `
import { defineExtension } from 'basalt';
import { writeFileSync } from 'node:fs';
export default defineExtension({ name: '${name}', version: '1.0.0', setup(ctx) {
  ctx.onShutdown(() => writeFileSync(ctx.dataDir() + '/stopped', 'yes'));
  ctx.claim('/api/v1/files').get('/', ({ request }) => ctx.reply(request, { from: '${name}' }));
} });
`;

/** A setup that never finishes (start-up must not wait for it). */
export const SETUP_HANGS = `
import { defineExtension } from 'basalt';
export default defineExtension({ name: 'hangs', version: '1.0.0', setup: () => new Promise(() => {}) });
`;

/** A second statement that fails: the file's first table must not be left behind. */
export const BAD_MIGRATION = `CREATE TABLE half_done (id int);\nSELECT no_such_function();`;

/** Reads an application table through `ctx.db.dataSchema` (database.data_schema). */
export const DATA_READER = `
import { defineExtension, t } from 'basalt';
export default defineExtension({
  name: 'data-reader',
  version: '1.0.0',
  setup(ctx) {
    const widgets = '"' + ctx.db.dataSchema.replaceAll('"', '""') + '".loader_widgets';
    ctx.routes.get('/widgets', async ({ request }) => {
      const { rows } = await ctx.db.query('SELECT name FROM ' + widgets + ' WHERE id > $1 ORDER BY id', [0]);
      return ctx.reply(request, { schema: ctx.db.dataSchema, names: rows.map((r) => r.name) });
    }, { detail: { tags: ['data-reader'], summary: 'Widgets' } });
  },
});
`;
