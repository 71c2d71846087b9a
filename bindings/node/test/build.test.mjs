// The addon is built against this Node's own headers and loads no second
// libuv: the core's uv_* calls resolve against the node executable.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { test } from 'node:test';

import maelys from '../lib/index.js';
import paths from '../lib/paths.js';
import { binding } from '../lib/binding.js';

function readelf(args) {
  return execFileSync('readelf', [...args, paths.addon], { encoding: 'utf8' });
}

test('the addon depends on no libuv: uv_* stay undefined, for node to resolve', () => {
  const dynamic = readelf(['--dynamic', '--wide']);
  const needed = [...dynamic.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
  assert.ok(needed.length > 0, 'readelf listed the NEEDED entries');
  assert.deepEqual(needed.filter((n) => /uv/.test(n)), [], `NEEDED: ${needed.join(', ')}`);
  const uvSymbols = readelf(['--dyn-syms', '--wide']).split('\n').filter((l) => /\suv_\w+$/.test(l));
  assert.ok(uvSymbols.length > 10, 'the core calls libuv through uv_* symbols');
  assert.deepEqual(uvSymbols.filter((l) => !/\sUND\s/.test(l)), [], 'no uv_* is defined in the addon');
});

test('the addon exports only its Node-API entry points', () => {
  const exported = readelf(['--dyn-syms', '--wide']).split('\n')
    .filter((l) => /\sGLOBAL\s+DEFAULT\s+\d+\s/.test(l))
    .map((l) => l.trim().split(/\s+/).pop())
    .sort();
  assert.deepEqual(exported, ['napi_register_module_v1', 'node_api_module_get_api_version_v1']);
});

test('this process maps no libuv library: the core runs on Node\'s libuv', () => {
  assert.equal(typeof maelys.Executor, 'function'); // the addon is loaded
  const maps = fs.readFileSync('/proc/self/maps', 'utf8');
  const libraries = new Set(maps.split('\n').map((l) => l.split(/\s+/)[5]).filter(Boolean));
  assert.ok([...libraries].some((l) => l.endsWith('maelys_executor.node')), 'the addon is mapped');
  assert.deepEqual([...libraries].filter((l) => /libuv/.test(l)), []);
});

test('uv_version_string() seen by the core equals process.versions.uv', () => {
  assert.equal(binding.info.uvVersion, process.versions.uv);
  assert.equal(maelys.versions.uv, process.versions.uv);
  // Compiled against the headers of that same libuv.
  assert.equal(binding.info.uvHeaderVersion, process.versions.uv);
});

test('Node-API version and ABI: stated, and the core loaded is the one compiled against', () => {
  assert.equal(maelys.versions.napi, 8);
  assert.ok(Number(process.versions.napi) >= maelys.versions.napi);
  // No ABI number is hard-coded here: the header's and the library's agree.
  assert.equal(binding.info.abiVersion, binding.info.headerAbiVersion);
  assert.equal(maelys.versions.abi, binding.info.headerAbiVersion);
  assert.match(maelys.versions.executor, /^\d+\.\d+\.\d+$/);
});
