/**
 * A row's relations in the Data screen's row dialog, in Chromium on each engine: the related
 * row of each many-to-one key by its label, the children of each one-to-many relation counted
 * (bounded: "100+") and linked to their table filtered by this row, all from one select with
 * `expand`; a link within the same table shows its rows too. Screenshots at both widths and
 * themes (on the first engine).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { HAS_CHROMIUM, launchBrowser } from '../helpers/browser';
import { ENGINES } from '../helpers/engines';
import type { TestServer } from '../helpers/server';
import { signInAdmin } from '../helpers/admin';
import { startAdminServer } from '../admin/support';
import { eventually } from '../helpers/wait';
import { adminPage, shotsEveryWay, watch } from './support';

const SCHEMA = `
CREATE TABLE authors (
  id serial PRIMARY KEY,
  name text NOT NULL,
  mentor_id integer REFERENCES authors (id)
);
INSERT INTO authors (name, mentor_id) VALUES ('Ann', NULL), ('Bo', 1);
CREATE TABLE posts (
  id serial PRIMARY KEY,
  title text NOT NULL,
  author_id integer NOT NULL REFERENCES authors (id),
  editor_id integer REFERENCES authors (id)
);
INSERT INTO posts (title, author_id, editor_id) VALUES ('Hello', 1, NULL), ('Busy', 2, 1), ('Quiet', 2, 2);
CREATE TABLE comments (
  id serial PRIMARY KEY,
  post_id integer NOT NULL REFERENCES posts (id),
  body text NOT NULL
);
INSERT INTO comments (post_id, body) SELECT 1, 'comment ' || g FROM generate_series(1, 12) g;
INSERT INTO comments (post_id, body) SELECT 2, 'comment ' || g FROM generate_series(1, 150) g;
`;

describe.skipIf(!HAS_CHROMIUM).each(ENGINES)("a row's relations in the panel on %s", (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'basalt-panel-relations-'));
    writeFileSync(join(dir, '001_blog.sql'), SCHEMA);
    s = await startAdminServer(engine, { env: { BASALT_MIGRATIONS_DIR: dir } });
  }, 180_000);
  afterAll(async () => {
    await s?.stop();
  });

  test('links to the related rows and counts of children, from one request per row', async () => {
    const a = await signInAdmin(s);
    const browser = await launchBrowser();
    try {
      const page = await adminPage(browser, s.url, a);
      const problems = watch(page, () => false);
      /** The selects that carry `expand`, as the panel sends them. */
      const expands: { path: string; body: any }[] = [];
      page.on('request', (r) => {
        const body = r.postData();
        if (r.method() === 'POST' && r.url().endsWith('/select') && body?.includes('"expand"'))
          expands.push({ path: new URL(r.url()).pathname, body: JSON.parse(body) });
      });
      const dialog = page.getByRole('dialog');
      const relations = dialog.getByRole('region', { name: 'Relations' });
      const open = async (table: string, row: number) => {
        // A dialog left open is closed first: the address may be the one already shown.
        if (await dialog.count()) {
          await dialog.getByRole('button', { name: 'Cancel' }).click();
          await dialog.waitFor({ state: 'detached' });
        }
        await page.goto(`${s.url}/_/#/data/${table}`);
        await page.getByRole('button', { name: `Edit row ${row}`, exact: true }).click();
        await relations.waitFor();
      };

      // A post: its author by name, no editor, its 12 comments.
      await open('posts', 1);
      await relations.getByRole('link', { name: 'Ann' }).waitFor();
      await relations.getByRole('link', { name: '12 rows' }).waitFor();
      expect(await itemText(relations, 'editor_id')).toBe('null');
      expect(await itemText(relations, 'author_id')).toBe('Ann in authors (id = 1)');
      expect(await itemText(relations, 'comments_via_post_id')).toBe('12 rows in comments by post_id');
      // One request for all of them: the row by its key, each relation expanded.
      expect(expands).toEqual([
        {
          path: '/api/admin/data/posts/select',
          body: {
            filters: [{ field: 'id', op: 'eq', value: 1 }],
            limit: 1,
            expand: {
              author_id: { fields: ['id', 'name'] },
              editor_id: { fields: ['id', 'name'] },
              comments_via_post_id: { fields: ['post_id'], limit: 100 },
            },
          },
        },
      ]);
      if (engine === ENGINES[0]) await shotsEveryWay(page, 'data-relations');

      // The children's link: their table, filtered by this post.
      await relations.getByRole('link', { name: '12 rows' }).click();
      await dialog.waitFor({ state: 'detached' });
      await page.getByRole('region', { name: 'Table comments' }).waitFor();
      await page.getByTestId('pager-info').getByText('Rows 1–12 of 12').waitFor();
      expect(decodeURIComponent(new URL(page.url()).hash)).toBe(
        '#/data/comments?f=[{"field":"post_id","op":"eq","value":1}]',
      );
      expect(await page.getByRole('combobox', { name: 'Filter 1 column' }).inputValue()).toBe('post_id');

      // A comment: its post, named by its title.
      await page
        .getByRole('button', { name: /^Edit row \d+$/ })
        .first()
        .click();
      await relations.getByRole('link', { name: 'Hello' }).waitFor();

      // Many children are counted up to a bound.
      await open('posts', 2);
      await relations.getByRole('link', { name: '100+ rows' }).waitFor();
      await open('posts', 3);
      expect(await itemText(relations, 'comments_via_post_id')).toBe('no rows in comments by post_id');

      // A key within the same table (a mentor): the link shows that row of this very table.
      await open('authors', 2);
      expect(await itemText(relations, 'posts_via_author_id')).toBe('2 rows in posts by author_id');
      expect(await itemText(relations, 'authors_via_mentor_id')).toBe('no rows in authors by mentor_id');
      await relations.getByRole('link', { name: 'Ann' }).click();
      await dialog.waitFor({ state: 'detached' });
      await page.getByTestId('pager-info').getByText('Rows 1–1 of 1').waitFor();
      await page.getByText('1 filter applied').waitFor();
      await page.getByRole('button', { name: 'Edit row 1', exact: true }).click();
      expect(await itemText(relations, 'authors_via_mentor_id')).toBe('1 row in authors by mentor_id');
      expect(await itemText(relations, 'mentor_id')).toBe('null');
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 180_000);
});

/** The text of a relation's entry (its `dd`) once its answer is in, spaces collapsed. */
async function itemText(relations: ReturnType<Page['getByRole']>, name: string): Promise<string> {
  const dd = relations.locator('dt', { hasText: new RegExp(`^${name}$`) }).locator('xpath=following-sibling::dd[1]');
  const text = await eventually(async () => {
    const t = ((await dd.textContent()) ?? '').replace(/\s+/g, ' ').trim();
    return t !== '…' && t;
  });
  return String(text);
}
