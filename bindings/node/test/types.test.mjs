// The TypeScript declarations compile against a typical use, and reject
// what the API rejects (test/types/usage.ts, @ts-expect-error lines).

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';

import { nodeModules, packageDir } from './support/helpers.mjs';

test('lib/index.d.ts type-checks test/types/usage.ts (tsc --noEmit, strict)', () => {
  const tsc = path.join(nodeModules, 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(packageDir, 'test', 'types')], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
});
