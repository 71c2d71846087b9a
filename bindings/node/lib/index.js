'use strict';
// @maelys/executor: Maelys Executor for Node.js.
//
// - Executor, Plan, Execution: the native addon, whose executor runs on this
//   process's own libuv loop (executions are handles on it, like child
//   processes).
// - spawnIsolated(): the seed's isolated protocol launcher, over the
//   maelys-warden command line (lib/isolated.js).

const net = require('node:net');
const os = require('node:os');

const { binding, paths } = require('./binding.js');
const { spawnIsolated } = require('./isolated.js');
const { assertJson, fail } = require('./errors.js');

const PLAN_FORMAT = 'maelys-executor-plan/1';

// Module-private keys: a Plan's native handle, and how Executor#spawn makes
// an Execution.
const planHandles = new WeakMap();
const kCreate = Symbol('create');
const kSpawn = Symbol('spawn');

const IO_MODES = Object.freeze({
  captured: 0,
  'duplex-stdio': 1,
  'isolated-duplex': 2,
  inherit: 3,
});
const STDERR_MODES = Object.freeze({ inherit: 0, capture: 1, null: 2 });
const STOP_MODES = Object.freeze({
  graceful: 1,
  forced: 2,
  'graceful-then-forced': 3,
});
const BACKENDS = Object.freeze(['posix', 'bubblewrap']);

const signalNames = new Map(
  Object.entries(os.constants.signals).map(([name, n]) => [n, name]),
);

// Nothing the addon started survives this process (invariant 22): at exit,
// however it comes (the loop ran dry, process.exit(), an uncaught
// exception), every execution still running is killed, released ones
// included. Synchronous signals only, as 'exit' listeners must be. The
// environment's cleanup hook (src/addon.c) does the same for Worker threads
// and then waits for the ends.
process.on('exit', () => binding.killAll());

