// The TypeScript declarations compile against a typical use, and reject
// what the API rejects (test/types/usage.ts, @ts-expect-error lines).

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import maelys from '../lib/index.js';
import { nodeModules, packageDir } from './support/helpers.mjs';

test('lib/index.d.ts type-checks test/types/usage.ts (tsc --noEmit, strict)', () => {
  const tsc = path.join(nodeModules, 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(packageDir, 'test', 'types')], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
});

test('the declared CapabilityName union is exactly the core\'s capability names, in order', () => {
  const declarations = fs.readFileSync(path.join(packageDir, 'lib', 'index.d.ts'), 'utf8');
  const union = /export type CapabilityName =([^;]*);/.exec(declarations);
  assert.ok(union, 'index.d.ts declares CapabilityName');
  const declared = [...union[1].matchAll(/'([a-z0-9_]+)'/g)].map((m) => m[1]);
  assert.deepEqual(declared, [...maelys.capabilityNames]);
});
