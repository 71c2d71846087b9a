// The README's Node example is examples/readme.mjs, word for word, and it
// runs.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { needBubblewrap, packageDir, privateStateHome, runNode } from './support/helpers.mjs';

// The example's spawnIsolated() makes maelys-warden's signing key here.
const STATE_DIR = privateStateHome();

const EXAMPLE = path.join(packageDir, 'examples', 'readme.mjs');
const README = path.resolve(packageDir, '..', '..', 'README.md');

test('the README shows examples/readme.mjs exactly', () => {
  const readme = fs.readFileSync(README, 'utf8');
  const marker = '<!-- example: bindings/node/examples/readme.mjs';
  const at = readme.indexOf(marker);
  assert.ok(at >= 0, 'the README marks the example');
  const block = readme.slice(at).match(/```js\n([\s\S]*?)```/);
  assert.ok(block, 'a js block follows the marker');
  assert.equal(block[1], fs.readFileSync(EXAMPLE, 'utf8'));
});

test('the README example runs', async (t) => {
  if (!needBubblewrap(t)) return;
  const r = await runNode([EXAMPLE]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.split('\n')[0], 'hello from the sandbox');
  assert.match(r.stdout, /\{ exitCode: 0, signal: null, stopStage: null \}\nsha256:[0-9a-f]{64}\n/);
  assert.match(r.stdout, /hello over fd 3\n\{ exitCode: 0, signal: null \}\nbubblewrap\n$/);
  assert.ok(fs.existsSync(path.join(STATE_DIR, 'receipt-signing.key')), 'the CLI signed with the key of its state directory');
});