function choice(table, value, what) {
  if (!Object.prototype.hasOwnProperty.call(table, value)) {
    throw fail(
      'ARGUMENT',
      `${what} must be one of ${Object.keys(table).join(', ')} (got ${JSON.stringify(value)})`,
    );
  }
  return table[value];
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function checkMembers(object, allowed, what) {
  for (const key of Object.keys(object)) {
    if (!allowed.includes(key)) {
      throw fail('ARGUMENT', `${what}.${key}: unknown member (${allowed.join(', ')})`);
    }
  }
}

function stringMember(object, key, what) {
  const v = object[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw fail('ARGUMENT', `${what}.${key} must be a string`);
  return v;
}

function integerMember(object, key, what) {
  const v = object[key];
  if (v === undefined) return undefined;
  if (!Number.isSafeInteger(v) || v < 0) {
    throw fail('ARGUMENT', `${what}.${key} must be a non-negative integer`);
  }
  return v;
}

/* ----------------------------------------------------------------- Plan */

// A sealed plan. Built from a plain object in the executor's own JSON
// vocabulary (maelys-executor-plan/1), read strictly and sealed by the core:
// an unknown member, a wrong type or an invalid value is refused with the
// JSON path at fault ("$.rules[0].access").
class Plan {
  #json;

  constructor(object) {
    if (!isPlainObject(object)) throw fail('ARGUMENT', 'plan must be a plain object');
    // JSON.stringify would silently drop undefined, functions and symbols:
    // a member the core never sees is a rule silently lost, so it is refused.
    assertJson(object, '$');
    const sealed = binding.sealPlan(JSON.stringify(object));
    planHandles.set(this, sealed.handle);
    this.#json = sealed.json;
    /** "sha256:<64 hex>" over every rule and the decision digest. */
    this.digest = sealed.digest;
    /** The capabilities a backend must have proved to enforce it. */
    this.requiredCapabilities = Object.freeze(sealed.requiredCapabilities);
    Object.freeze(this);
  }

  /** The sealed plan as the core writes it, digest included. */
  toJSON() {
    return JSON.parse(this.#json);
  }
}

/* ------------------------------------------------------------- Request */

const REQUEST_MEMBERS = Object.freeze([
  'executable', 'argv', 'env', 'cwd', 'io', 'protocolFd', 'stderr',
  'backend', 'scratchSize', 'platform', 'graceMs', 'forceMs', 'receiptDir',
  'identity',
]);

// The request as the addon takes it: members checked here by type and name,
// values judged by the core's setters (whose diagnostics the addon prefixes
// with "request.<member>").
function normalizeRequest(request) {
  if (!isPlainObject(request)) throw fail('ARGUMENT', 'request must be a plain object');
  checkMembers(request, REQUEST_MEMBERS, 'request');
  const out = {};
  for (const key of ['executable', 'cwd', 'backend', 'platform', 'receiptDir']) {
    const v = stringMember(request, key, 'request');
    if (v !== undefined) out[key] = v;
  }
  if (out.executable === undefined) throw fail('ARGUMENT', 'request.executable is required');
  if (out.backend === undefined) {
    throw fail('ARGUMENT', 'request.backend is required: nothing is launched without one');
  }
  if (request.argv !== undefined) {
    if (!Array.isArray(request.argv) || !request.argv.every((a) => typeof a === 'string')) {
      throw fail('ARGUMENT', 'request.argv must be an array of strings (argv[0] included)');
    }
    out.argv = request.argv;
  }
  if (request.env === undefined || request.env === null) {
    out.env = null; // an empty environment
  } else {
    if (!isPlainObject(request.env)) {
      throw fail('ARGUMENT', 'request.env must be an object of strings, or null for none');
    }
    out.env = Object.entries(request.env).map(([name, value]) => {
      if (typeof value !== 'string') throw fail('ARGUMENT', `request.env.${name} must be a string`);
      return [name, value];
    });
  }
  if (request.io !== undefined) {
    out.io = choice(IO_MODES, request.io, 'request.io');
    out.protocolFd = out.io === IO_MODES['isolated-duplex'] ? 3 : -1;
  }
  if (request.protocolFd !== undefined) {
    if (request.io !== 'isolated-duplex') {
      throw fail('ARGUMENT', "request.protocolFd is only meaningful with io 'isolated-duplex'");
    }
    out.protocolFd = integerMember(request, 'protocolFd', 'request');
  }
  if (out.protocolFd === -1) delete out.protocolFd;
  if (request.stderr !== undefined) out.stderr = choice(STDERR_MODES, request.stderr, 'request.stderr');
  for (const key of ['scratchSize', 'graceMs', 'forceMs']) {
    const v = integerMember(request, key, 'request');
    if (v !== undefined) out[key] = v;
  }
  if (request.identity !== undefined) {
    const id = request.identity;
    if (!isPlainObject(id)) throw fail('ARGUMENT', 'request.identity must be {uid, gid}');
    checkMembers(id, ['uid', 'gid'], 'request.identity');
    out.uid = integerMember(id, 'uid', 'request.identity');
    out.gid = integerMember(id, 'gid', 'request.identity');
    if (out.uid === undefined || out.gid === undefined) {
      throw fail('ARGUMENT', 'request.identity needs both uid and gid');
    }
  }
  return out;
}

/* ----------------------------------------------------------- Execution */


function socketOn(fd, readable, writable) {
  if (fd < 0) return null;
  return new net.Socket({ fd, readable, writable });
}

// One launch. Created by Executor#spawn only.
class Execution {
  #handle = null;
  #onEvent;
  #ended = false;
  #released = false;
  #referenced = true;
  #result = null;
  #failure = null;
  #waitPromise = null;
  #waiter = null;
  #stops = new Map();
  #nextToken = 1;
  #receipt = null;
  #receiptPath = null;
  #endListeners = [];

  constructor(key) {
    if (key !== kCreate) throw fail('ARGUMENT', 'an Execution is made by Executor#spawn');
    // The addon holds this function (strongly while the child runs and the
    // execution is referenced); it is this object's only way back in.
    this.#onEvent = (kind, a, b) => this.#event(kind, a, b);
  }

  static [kSpawn](executorHandle, plan, request) {
    const execution = new Execution(kCreate);
    const r = binding.spawn(executorHandle, plan, request, execution.#onEvent);
    execution.#handle = r.handle;
    /** The execution's identifier (32 lowercase hex digits). */
    execution.id = r.id;
    const [stdin, stdout, stderr, protocol] = r.fds;
    /** stdin (captured io): a writable stream, else null. */
    execution.stdin = socketOn(stdin, false, true);
    /** stdout (captured io): a readable stream, else null. */
    execution.stdout = socketOn(stdout, true, false);
    /** stderr (stderr: 'capture'): a readable stream, else null. */
    execution.stderr = socketOn(stderr, true, false);
    /** The protocol socket (duplex-stdio, isolated-duplex): a Duplex. */
    execution.protocol = socketOn(protocol, true, true);
    return execution;
  }

  /** The host pid of the process the executor started (for bubblewrap, the
   * sandbox launcher); -1 once it was reaped or the execution released. */
  get pid() {
    return this.#released ? -1 : binding.pid(this.#handle);
  }

  /** Whether the execution has ended (wait() then settles at once). */
  get ended() {
    return this.#ended;
  }

  /** The receipt (parsed JSON) once ended; null before. */
  get receipt() {
    return this.#receipt;
  }

  /** The receipt file's path once written (request.receiptDir); else null. */
  get receiptPath() {
    return this.#receiptPath;
  }

  #event(kind, a, b) {
    if (kind === 'end') {
      this.#ended = true;
      this.#receipt = a.receipt ? JSON.parse(a.receipt) : null;
      this.#receiptPath = a.receiptPath;
      if (a.outcome === 'launch-failed') {
        this.#failure = fail('SPAWN', `the payload did not start: ${a.launchStep}: ${a.message}`);
        this.#failure.step = a.launchStep;
        this.#failure.errno = a.launchErrno;
      } else {
        this.#result = Object.freeze({
          exitCode: a.exitCode,
          signal: a.termSignal === null ? null : (signalNames.get(a.termSignal) ?? a.termSignal),
          stopStage: a.stopStage,
        });
      }
      // Nobody reads the child's stdin any more: closed, as ChildProcess
      // closes its stdin at exit (an open pipe would hold a descriptor for
      // as long as this object lives).
      if (this.stdin) this.stdin.destroy();
      if (this.#waiter) this.#settle(this.#waiter);
      this.#waiter = null;
      for (const listener of this.#endListeners.splice(0)) listener();
    } else if (kind === 'stop') {
      const pending = this.#stops.get(a);
      this.#stops.delete(a);
      if (pending) pending.resolve(b);
    }
  }

  #settle({ resolve, reject }) {
    if (this.#failure) reject(this.#failure);
    else resolve(this.#result);
  }

  /**
   * Resolves with {exitCode, signal, stopStage} once the execution ended:
   * exitCode for an exit, signal ('SIGKILL', ...) for a death by signal.
   * Rejects (code 'SPAWN') when the payload never started. Idempotent: the
   * same promise, and the same frozen object, every time.
   */
  wait() {
    if (this.#waitPromise === null) {
      this.#waitPromise = new Promise((resolve, reject) => {
        if (this.#ended) this.#settle({ resolve, reject });
        else if (this.#released) reject(fail('STATE', 'the execution was released before it ended'));
        else this.#waiter = { resolve, reject };
      });
    }
    return this.#waitPromise;
  }

  #nativeStop(mode) {
    return new Promise((resolve, reject) => {
      if (this.#released) {
        reject(fail('STATE', 'the execution was released'));
        return;
      }
      const token = this.#nextToken++;
      this.#stops.set(token, { resolve, reject });
      try {
        binding.stop(this.#handle, STOP_MODES[mode], token);
      } catch (e) {
        this.#stops.delete(token);
        reject(e);
      }
    });
  }

  /**
   * Stops the execution and resolves with how it ended: 'graceful',
   * 'forced', 'already-exited', 'still-running' (graceful only, grace
   * elapsed) or 'containment-failed' (the tree outlived the forced kill:
   * reported, never hidden). Idempotent: a repeated stop joins the one in
   * progress, a stronger mode escalates it.
   *
   * mode: 'graceful-then-forced' (default), 'graceful' or 'forced'.
   * graceMs: the grace between SIGTERM and the forced kill for this stop;
   * without it, the request's graceMs (2000 by default).
   */
  stop({ mode = 'graceful-then-forced', graceMs } = {}) {
    if (!Object.prototype.hasOwnProperty.call(STOP_MODES, mode)) {
      return Promise.reject(
        fail('ARGUMENT', `stop mode must be one of ${Object.keys(STOP_MODES).join(', ')}`),
      );
    }
    if (graceMs === undefined) return this.#nativeStop(mode);
    if (!Number.isSafeInteger(graceMs) || graceMs < 1 || graceMs > 3600000) {
      return Promise.reject(fail('ARGUMENT', 'stop graceMs must be an integer in 1..3600000'));
    }
    if (mode === 'forced') {
      return Promise.reject(fail('ARGUMENT', "stop graceMs has no meaning with mode 'forced'"));
    }
    return this.#stopWithGrace(mode, graceMs);
  }

  // The core's grace is the request's; a per-stop grace is the graceful
  // signal now and, once graceMs passed, the forced kill (or, for 'graceful',
  // the verdict 'still-running').
  #stopWithGrace(mode, graceMs) {
    return new Promise((resolve, reject) => {
      let settled = false;
      let forced = false;
      const finish = (r) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(r);
      };
      const failWith = (e) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(e);
      };
      const timer = setTimeout(() => {
        if (mode === 'graceful') {
          finish(this.#ended ? 'graceful' : 'still-running');
          return;
        }
        forced = true;
        this.#nativeStop('forced').then(finish, failWith);
      }, graceMs);
      if (!this.#referenced) timer.unref();
      // An end after our SIGTERM and before any forced kill is graceful,
      // even when the core's own (shorter) grace already said
      // 'still-running'.
      this.#endListeners.push(() => {
        if (!forced) finish('graceful');
      });
      this.#nativeStop('graceful').then((r) => {
        if (r !== 'still-running') finish(r);
      }, failWith);
    });
  }

  /**
   * Frees the native handle. Never signals and never waits (invariant 6): a
   * child still running is left alone, reaped in the background, and killed
   * only if this process exits first. Idempotent. The streams stay open
   * until their peer closes them or they are destroyed.
   */
  release() {
    if (this.#released) return;
    this.#released = true;
    binding.release(this.#handle);
    const released = () => fail('STATE', 'the execution was released before it ended');
    if (this.#waiter) this.#waiter.reject(released());
    this.#waiter = null;
    for (const { reject } of this.#stops.values()) reject(fail('STATE', 'the execution was released'));
    this.#stops.clear();
    this.#endListeners.length = 0;
  }

  /** Keeps this process alive while the execution runs (the default). */
  ref() {
    this.#setRef(true);
    return this;
  }

  /** Lets this process exit while the execution runs; it is then killed at
   * exit, like everything the addon started. */
  unref() {
    this.#setRef(false);
    return this;
  }

  #setRef(ref) {
    this.#referenced = ref;
    if (!this.#released) binding.setRef(this.#handle, ref);
    for (const s of [this.stdin, this.stdout, this.stderr, this.protocol]) {
      if (s) (ref ? s.ref() : s.unref());
    }
  }
}

const spawnExecution = (...args) => Execution[kSpawn](...args);

/* ------------------------------------------------------------ Executor */

function normalizeBackends(backends) {
  let entries;
  if (Array.isArray(backends)) {
    entries = backends.map((name) => [name, {}]);
  } else if (isPlainObject(backends)) {
    entries = Object.entries(backends).map(([name, opts]) => [name, opts ?? {}]);
  } else {
    throw fail(
      'ARGUMENT',
      `options.backends must name the backends to register: an array (['bubblewrap']) or an object of options ({bubblewrap: {bwrap: '/usr/bin/bwrap'}}); built-in: ${BACKENDS.join(', ')}`,
    );
  }
  if (entries.length === 0) {
    throw fail('ARGUMENT', `options.backends is empty: name at least one of ${BACKENDS.join(', ')}`);
  }
  return entries.map(([name, opts]) => {
    if (typeof name !== 'string') throw fail('ARGUMENT', 'a backend name must be a string');
    if (!isPlainObject(opts)) throw fail('ARGUMENT', `options.backends.${name} must be an object of options`);
    const options = {};
    for (const [key, value] of Object.entries(opts)) {
      if (typeof value !== 'string' && !Number.isSafeInteger(value)) {
        throw fail('ARGUMENT', `options.backends.${name}.${key} must be a string or an integer`);
      }
      options[key] = String(value);
    }
    return [name, options];
  });
}

// An executor on this process's own libuv loop, with the backends it was
// given registered: each backend's probe runs now (synchronously: the
// bubblewrap probe starts real sandboxes) and what it proved is kept.
class Executor {
  #handle;

  /**
   * options.backends: ['bubblewrap', 'posix'], or {bubblewrap: {bwrap,
   * helper, staging_dir, uid, gid}, posix: {}}. The bubblewrap helper
   * defaults to the one this package built.
   */
  constructor(options = {}) {
    if (!isPlainObject(options)) throw fail('ARGUMENT', 'options must be a plain object');
    checkMembers(options, ['backends'], 'options');
    const backends = normalizeBackends(options.backends);
    this.#handle = binding.createExecutor();
    try {
      for (const [name, opts] of backends) {
        if (name === 'bubblewrap' && opts.helper === undefined) opts.helper = paths.helper;
        binding.registerBackend(this.#handle, name, opts);
      }
    } catch (e) {
      binding.closeExecutor(this.#handle);
      throw e;
    }
  }

  /** The registered backends' names, in registration order. */
  get backends() {
    return binding.backendNames(this.#handle);
  }

  /** The capability names the backend's probe proved at registration. */
  capabilities(name) {
    return binding.capabilities(this.#handle, name);
  }

  /** Why `capability` was not proved by `name`, or null when it was. */
  missingReason(name, capability) {
    return binding.missingReason(this.#handle, name, capability);
  }

  /** The probe's summary ('' when everything was proved). */
  diagnostic(name) {
    return binding.diagnostic(this.#handle, name);
  }

  /**
   * Launches `request` under `plan` (a Plan, or a plain object in the
   * maelys-executor-plan/1 vocabulary, sealed here). Resolves with the
   * Execution; rejects with the core's result as `code` ('CAPABILITY' for a
   * plan the backend cannot enforce, 'ARGUMENT' for a bad plan or request,
   * 'SPAWN', ...), nothing launched.
   */
  async spawn(plan, request) {
    const sealed = plan instanceof Plan ? plan : new Plan(plan);
    return spawnExecution(this.#handle, planHandles.get(sealed), normalizeRequest(request));
  }

  /** Closes the executor: spawn is refused from now on. Every execution
   * must have been released (code 'STATE' otherwise, and nothing changes);
   * the native executor is destroyed once those release() left running
   * have ended. Idempotent. */
  close() {
    binding.closeExecutor(this.#handle);
  }
}

/** Versions of what was built and loaded. */
const versions = Object.freeze({
  executor: binding.info.version,
  abi: binding.info.abiVersion,
  napi: binding.info.napiVersion,
  uv: binding.info.uvVersion,
});

module.exports = {
  Executor,
  Execution,
  Plan,
  spawnIsolated,
  PLAN_FORMAT,
  IO_MODES: Object.keys(IO_MODES),
  STOP_MODES: Object.keys(STOP_MODES),
  capabilityNames: Object.freeze([...binding.info.capabilityNames]),
  versions,
};
