// spawnIsolated(): maelys-warden run --io isolated over plain pipes, with
// private control, workspace and temp directories, the launcher's TMPDIR,
// an empty child environment and receipts outside the sandbox-writable
// root; wait() and stop() idempotent; nothing left behind.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import paths from '../lib/paths.js';
import {
  NODE, collect, fixtures, marker, needBubblewrap, privateStateHome, runNode, sandboxPlan,
  spawnIsolated, survivors, tempDir, waitGone,
} from './support/helpers.mjs';

// spawnIsolated()'s default --state-dir: maelys-warden's signing key.
const STATE_DIR = privateStateHome();

// A payload that answers on its fd 3 with what it sees, and tries to write
// in its working directory.
const PROBE = `
const fs = require('fs');
let wrote = false;
try { fs.writeFileSync('written.txt', 'x'); wrote = true; } catch {}
fs.writeSync(3, JSON.stringify({ env: process.env, cwd: process.cwd(), wrote }) + '\\n');
`;

function procArgv(pid) {
  return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1);
}

function procEnv(pid) {
  return fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean);
}

function within(file, dir) {
  const rel = path.relative(dir, file);
  return !rel.startsWith('..') && !path.isAbsolute(rel);
}

function argAfter(argv, option) {
  const i = argv.indexOf(option);
  return i < 0 ? undefined : argv[i + 1];
}

function listing(dir) {
  return fs.readdirSync(dir).sort();
}

const READY = "require('fs').writeSync(3, 'ready\\n'); setInterval(() => {}, 1000)";

test('the launcher: --io isolated named, private directories, TMPDIR, nothing else', async (t) => {
  if (!needBubblewrap(t)) return;
  const token = marker('iso-layout');
  const run = spawnIsolated([NODE, '-e', READY, token], { policy: 'ro', graceMs: 500 });
  const err = collect(run.stderr);
  await new Promise((resolve) => run.protocol.once('data', resolve));

  // The warden runs under setpriv, which execs it: the same pid.
  const argv = procArgv(run.pid);
  assert.match(argv[0], /maelys-warden$/);
  assert.equal(argv[1], 'run');
  assert.equal(argAfter(argv, '--io'), 'isolated', 'the io mode is named explicitly');
  assert.equal(argAfter(argv, '--grace'), '500ms');
  assert.ok(argv.includes('--ro'));
  assert.ok(!argv.includes('--pass-env') && !argv.includes('--env'), 'no environment is passed on');

  // The launcher's environment: its private TMPDIR, nothing else.
  const env = procEnv(run.pid);
  assert.equal(env.length, 1, env.join(' '));
  const temp = env[0].replace(/^TMPDIR=/, '');
  const receipts = argAfter(argv, '--receipt-dir');
  const control = path.dirname(receipts);
  const workspace = argAfter(argv, '--workspace');
  assert.equal(workspace, run.workspace);
  for (const dir of [temp, control, workspace]) {
    const st = fs.lstatSync(dir);
    assert.ok(st.isDirectory(), dir);
    assert.equal(st.mode & 0o777, 0o700, `${dir} is private`);
    assert.equal(st.uid, process.getuid());
  }
  assert.equal(new Set([temp, control, workspace]).size, 3, 'three separate locations');
  assert.ok(!receipts.startsWith(workspace + path.sep), 'receipts are outside the workspace');
  assert.equal(argAfter(argv, '--state-dir'), STATE_DIR, "the CLI's own default, made explicit");

  const first = run.stop();
  assert.equal(run.stop(), first, 'stop() returns the same promise');
  const result = await first;
  assert.equal(result, await run.wait());
  assert.equal(result, await run.wait(), 'the same object every time');
  assert.deepEqual(result, { exitCode: 128 + os.constants.signals.SIGTERM, signal: null });
  assert.equal(run.receipt.stop.requested, true);
  assert.equal(run.receipt.signature.algorithm, 'ed25519', 'signed with the per-user key');
  assert.equal(fs.statSync(path.join(STATE_DIR, 'receipt-signing.key')).mode & 0o777, 0o600);
  await err;
  for (const dir of [temp, control, workspace]) assert.ok(!fs.existsSync(dir), `${dir} was removed`);
  assert.deepEqual(await waitGone(token), []);
});

