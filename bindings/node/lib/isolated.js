'use strict';
// spawnIsolated(): the seed's Node isolated protocol launcher. It starts
// `maelys-warden run --io isolated` and talks to it over ordinary stdin and
// stdout pipes; the CLI copies those bytes to and from the payload's fd 3
// socket. No descriptor passing, no MAELYS_PRESERVE_FDS, no addon: this file
// needs only the CLI.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Duplex } = require('node:stream');

const paths = require('./paths.js');
const { assertJson, fail } = require('./errors.js');

// maelys-warden's bounded stop: the grace, then its forced kill (2 s budget)
// and the drain of the payload's last output (2 s). Past that, plus a
// margin, the CLI itself is killed (its sandbox dies with it: bwrap runs
// with --die-with-parent).
const WARDEN_FORCE_MS = 2000;
const WARDEN_DRAIN_MS = 2000;
const STOP_MARGIN_MS = 2000;

const OPTIONS = Object.freeze([
  'policy', 'workspace', 'env', 'graceMs', 'receiptDir', 'stateDir', 'warden', 'base',
]);
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'];
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

// Launchers still running, killed if this process exits first.
const live = new Set();
let exitHookInstalled = false;

function installExitHook() {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const run of live) run.killNow();
  });
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function within(child, parent) {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

// Where the private directories are made. Something another user controls
// could swap them: the base must belong to this user or root, and may be
// writable by others only with the sticky bit (as /tmp is).
function checkBase(base) {
  if (typeof base !== 'string' || !path.isAbsolute(base)) {
    throw fail('ARGUMENT', `options.base must be an absolute path (got ${JSON.stringify(base)})`);
  }
  let real;
  let st;
  try {
    real = fs.realpathSync(base);
    st = fs.statSync(real);
  } catch (e) {
    throw fail('NOT_FOUND', `options.base ${base}: ${e.message}`);
  }
  if (!st.isDirectory()) throw fail('ARGUMENT', `options.base ${base} is not a directory`);
  if (st.uid !== process.getuid() && st.uid !== 0) {
    throw fail('DENIED', `options.base ${real} belongs to uid ${st.uid}, neither this user nor root`);
  }
  if ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0) {
    throw fail(
      'DENIED',
      `options.base ${real} is writable by group or others without the sticky bit: another user could replace what is made there`,
    );
  }
  return real;
}

function privateDir(base, prefix) {
  // mkdtemp creates the directory with mode 0700.
  return fs.mkdtempSync(path.join(base, prefix));
}

function findSetpriv() {
  for (const p of SETPRIV) {
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      // the next candidate
    }
  }
  throw fail(
    'NOT_FOUND',
    'spawnIsolated needs setpriv (util-linux) to tie maelys-warden to this process: without it the CLI and its sandbox could outlive a killed Node',
  );
}

function policyArgs(policy, control) {
  if (policy === 'ro' || policy === 'rw') return { args: [`--${policy}`], file: null };
  let object = policy;
  if (object !== null && typeof object === 'object' &&
      Object.getPrototypeOf(object) !== Object.prototype && typeof object.toJSON === 'function') {
    object = object.toJSON(); // a Plan: its sealed form, digest included
  }
  if (!isPlainObject(object)) {
    throw fail(
      'ARGUMENT',
      "options.policy must be 'ro', 'rw', or a plan object (maelys-executor-plan/1)",
    );
  }
  assertJson(object, '$');
  // A private file in the private control directory: never where the
  // sandbox can write, never in a directory others can write.
  const file = path.join(control, 'plan.json');
  fs.writeFileSync(file, JSON.stringify(object), { mode: 0o600, flag: 'wx' });
  return { args: ['--plan', file], file };
}

