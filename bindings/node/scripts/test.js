#!/usr/bin/env node
'use strict';
// The suite: every test/*.test.mjs under `node --test`, one file at a time
// (the loop test measures stalls of this process's loop, which a sibling
// file's sandboxes would blur).

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const dir = path.resolve(__dirname, '..', 'test');
const only = process.argv.slice(2);
const files = fs.readdirSync(dir)
  .filter((f) => f.endsWith('.test.mjs'))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort()
  .map((f) => path.join(dir, f));
if (files.length === 0) {
  process.stderr.write(`no test file matches ${only.join(' ')}\n`);
  process.exit(1);
}
// --test-concurrency exists from Node 20.10; older runners take one file
// at a time only on one core.
const [major, minor] = process.versions.node.split('.').map(Number);
const concurrency = major > 20 || (major === 20 && minor >= 10) ? ['--test-concurrency=1'] : [];
const r = spawnSync(process.execPath, [
  '--test', ...concurrency, '--test-reporter=spec', ...files,
], { stdio: 'inherit', cwd: path.resolve(__dirname, '..') });
process.exit(r.status ?? 1);