test('stop(): a payload that ignores SIGTERM is killed by the CLI after the grace', async (t) => {
  if (!needBubblewrap(t)) return;
  const token = marker('iso-forced');
  const stubborn = "process.on('SIGTERM', () => {}); require('fs').writeSync(3, 'ready\\n'); setInterval(() => {}, 1000)";
  const run = spawnIsolated([NODE, '-e', stubborn, token], { policy: 'ro', graceMs: 300 });
  const err = collect(run.stderr);
  // Stopped only once it handles SIGTERM (it says so).
  await new Promise((resolve) => run.protocol.once('data', resolve));
  run.protocol.resume();
  const started = performance.now();
  const result = await run.stop();
  const took = performance.now() - started;
  assert.equal(run.stop(), run.stop(), 'the same promise every time');
  // The CLI's forced kill: 128 + SIGKILL, after the grace and well before
  // spawnIsolated's own last resort (grace + 6 s).
  assert.deepEqual(result, { exitCode: 128 + os.constants.signals.SIGKILL, signal: null }, await err);
  assert.ok(took >= 250 && took < 300 + 3000, `stopped in ${took} ms`);
  assert.equal(run.receipt.stop.ended_by, 'forced');
  assert.deepEqual(await waitGone(token), []);
});

test('a plan object is written to a private file in the private control directory', async (t) => {
  if (!needBubblewrap(t)) return;
  const token = marker('iso-plan');
  const workspace = tempDir('iso-plan-ws');
  const plan = sandboxPlan({ workspace });
  const run = spawnIsolated([NODE, '-e', READY, token], { policy: plan, workspace });
  run.stderr.resume();
  await new Promise((resolve) => run.protocol.once('data', resolve));
  const argv = procArgv(run.pid);
  const planFile = argAfter(argv, '--plan');
  assert.ok(planFile, argv.join(' '));
  assert.equal(fs.lstatSync(planFile).mode & 0o777, 0o600, 'the plan file is private');
  const control = path.dirname(planFile);
  assert.equal(fs.lstatSync(control).mode & 0o777, 0o700, 'in a private directory');
  assert.equal(fs.lstatSync(control).uid, process.getuid(), 'owned by this user');
  assert.ok(!within(planFile, workspace), 'never inside the workspace');
  assert.deepEqual(JSON.parse(fs.readFileSync(planFile, 'utf8')), plan);
  assert.equal(path.dirname(argAfter(argv, '--receipt-dir')), control);
  await run.stop();
  assert.ok(!fs.existsSync(control), 'removed with the run');
  assert.deepEqual(await waitGone(token), []);
  fs.rmSync(workspace, { recursive: true, force: true });
});

for (const policy of ['ro', 'rw']) {
  test(`policy '${policy}': the workspace, an empty environment but for options.env`, async (t) => {
    if (!needBubblewrap(t)) return;
    const workspace = tempDir(`iso-${policy}`);
    const run = spawnIsolated([NODE, '-e', PROBE], {
      policy, workspace, env: { GREETING: 'hello' },
    });
    const errText = collect(run.stderr);
    const out = await collect(run.protocol);
    const seen = JSON.parse(out);
    assert.deepEqual(await run.wait(), { exitCode: 0, signal: null }, await errText);
    assert.equal(seen.cwd, workspace);
    assert.equal(seen.wrote, policy === 'rw');
    assert.equal(fs.existsSync(path.join(workspace, 'written.txt')), policy === 'rw');
    assert.equal(seen.env.GREETING, 'hello');
    // Only the CLI profile's base (PATH, HOME, TMPDIR, LANG) and options.env.
    assert.deepEqual(Object.keys(seen.env).sort(), ['GREETING', 'HOME', 'LANG', 'PATH', 'TMPDIR']);
    assert.equal(run.receipt.outcome.kind, 'exited');
    assert.ok(fs.existsSync(workspace), "the caller's workspace is kept");
    fs.rmSync(workspace, { recursive: true, force: true });
  });
}

test('receipts go where asked, never inside the workspace', async (t) => {
  if (!needBubblewrap(t)) return;
  const workspace = tempDir('iso-receipt-ws');
  const keep = tempDir('iso-receipts');
  const receiptDir = path.join(keep, 'r');
  const run = spawnIsolated([NODE, '-e', 'process.exit(3)'], { policy: 'rw', workspace, receiptDir });
  run.stderr.resume();
  run.protocol.resume();
  assert.deepEqual(await run.wait(), { exitCode: 3, signal: null });
  // The receipt, and the closing record of the run's receipt chain.
  const files = fs.readdirSync(receiptDir).filter((f) => f.endsWith('.json'));
  assert.equal(files.length, 1);
  assert.deepEqual(JSON.parse(fs.readFileSync(path.join(receiptDir, files[0]), 'utf8')), run.receipt);
  assert.throws(
    () => spawnIsolated([NODE, '-e', '0'], { policy: 'rw', workspace, receiptDir: path.join(workspace, 'r') }),
    { code: 'DENIED', message: /inside the workspace/ },
  );
  fs.rmSync(workspace, { recursive: true, force: true });
  fs.rmSync(keep, { recursive: true, force: true });
});