function envArgs(env) {
  if (env === undefined || env === null) return [];
  if (!isPlainObject(env)) throw fail('ARGUMENT', 'options.env must be an object of strings');
  const args = [];
  for (const [name, value] of Object.entries(env)) {
    if (!ENV_NAME.test(name)) throw fail('ARGUMENT', `options.env: '${name}' is not a variable name`);
    if (typeof value !== 'string' || value.includes('\0')) {
      throw fail('ARGUMENT', `options.env.${name} must be a string without NUL`);
    }
    args.push('--env', `${name}=${value}`);
  }
  return args;
}

// The protocol as one duplex over the CLI's stdout (readable) and stdin
// (writable). Unlike Duplex.from(), the launcher's normal end is not an
// error: its stdout ends, its stdin is closed, and only a write that can no
// longer be delivered fails (and is reported as such).
class LauncherDuplex extends Duplex {
  #stdin;
  #stdout;

  constructor(stdin, stdout) {
    super();
    this.#stdin = stdin;
    this.#stdout = stdout;
    stdout.on('data', (chunk) => {
      if (!this.push(chunk)) stdout.pause();
    });
    stdout.on('end', () => this.push(null));
    stdout.on('error', (e) => this.destroy(e));
    // An EPIPE reaches the pending write's callback; the stream's own
    // 'error' event must not be unhandled as well.
    stdin.on('error', () => {});
  }

  _read() {
    this.#stdout.resume();
  }

  _write(chunk, encoding, callback) {
    if (this.#stdin.destroyed || this.#stdin.writableEnded) {
      callback(fail('IO', 'the launcher no longer reads the protocol (it has ended)'));
      return;
    }
    this.#stdin.write(chunk, encoding, callback);
  }

  _final(callback) {
    if (this.#stdin.destroyed || this.#stdin.writableEnded) callback();
    else this.#stdin.end(callback);
  }

  _destroy(error, callback) {
    this.#stdin.destroy();
    this.#stdout.destroy();
    callback(error);
  }
}

// The CLI's per-user state directory (its receipt signing key): what it
// would use itself, from this process's environment, since the launcher's
// own environment holds nothing but TMPDIR.
function stateDirFor(given) {
  if (given !== undefined) {
    if (typeof given !== 'string' || !path.isAbsolute(given)) {
      throw fail('ARGUMENT', 'options.stateDir must be an absolute path');
    }
    return given;
  }
  const xdg = process.env.XDG_STATE_HOME;
  if (xdg && path.isAbsolute(xdg)) return path.join(xdg, 'maelys');
  let home = process.env.HOME;
  if (!home || !path.isAbsolute(home)) {
    try {
      home = os.userInfo().homedir;
    } catch {
      home = undefined; // no passwd entry
    }
  }
  if (!home || !path.isAbsolute(home)) {
    throw fail(
      'ARGUMENT',
      'neither XDG_STATE_HOME nor a home directory is known: give options.stateDir (where maelys-warden keeps its receipt signing key)',
    );
  }
  return path.join(home, '.local', 'state', 'maelys');
}

function readReceipt(dir, before) {
  let names;
  try {
    names = fs.readdirSync(dir).filter((n) => n.endsWith('.json') && !before.has(n));
  } catch {
    return null;
  }
  if (names.length !== 1) return null;
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, names[0]), 'utf8'));
  } catch {
    return null;
  }
}

