/**
 * Where a relative `extensions.dir` is taken from: the working directory from a
 * checkout, the executable's own directory when compiled; an absolute one as is.
 * (test/extensions/binary-extension.test.ts proves the compiled case end to end.)
 */
import { describe, expect, test } from 'bun:test';
import { resolve } from 'node:path';
import { isCompiled, resolveExtensionsDir } from '../../src/extensions/dir';

describe('resolveExtensionsDir', () => {
  test.each([
    ['relative, from a checkout: the working directory', './extensions', false, resolve('extensions')],
    ['relative, compiled: beside the executable', './extensions', true, '/opt/basalt/extensions'],
    ['relative with .., compiled', '../shared/ext', true, '/opt/shared/ext'],
    ['absolute, compiled: as is', '/srv/ext', true, '/srv/ext'],
    ['absolute, from a checkout: as is', '/srv/ext', false, '/srv/ext'],
  ] as const)('%s', (_name, setting, compiled, expected) => {
    expect(resolveExtensionsDir(setting, compiled, '/opt/basalt/basalt')).toBe(expected);
  });

  test('compiled mode is recognised by the embedded file system path, and this test run is not compiled', () => {
    expect(isCompiled('/$bunfs/root/basalt')).toBe(true);
    expect(isCompiled('B:\\~BUN\\root\\basalt.exe')).toBe(true);
    expect(isCompiled('/work/main/src/extensions/dir.ts')).toBe(false);
    expect(isCompiled()).toBe(false);
  });
});
