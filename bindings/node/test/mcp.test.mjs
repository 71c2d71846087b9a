// The official MCP TypeScript SDK's client against real MCP servers under
// bubblewrap:
//
// - the stock stdio server @modelcontextprotocol/server-filesystem through
//   the addon, its stdin and stdout one socket (io 'duplex-stdio');
// - a server written with the same SDK, its transport bound to fd 3,
//   through spawnIsolated() (maelys-warden run --io isolated).
//
// Each: list the tools, read an allowed file, be refused a file outside
// the workspace *by the sandbox* (both servers allow the whole filesystem),
// stop, and leave nothing running.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';

import {
  Executor, NODE, collect, fixtures, marker, needBubblewrap, nodeModules, packageDir,
  privateStateHome, sandboxPlan, spawnIsolated, tempDir, waitGone,
} from './support/helpers.mjs';
import { StreamTransport } from './support/stream-transport.mjs';

// spawnIsolated()'s default --state-dir (maelys-warden's signing key).
privateStateHome();

const FILESYSTEM_SERVER = path.join(nodeModules, '@modelcontextprotocol', 'server-filesystem', 'dist', 'index.js');
const FD3_SERVER = path.join(fixtures, 'fd3-server.mjs');

// A workspace with one file, and files outside it that this process can
// read: one in a directory of its own, one in this package. Whatever the
// server fails to read there, the sandbox refused.
function files() {
  const workspace = tempDir('mcp-ws');
  const allowed = path.join(workspace, 'notes.txt');
  fs.writeFileSync(allowed, 'inside the workspace\n');
  const elsewhere = tempDir('mcp-outside');
  const secret = path.join(elsewhere, 'secret.txt');
  fs.writeFileSync(secret, 'outside-secret\n');
  const outside = [secret, path.join(packageDir, 'package.json')];
  for (const file of outside) assert.ok(fs.readFileSync(file, 'utf8').length > 0, `${file} is readable here`);
  return { workspace, allowed, outside, cleanup: () => {
    fs.rmSync(workspace, { recursive: true, force: true });
    fs.rmSync(elsewhere, { recursive: true, force: true });
  } };
}

function text(result) {
  return result.content.map((c) => c.text).join('');
}

async function connect(stream) {
  const client = new Client({ name: 'maelys-node-tests', version: '1.0.0' });
  await client.connect(new StreamTransport(stream));
  return client;
}

test('server-filesystem (stdio) through the addon, under bubblewrap', async (t) => {
  if (!needBubblewrap(t)) return;
  const { workspace, allowed, outside, cleanup } = files();
  const token = marker('mcp-fs');
  const ex = new Executor({ backends: ['bubblewrap'] });
  const execution = await ex.spawn(
    sandboxPlan({ workspace, reads: [nodeModules] }),
    {
      executable: NODE,
      // The server is told to allow the whole filesystem. The token (for
      // finding its process) is one more directory it skips: it does not
      // exist.
      argv: ['node', FILESYSTEM_SERVER, '/', token],
      cwd: workspace,
      backend: 'bubblewrap',
      io: 'duplex-stdio',
      stderr: 'capture',
    },
  );
  const serverLog = collect(execution.stderr);
  const client = await connect(execution.protocol);

  const tools = (await client.listTools()).tools.map((tool) => tool.name);
  assert.ok(tools.includes('read_text_file'), tools.join(' '));
  assert.match(text(await client.callTool({ name: 'list_allowed_directories', arguments: {} })), /^Allowed directories:\n\/$/);

  const read = await client.callTool({ name: 'read_text_file', arguments: { path: allowed } });
  assert.ok(!read.isError, text(read));
  assert.equal(text(read), 'inside the workspace\n');

  for (const file of outside) {
    const refused = await client.callTool({ name: 'read_text_file', arguments: { path: file } });
    assert.equal(refused.isError, true, `${file}: ${text(refused)}`);
    assert.match(text(refused), /ENOENT/);
    assert.doesNotMatch(text(refused), /outside-secret|"name"/);
  }

  assert.equal(await execution.stop(), 'graceful');
  assert.equal((await execution.wait()).signal, 'SIGTERM');
  await client.close();
  assert.match(await serverLog, /Secure MCP Filesystem Server running on stdio/);
  execution.release();
  ex.close();
  assert.deepEqual(await waitGone(token), []);
  cleanup();
});

test('an SDK server on fd 3 through spawnIsolated() (maelys-warden --io isolated)', async (t) => {
  if (!needBubblewrap(t)) return;
  const { workspace, allowed, outside, cleanup } = files();
  const token = marker('mcp-fd3');
  // A plan object: the policy is written to a private file for --plan.
  const run = spawnIsolated([NODE, FD3_SERVER, token], {
    policy: sandboxPlan({ workspace, reads: [nodeModules, fixtures] }),
    workspace,
    graceMs: 1500,
  });
  const log = collect(run.stderr);
  const client = await connect(run.protocol);

  const tools = (await client.listTools()).tools.map((tool) => tool.name);
  assert.deepEqual(tools.sort(), ['describe_process', 'read_file']);

  const read = await client.callTool({ name: 'read_file', arguments: { path: allowed } });
  assert.ok(!read.isError, text(read));
  assert.equal(text(read), 'inside the workspace\n');

  for (const file of outside) {
    const refused = await client.callTool({ name: 'read_file', arguments: { path: file } });
    assert.equal(refused.isError, true, `${file}: ${text(refused)}`);
    assert.match(text(refused), /ENOENT/);
  }

  // The fd-3 layout: stdin /dev/null, the protocol on 3, an environment with
  // nothing of this process's.
  const described = JSON.parse(text(await client.callTool({ name: 'describe_process', arguments: {} })));
  assert.equal(described.cwd, workspace);
  assert.ok(described.fds.includes(3));
  for (const name of Object.keys(process.env)) {
    if (!['PATH', 'HOME', 'TMPDIR', 'LANG'].includes(name)) assert.ok(!(name in described.env), name);
  }

  const result = await run.stop();
  assert.equal(result, await run.stop(), 'stop() is idempotent');
  assert.equal(result, await run.wait());
  // The CLI reports the payload's death by SIGTERM as 128 + 15.
  assert.deepEqual(result, { exitCode: 143, signal: null });
  await client.close();
  assert.match(await log, /fd3 server: listening on fd 3/);
  assert.equal(run.receipt.backend.name, 'bubblewrap');
  assert.equal(run.receipt.stop.ended_by, 'graceful');
  assert.deepEqual(await waitGone(token), []);
  cleanup();
});