/**
 * Runs argv ([program, ...args]) under maelys-warden, its protocol on the
 * payload's fd 3, and returns {protocol, stderr, wait(), stop(), receipt,
 * pid, workspace}.
 *
 * options.policy (required): 'ro' or 'rw' (the CLI's built-in profiles over
 *   the workspace), or a plan object in the maelys-executor-plan/1
 *   vocabulary, written to a private file (mode 0600) in a private control
 *   directory (mode 0700) and passed with --plan.
 * options.workspace: the payload's working directory; by default a fresh
 *   private one, removed when the launcher exits.
 * options.env: {NAME: value} for the payload; nothing else of this
 *   process's environment reaches it (the CLI adds only its profile's base).
 * options.graceMs: the CLI's --grace (default 2000).
 * options.receiptDir: where the CLI writes the receipt (never inside the
 *   workspace); by default a private directory, read into `receipt` when the
 *   launcher exits, then removed.
 * options.stateDir: the CLI's per-user state (its receipt signing key);
 *   by default what the CLI itself would use, from this process's
 *   environment: $XDG_STATE_HOME/maelys, else ~/.local/state/maelys.
 * options.warden: the maelys-warden to run (default: the one this package
 *   built).
 * options.base: where the private directories are made (default
 *   os.tmpdir()).
 *
 * The caller drains both `protocol` and `stderr`. wait() and stop() are
 * idempotent; stop() sends SIGTERM and relies on the CLI's bounded
 * graceful-then-forced shutdown.
 */
