/**
 * `basalt templates …` and `basalt mail test` as an operator runs them: the executable's
 * command line against the executable (scripts/test.ts, test/helpers/cli.ts).
 */
import { describe, expect, test } from 'bun:test';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES, type FreshDb } from '../helpers/engines';
import { runCli } from '../helpers/cli';
import type { SmtpSink } from '../helpers/smtp-sink';
import { FROM, sinkAndDb } from './helpers';

describe.each(ENGINES)('mail CLI on %s', (engine) => {
  let db: FreshDb;
  let sink: SmtpSink;
  const dir = mkdtempSync(join(tmpdir(), 'basalt-tpl-'));
  const file = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  const cli = (...args: string[]) =>
    runCli(args, { ...db.env, BASALT_MAIL_SMTP_URL: sink.url, BASALT_MAIL_FROM: FROM });

  sinkAndDb(engine, (d, k) => {
    db = d;
    sink = k;
  });

  test('put creates then updates; list shows it beside the defaults', async () => {
    const html = file('promo.html', '<h1>Hi {{ name }}</h1>');
    const text = file('promo.txt', 'Hi {{ name }}');
    const created = await cli(
      'templates',
      'put',
      'promo',
      '--subject',
      'Offer for {{ name }}',
      '--html',
      html,
      '--text',
      text,
    );
    expect(created).toMatchObject({ code: 0, stdout: 'template promo created\n' });
    const updated = await cli('templates', 'put', 'promo', '--subject', 'New offer for {{ name }}', '--text', text);
    expect(updated).toMatchObject({ code: 0, stdout: 'template promo updated\n' });
    const list = await cli('templates', 'list');
    expect(list.code).toBe(0);
    const names = list.stdout
      .trim()
      .split('\n')
      .map((l) => l.split(/\s+/)[0]);
    expect(names).toEqual(['auth.otp', 'password_reset', 'promo', 'verify_email']);
    expect(list.stdout).toContain('New offer for {{ name }}');
  }, 60_000);

  test('bad input: one clear line and a non-zero exit', async () => {
    const cases: { args: string[]; code: number; err: RegExp }[] = [
      { args: ['templates', 'put', 'x', '--text', file('a.txt', 'a')], code: 2, err: /needs --subject/ },
      {
        args: ['templates', 'put', 'x', '--subject', 's', '--text', file('b.txt', '{% if a %}never closed')],
        code: 1,
        err: /does not parse/,
      },
    ];
    for (const c of cases) {
      const r = await cli(...c.args);
      expect({ args: c.args.join(' '), code: r.code }).toEqual({ args: c.args.join(' '), code: c.code });
      expect(r.stderr).toMatch(c.err);
    }
  }, 60_000);

  test('mail test sends through the configured server; delete removes a template', async () => {
    const r = await cli('mail', 'test', 'ops@example.com');
    expect(r.code).toBe(0);
    // The test mail itself (its Message-ID is on stdout), not whatever arrives first.
    const [m] = await sink.waitFor(1, 10_000, (x) => x.messageId !== '' && r.stdout.includes(x.messageId));
    expect(m).toMatchObject({ from: FROM, to: ['ops@example.com'] });
    expect((await cli('templates', 'delete', 'promo')).stdout).toBe('template promo deleted\n');
  }, 60_000);
});
