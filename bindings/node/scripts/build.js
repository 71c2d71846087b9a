#!/usr/bin/env node
'use strict';
// Builds the addon, the bubblewrap helper and maelys-warden with the
// repository's CMake project, against the headers of the Node running this
// script. Nothing is downloaded: the headers are that Node's own
// (<prefix>/include/node, or npm's `nodedir` setting when one is given),
// passed to CMake explicitly, and the build checks that their libuv is the
// one this Node bundles.
//
// Environment: MAELYS_EXECUTOR_WERROR=1 turns warnings into errors (CI);
// MAELYS_NODE_BUILD_TYPE overrides the CMake build type (RelWithDebInfo).

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const pkg = path.resolve(__dirname, '..');
const repo = path.resolve(pkg, '..', '..');
const build = path.join(pkg, 'build');

function fail(message) {
  process.stderr.write(`@maelys/executor build: ${message}\n`);
  process.exit(1);
}

function headerDir() {
  // npm passes its configuration to lifecycle scripts as npm_config_*.
  const nodedir = process.env.npm_config_nodedir;
  const prefix = nodedir || path.resolve(path.dirname(process.execPath), '..');
  const dir = path.join(prefix, 'include', 'node');
  for (const header of ['node_api.h', 'uv.h', path.join('uv', 'version.h')]) {
    if (!fs.existsSync(path.join(dir, header))) {
      fail(
        `${path.join(dir, header)} does not exist: the addon is built ` +
          `against the headers of the Node that runs it (${process.execPath}); ` +
          `install them, or set npm's nodedir to that Node's prefix`,
      );
    }
  }
  return dir;
}

function run(argv) {
  const r = spawnSync(argv[0], argv.slice(1), { stdio: 'inherit' });
  if (r.error) fail(`${argv[0]}: ${r.error.message}`);
  if (r.status !== 0) fail(`${argv.join(' ')} exited with status ${r.status}`);
}

if (!fs.existsSync(path.join(repo, 'CMakeLists.txt')) ||
    !fs.existsSync(path.join(repo, 'include', 'maelys', 'executor.h'))) {
  fail(`${repo} is not a Maelys Executor checkout: the package builds the ` +
       'core from the repository it lives in');
}

// A build directory configured for another source tree (this package was
// copied or moved, as CI's unprivileged copy is) cannot be reused by CMake.
const cache = path.join(build, 'CMakeCache.txt');
if (fs.existsSync(cache)) {
  const home = /^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$/m.exec(fs.readFileSync(cache, 'utf8'));
  if (!home || path.resolve(home[1]) !== repo) fs.rmSync(build, { recursive: true, force: true });
}

const include = headerDir();
run([
  'cmake', '-S', repo, '-B', build,
  '-DMAELYS_EXECUTOR_NODE=ON',
  '-DMAELYS_EXECUTOR_TESTS=OFF',
  `-DMAELYS_NODE_INCLUDE_DIR=${include}`,
  `-DMAELYS_NODE_UV_VERSION=${process.versions.uv}`,
  `-DCMAKE_BUILD_TYPE=${process.env.MAELYS_NODE_BUILD_TYPE || 'RelWithDebInfo'}`,
  `-DMAELYS_EXECUTOR_WERROR=${process.env.MAELYS_EXECUTOR_WERROR === '1' ? 'ON' : 'OFF'}`,
]);
const jobs = String(Math.max(1, Math.min(os.availableParallelism?.() ?? 2, 4)));
run([
  'cmake', '--build', build, '-j', jobs, '--target',
  'maelys_executor_node', 'maelys-executor-helper', 'maelys-warden',
]);