function spawnIsolated(argv, options = {}) {
  if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === 'string') ||
      argv[0] === '') {
    throw fail('ARGUMENT', 'argv must be a non-empty array of strings: [program, ...args]');
  }
  if (!isPlainObject(options)) throw fail('ARGUMENT', 'options must be a plain object');
  for (const key of Object.keys(options)) {
    if (!OPTIONS.includes(key)) {
      throw fail('ARGUMENT', `options.${key}: unknown member (${OPTIONS.join(', ')})`);
    }
  }
  if (options.policy === undefined) {
    throw fail('ARGUMENT', "options.policy is required: 'ro', 'rw' or a plan object");
  }
  const graceMs = options.graceMs ?? 2000;
  if (!Number.isSafeInteger(graceMs) || graceMs < 1 || graceMs > 3600000) {
    throw fail('ARGUMENT', 'options.graceMs must be an integer in 1..3600000');
  }
  const warden = options.warden ?? paths.warden;
  if (typeof warden !== 'string' || !path.isAbsolute(warden)) {
    throw fail('ARGUMENT', 'options.warden must be an absolute path');
  }
  try {
    fs.accessSync(warden, fs.constants.X_OK);
  } catch (e) {
    throw fail('NOT_FOUND', `maelys-warden ${warden}: ${e.message}`);
  }
  const setpriv = findSetpriv();
  const envList = envArgs(options.env);
  const stateDir = stateDirFor(options.stateDir);
  const base = checkBase(options.base ?? os.tmpdir());

  const created = [];
  const removeCreated = () => {
    for (const dir of created.splice(0).reverse()) fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const control = privateDir(base, 'maelys-control-');
    created.push(control);
    const temp = privateDir(base, 'maelys-tmp-');
    created.push(temp);
    let workspace;
    if (options.workspace === undefined) {
      workspace = privateDir(base, 'maelys-workspace-');
      created.push(workspace);
    } else {
      if (typeof options.workspace !== 'string' || !path.isAbsolute(options.workspace)) {
        throw fail('ARGUMENT', 'options.workspace must be an absolute path');
      }
      workspace = fs.realpathSync(options.workspace);
      if (!fs.statSync(workspace).isDirectory()) {
        throw fail('ARGUMENT', `options.workspace ${workspace} is not a directory`);
      }
    }
    let receiptDir = path.join(control, 'receipts');
    if (options.receiptDir !== undefined) {
      if (typeof options.receiptDir !== 'string' || !path.isAbsolute(options.receiptDir)) {
        throw fail('ARGUMENT', 'options.receiptDir must be an absolute path');
      }
      receiptDir = path.resolve(options.receiptDir);
      let real = receiptDir;
      try {
        real = fs.realpathSync(receiptDir);
      } catch {
        // not created yet: compared as written
      }
      if (within(real, workspace) || within(receiptDir, workspace)) {
        throw fail(
          'DENIED',
          `options.receiptDir ${receiptDir} lies inside the workspace ${workspace}: the sandbox could forge its own receipt`,
        );
      }
    }
    let before = new Set();
    try {
      before = new Set(fs.readdirSync(receiptDir));
    } catch {
      // created by the CLI
    }
    const policy = policyArgs(options.policy, control);
    const args = [
      '--pdeathsig', 'KILL', '--', warden, 'run', ...policy.args,
      '--workspace', workspace,
      '--io', 'isolated',
      '--grace', `${graceMs}ms`,
      '--receipt-dir', receiptDir,
      '--state-dir', stateDir,
      ...envList,
      '--', ...argv,
    ];
    // The launcher's environment is its private TMPDIR and nothing else.
    const child = spawn(setpriv, args, {
      cwd: control,
      env: { TMPDIR: temp },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    return new IsolatedRun(child, {
      graceMs, workspace, receiptDir, before, created: created.splice(0),
    });
  } catch (e) {
    removeCreated();
    throw e;
  }
}

class IsolatedRun {
  #child;
  #created;
  #receiptDir;
  #before;
  #graceMs;
  #result = null;
  #failure = null;
  #receipt = null;
  #exited = false;
  #waitPromise;
  #stopPromise = null;
  #guard = null;

  constructor(child, { graceMs, workspace, receiptDir, before, created }) {
    this.#child = child;
    this.#created = created;
    this.#receiptDir = receiptDir;
    this.#before = before;
    this.#graceMs = graceMs;
    /** The CLI's pid. */
    this.pid = child.pid;
    /** The payload's working directory. */
    this.workspace = workspace;
    /** Bytes to and from the payload's fd 3: the CLI's stdout and stdin. */
    this.protocol = new LauncherDuplex(child.stdin, child.stdout);
    /** The payload's stdout and stderr, and the CLI's own failures. */
    this.stderr = child.stderr;
    live.add(this);
    installExitHook();
    this.#waitPromise = new Promise((resolve, reject) => {
      child.once('error', (e) => {
        if (this.#exited) return;
        this.#exited = true;
        this.#failure = fail('SPAWN', `starting maelys-warden: ${e.message}`);
        this.#finish();
        reject(this.#failure);
      });
      child.once('exit', (code, signal) => {
        if (this.#exited) return;
        this.#exited = true;
        this.#receipt = readReceipt(this.#receiptDir, this.#before);
        this.#result = Object.freeze({ exitCode: code, signal });
        this.#finish();
        resolve(this.#result);
      });
    });
    // A rejection nobody asked for (wait() never called) is not unhandled.
    this.#waitPromise.catch(() => {});
  }

  #finish() {
    clearTimeout(this.#guard);
    live.delete(this);
    for (const dir of this.#created.splice(0).reverse()) {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  killNow() {
    if (!this.#exited) this.#child.kill('SIGKILL');
    for (const dir of this.#created.splice(0).reverse()) {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  /** The receipt the CLI wrote (parsed), once the launcher exited; null
   * before, and when the CLI refused before launching anything. */
  get receipt() {
    return this.#receipt;
  }

  /**
   * Resolves with the CLI's {exitCode, signal}: the payload's own exit
   * status (128+N for signal N), or 1 with an agent-cli/v2 envelope on
   * stderr when it never started. The same promise and object every time.
   */
  wait() {
    return this.#waitPromise;
  }

  /**
   * SIGTERM to the CLI, which stops the payload gracefully, then by force
   * after the grace; resolves as wait() does. Idempotent.
   */
  stop() {
    if (this.#stopPromise === null) {
      if (!this.#exited) {
        this.#child.kill('SIGTERM');
        this.#guard = setTimeout(() => {
          if (!this.#exited) this.#child.kill('SIGKILL');
        }, this.#graceMs + WARDEN_FORCE_MS + WARDEN_DRAIN_MS + STOP_MARGIN_MS);
      }
      this.#stopPromise = this.#waitPromise;
    }
    return this.#stopPromise;
  }
}

module.exports = { spawnIsolated };