test('a payload that never starts: exit status 1, the reason on stderr and in the receipt', async (t) => {
  if (!needBubblewrap(t)) return;
  const run = spawnIsolated(['/opt/nowhere/tool'], { policy: 'ro' });
  run.protocol.resume();
  const err = collect(run.stderr);
  assert.deepEqual(await run.wait(), { exitCode: 1, signal: null });
  assert.match(await err, /did not start/);
  assert.equal(run.receipt.outcome.kind, 'launch-failed');
  assert.equal(run.receipt.outcome.step, 'execve');
});

test('a refusal by the CLI before launching: exit status 1, the reason, no receipt', async () => {
  const run = spawnIsolated(['no-such-program-maelys'], { policy: 'ro' });
  run.protocol.resume();
  const err = collect(run.stderr);
  assert.deepEqual(await run.wait(), { exitCode: 1, signal: null });
  assert.match(await err, /no-such-program-maelys.*not found/);
  assert.equal(run.receipt, null);
});

test('bad calls are refused before anything is made or started', () => {
  const base = tempDir('iso-refusals');
  const ok = { policy: 'ro', base };
  const refusals = [
    [[], ok, 'ARGUMENT', /argv/],
    [[NODE], {}, 'ARGUMENT', /options\.policy is required/],
    [[NODE], { policy: 'rwx' }, 'ARGUMENT', /options\.policy must be/],
    [[NODE], { ...ok, polcy: 'ro' }, 'ARGUMENT', /options\.polcy: unknown member/],
    [[NODE], { ...ok, graceMs: 0 }, 'ARGUMENT', /graceMs/],
    [[NODE], { ...ok, env: { 'A-B': 'x' } }, 'ARGUMENT', /'A-B' is not a variable name/],
    [[NODE], { ...ok, env: { A: 1 } }, 'ARGUMENT', /options\.env\.A/],
    [[NODE], { ...ok, warden: '/nonexistent/maelys-warden' }, 'NOT_FOUND', /maelys-warden/],
    [[NODE], { ...ok, warden: 'maelys-warden' }, 'ARGUMENT', /absolute/],
    [[NODE], { ...ok, base: 'relative' }, 'ARGUMENT', /options\.base/],
    [[NODE], { ...ok, stateDir: 'state' }, 'ARGUMENT', /options\.stateDir/],
    [[NODE], { ...ok, workspace: '/nonexistent-maelys-workspace' }, 'ENOENT', /nonexistent/],
    [[NODE], { base, policy: { format: 'maelys-executor-plan/1', network: { mode: 'none' }, root: undefined } }, 'ARGUMENT', /\$\.root/],
  ];
  for (const [argv, options, code, pattern] of refusals) {
    assert.throws(() => spawnIsolated(argv, options), (e) => {
      assert.equal(e.code, code, `${JSON.stringify(options)}: ${e.message}`);
      assert.match(e.message, pattern);
      return true;
    });
  }
  assert.deepEqual(listing(base), [], 'no private directory was left behind');
  fs.rmSync(base, { recursive: true, force: true });
});

test('a base directory others could write into is refused', () => {
  const base = tempDir('iso-base');
  fs.chmodSync(base, 0o777);
  assert.throws(() => spawnIsolated([NODE], { policy: 'ro', base }), { code: 'DENIED', message: /sticky/ });
  fs.chmodSync(base, 0o1777);
  assert.ok(fs.existsSync(paths.warden));
  fs.rmSync(base, { recursive: true, force: true });
});

test('nothing survives the host: process.exit() kills the launcher and its sandbox', async (t) => {
  if (!needBubblewrap(t)) return;
  const token = marker('iso-exit');
  const base = tempDir('iso-exit-base');
  const r = await runNode([path.join(fixtures, 'isolated-host.cjs'), 'exit', token, base]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^ready \d+/);
  assert.deepEqual(await waitGone(token), []);
  assert.deepEqual(listing(base), [], 'the private directories were removed at exit');
  fs.rmSync(base, { recursive: true, force: true });
});

test('nothing survives the host: SIGKILL takes the launcher (setpriv --pdeathsig) and its sandbox', async (t) => {
  if (!needBubblewrap(t)) return;
  const token = marker('iso-sigkill');
  const base = tempDir('iso-sigkill-base');
  const host = spawn(NODE, [path.join(fixtures, 'isolated-host.cjs'), 'held', token, base], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  await new Promise((resolve) => host.stdout.once('data', resolve));
  assert.ok(survivors(token).length > 0, 'the payload runs');
  host.kill('SIGKILL');
  await new Promise((resolve) => host.on('close', resolve));
  assert.deepEqual(await waitGone(token), []);
  // A SIGKILL'd host runs no code: its private directories stay (under
  // options.base, here this test's own directory).
  assert.equal(listing(base).length, 3);
  fs.rmSync(base, { recursive: true, force: true });
});
