// Shared pieces of the Node suite: plans for this host, markers to find
// every process a test started, the bubblewrap gate, a child-Node runner.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import maelys from '../../lib/index.js';

export const { Executor, Plan, PLAN_FORMAT, spawnIsolated } = maelys;

export const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const fixtures = path.join(packageDir, 'test', 'fixtures');
export const nodeModules = path.join(packageDir, 'node_modules');
export const NODE = process.execPath;

/** A token no other process carries: put it in argv, find it in /proc. */
export function marker(name = 'mark') {
  return `maelys-node-test-${name}-${randomBytes(6).toString('hex')}`;
}

/** Pids of live processes (zombies excluded) whose command line holds
 * `token`, this process excepted. */
export function survivors(token) {
  const found = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'latin1');
      if (!cmdline.includes(token)) continue;
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'latin1');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (state !== 'Z' && state !== 'X') found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** Polls until no process carries `token` (or the deadline), then kills
 * (by pid) whatever still does, so that a failing test cannot leave a
 * process holding this suite's pipes open; returns those survivors. */
export async function waitGone(token, ms = 5000) {
  const deadline = Date.now() + ms;
  let left = survivors(token);
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 25));
    left = survivors(token);
  }
  for (const pid of left) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  return left;
}

// Every directory a test made goes when its test file's process ends,
// whether the test passed or not.
const made = [];
process.on('exit', () => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

/** Points XDG_STATE_HOME at a private directory for this test file, so
 * that maelys-warden's per-user signing key (spawnIsolated()'s default
 * state directory) is made there, never in the home of whoever runs the
 * suite; returns the state directory the CLI will use. */
export function privateStateHome() {
  const dir = tempDir('state');
  process.env.XDG_STATE_HOME = dir;
  return path.join(dir, 'maelys');
}

/** A private directory (mode 0700) under the system's temporary
 * directory, removed at the end of the test file. */
export function tempDir(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `maelys-node-${prefix}-`));
  made.push(dir);
  return dir;
}

// The host's runtime, as maelys-warden's profiles bind it: a top-level
// symbolic link (merged /usr) stays a link with the same text, a directory
// is bound read-only.
function runtimeMounts() {
  const mounts = [];
  for (const dir of ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']) {
    let st;
    try {
      st = fs.lstatSync(dir);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) {
      mounts.push({ kind: 'symlink', target: fs.readlinkSync(dir), destination: dir });
    } else if (st.isDirectory()) {
      mounts.push({ kind: 'ro-bind', source: dir, destination: dir, missing: 'skip' });
    }
  }
  return mounts;
}

/**
 * A plain plan object (maelys-executor-plan/1) for bubblewrap: the runtime
 * read-only, /proc, a minimal /dev, a private 64 MiB /tmp, no network, a
 * read-only root, the whole tree covered by wait and stop; `workspace`
 * writable (or read-only), `reads` readable.
 */
export function sandboxPlan({ workspace, writable = false, reads = [], network = 'none' } = {}) {
  const rules = [];
  if (workspace) {
    rules.push({ path: workspace, access: writable ? 'write' : 'read', scope: 'recursive-directory' });
  }
  for (const p of reads) rules.push({ path: p, access: 'read', scope: 'recursive-directory' });
  return {
    format: PLAN_FORMAT,
    mounts: [
      ...runtimeMounts(),
      { kind: 'proc', destination: '/proc' },
      { kind: 'dev', destination: '/dev' },
      { kind: 'tmpfs', destination: '/tmp', size: 64 << 20 },
    ],
    rules,
    network: { mode: network },
    root: { disposition: 'readonly' },
    process_tree_required: true,
  };
}

/** The host's own network, nothing confined: for the posix backend. */
export const unconfinedPlan = Object.freeze({ format: PLAN_FORMAT, network: { mode: 'inherit' } });

let bubblewrapVerdict;

/** Whether bubblewrap proved what the sandbox tests need; when it did not,
 * the test is skipped with the reason, or fails under
 * MAELYS_BWRAP_MUST_WORK=1 (as in CI). */
export function needBubblewrap(t) {
  if (bubblewrapVerdict === undefined) {
    const ex = new Executor({ backends: ['bubblewrap'] });
    const proved = ex.capabilities('bubblewrap');
    const needed = ['filesystem_read', 'filesystem_write', 'network_none', 'process_tree', 'root_readonly'];
    const missing = needed.filter((c) => !proved.includes(c));
    bubblewrapVerdict = missing.length === 0
      ? null
      : `bubblewrap did not prove ${missing.join(', ')}: ${ex.diagnostic('bubblewrap')}`;
    ex.close();
  }
  if (bubblewrapVerdict === null) return true;
  if (process.env.MAELYS_BWRAP_MUST_WORK === '1') {
    throw new Error(`MAELYS_BWRAP_MUST_WORK=1 but ${bubblewrapVerdict}`);
  }
  t.skip(bubblewrapVerdict);
  return false;
}

/** Runs `node script args...` and collects its output; rejects after `ms`. */
export function runNode(args, { ms = 30000, env } = {}) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(NODE, args, { stdio: ['ignore', 'pipe', 'pipe'], env: env ?? process.env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`node ${args.join(' ')} did not end within ${ms} ms\n${stdout}\n${stderr}`));
    }, ms);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: performance.now() - started });
    });
  });
}

/** Collects a readable stream's text until it ends. */
export function collect(stream) {
  return new Promise((resolve, reject) => {
    let text = '';
    stream.setEncoding('utf8');
    stream.on('data', (d) => (text += d));
    stream.on('end', () => resolve(text));
    stream.on('error', reject);
  });
}
