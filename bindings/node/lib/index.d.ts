// Type declarations of @maelys/executor.

import type { Duplex, Readable } from 'node:stream';
import type { Socket } from 'node:net';

/** The JSON plan vocabulary the core reads (maelys-executor-plan/1). */
export declare const PLAN_FORMAT: 'maelys-executor-plan/1';

/**
 * Errors are plain `Error` objects: `code` is the core's result name, the
 * message its diagnostic (naming the member, path or capability at fault).
 */
export type ResultCode =
  | 'ARGUMENT'
  | 'MEMORY'
  | 'IO'
  | 'STATE'
  | 'DENIED'
  | 'UNSUPPORTED'
  | 'NOT_FOUND'
  | 'SEALED'
  | 'CAPABILITY'
  | 'SPAWN';

export interface ExecutorError extends Error {
  code: ResultCode;
  /** For code 'SPAWN' from wait(): the launch step that failed. */
  step?: string;
  /** For code 'SPAWN' from wait(): the errno of that step. */
  errno?: number;
}

export type CapabilityName =
  | 'filesystem_read'
  | 'filesystem_write'
  | 'filesystem_deny'
  | 'network_none'
  | 'network_namespace'
  | 'network_mediated_fd4'
  | 'network_mediated_egress'
  | 'root_readonly'
  | 'root_ephemeral_write'
  | 'process_tree'
  | 'process_confinement'
  | 'seccomp'
  | 'user_namespace'
  | 'pid_namespace'
  | 'mount_namespace'
  | 'tmpfs_size'
  | 'disable_userns'
  | 'unprivileged'
  | 'limit_tasks'
  | 'limit_memory';

/* ------------------------------------------------------------------ plans */

export type PlanMount =
  | {
      kind: 'ro-bind' | 'bind';
      source: string;
      destination: string;
      missing?: 'fail' | 'skip' | 'create';
    }
  | { kind: 'tmpfs'; destination: string; size: number }
  | { kind: 'proc' | 'dev' | 'dir'; destination: string }
  | { kind: 'symlink'; target: string; destination: string };

export interface PlanRule {
  path: string;
  access: 'read' | 'write' | 'deny' | 'protect-create';
  scope: 'recursive-directory' | 'literal-file' | 'literal-directory';
}

export interface PlanNetwork {
  mode: 'inherit' | 'none' | 'mediated' | 'external-channel';
  destinations?: { host: string; port: number }[];
  mediator?: 'maelys-egress.fd4' | 'maelys-egress.proxy';
}

export type RlimitValue = number | 'unlimited';

/**
 * A plan as a plain object in the maelys-executor-plan/1 vocabulary. The
 * core reads it strictly: an unknown member, a wrong type or an invalid
 * value is refused with its JSON path ("$.rules[0].access"). Always name
 * the network mode.
 */
export interface PlanObject {
  format: 'maelys-executor-plan/1';
  mounts?: PlanMount[];
  rules?: PlanRule[];
  network: PlanNetwork;
  root?: { disposition: 'host' | 'readonly' | 'ephemeral-write'; scratch?: number };
  required_capabilities?: CapabilityName[];
  process_tree_required?: boolean;
  rlimits?: Partial<
    Record<
      'cpu' | 'fsize' | 'data' | 'stack' | 'core' | 'nofile' | 'as' | 'nproc' | 'memlock',
      { soft: RlimitValue; hard: RlimitValue }
    >
  >;
  /** Sandbox-wide ceilings: tasks alive at once, memory in bytes. */
  limits?: { tasks?: number; memory?: number };
  decision_digest?: string;
  channels?: { fd: number; name: string }[];
  /** When present, the rules must hash to exactly this digest. */
  digest?: string;
}

/** A plan read and sealed by the core; immutable. */
export declare class Plan {
  constructor(plan: PlanObject);
  /** "sha256:<64 hex>" over every rule and the decision digest. */
  readonly digest: string;
  /** What a backend must have proved to enforce it. */
  readonly requiredCapabilities: readonly CapabilityName[];
  /** The sealed plan as the core writes it, digest included. */
  toJSON(): PlanObject & { digest: string };
}

/* -------------------------------------------------------------- requests */

export type IoMode = 'captured' | 'duplex-stdio' | 'isolated-duplex' | 'inherit';
export type StderrMode = 'inherit' | 'capture' | 'null';

/** One launch. Unknown members are refused. */
export interface ExecutionRequest {
  /** Absolute path of the program; PATH is never searched. */
  executable: string;
  /** The whole argv, argv[0] included (default: [executable]). */
  argv?: string[];
  /** Exactly this environment; omitted or null: an empty one. */
  env?: Record<string, string> | null;
  /** The payload's working directory (default "/"). */
  cwd?: string;
  /** Default 'captured', as in C. */
  io?: IoMode;
  /** The protocol descriptor of 'isolated-duplex' (default 3). */
  protocolFd?: number;
  /** Default 'inherit'. */
  stderr?: StderrMode;
  /** The backend that enforces the plan. Required. */
  backend: string;
  /** For an ephemeral-write root: equal to the plan's scratch. */
  scratchSize?: number;
  /** Only "local" is accepted. */
  platform?: string;
  /** Grace between SIGTERM and the forced kill (default 2000). */
  graceMs?: number;
  /** How long a forced kill may take before containment failure (2000). */
  forceMs?: number;
  /** Where the receipt is written (absolute; outside anything writable). */
  receiptDir?: string;
  /** The identity a uid-0 host runs the payload under. */
  identity?: { uid: number; gid: number };
}

/* ------------------------------------------------------------ executions */

export interface ExecutionResult {
  /** The exit status, or null when a signal ended it. */
  readonly exitCode: number | null;
  /** The signal's name ('SIGTERM', ...), or null. */
  readonly signal: NodeJS.Signals | null;
  /** Which stage of a stop ended it, or null when it ended on its own. */
  readonly stopStage: 'graceful' | 'forced' | null;
}

export type StopMode = 'graceful' | 'forced' | 'graceful-then-forced';
export type StopResult =
  | 'already-exited'
  | 'graceful'
  | 'forced'
  | 'still-running'
  | 'containment-failed';

export interface StopOptions {
  /** Default 'graceful-then-forced'. */
  mode?: StopMode;
  /** The grace of this stop (default: the request's graceMs). */
  graceMs?: number;
}

/** A receipt (maelys-executor-receipt/1); see the core's documentation. */
export interface Receipt {
  format: string;
  execution_id: string;
  backend: { name: string; capabilities: CapabilityName[] };
  plan_digest: string;
  decision_digest: string | null;
  executable: string;
  argv_digest: string;
  started_at: string;
  ended_at: string;
  duration_ms: number;
  outcome: Record<string, unknown>;
  stop: Record<string, unknown>;
  resource_usage: Record<string, number>;
  [member: string]: unknown;
}

/** One launch, a handle on this process's loop (made by Executor#spawn). */
export declare class Execution {
  private constructor();
  readonly id: string;
  /** The launcher's host pid; -1 once reaped or released. */
  readonly pid: number;
  /** io 'captured': the payload's stdin (destroyed when it ends). */
  readonly stdin: Socket | null;
  /** io 'captured': the payload's stdout. */
  readonly stdout: Socket | null;
  /** stderr 'capture': the payload's stderr. */
  readonly stderr: Socket | null;
  /** io 'duplex-stdio' or 'isolated-duplex': the protocol socket. */
  readonly protocol: Socket | null;
  readonly ended: boolean;
  readonly receipt: Receipt | null;
  readonly receiptPath: string | null;
  /** Idempotent: the same promise and object every time. Rejects with code
   * 'SPAWN' when the payload never started. */
  wait(): Promise<ExecutionResult>;
  /** Idempotent; bounded by the grace plus the force budget. */
  stop(options?: StopOptions): Promise<StopResult>;
  /** Frees the handle; never signals, never waits. */
  release(): void;
  ref(): this;
  unref(): this;
}

/* -------------------------------------------------------------- executor */

export type BackendName = 'posix' | 'bubblewrap';

export interface BubblewrapOptions {
  bwrap?: string;
  helper?: string;
  staging_dir?: string;
  uid?: string | number;
  gid?: string | number;
}

export interface ExecutorOptions {
  backends:
    | BackendName[]
    | { posix?: Record<string, never>; bubblewrap?: BubblewrapOptions };
}

export declare class Executor {
  /** Registers the backends now; each probe runs synchronously. */
  constructor(options: ExecutorOptions);
  readonly backends: string[];
  capabilities(backend: string): CapabilityName[];
  missingReason(backend: string, capability: CapabilityName): string | null;
  diagnostic(backend: string): string;
  spawn(plan: Plan | PlanObject, request: ExecutionRequest): Promise<Execution>;
  close(): void;
}

/* ---------------------------------------------------------- spawnIsolated */

export interface IsolatedOptions {
  /** The CLI's built-in profiles, or a plan written to a private file. */
  policy: 'ro' | 'rw' | PlanObject | Plan;
  /** Default: a fresh private directory, removed at the end. */
  workspace?: string;
  /** The payload's only variables beyond the profile's base. */
  env?: Record<string, string>;
  /** The CLI's --grace (default 2000). */
  graceMs?: number;
  /** Default: a private directory, read into `receipt` at the end. */
  receiptDir?: string;
  /** maelys-warden's state (its receipt signing key); default
   * $XDG_STATE_HOME/maelys, else ~/.local/state/maelys. */
  stateDir?: string;
  /** maelys-warden (default: the one this package built). */
  warden?: string;
  /** Where the private directories are made (default os.tmpdir()). */
  base?: string;
}

export interface IsolatedResult {
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface IsolatedRun {
  /** Bytes to and from the payload's fd 3. The caller drains it. */
  readonly protocol: Duplex;
  /** The payload's stdout and stderr and the CLI's failures. The caller
   * drains it. */
  readonly stderr: Readable;
  readonly pid: number;
  readonly workspace: string;
  /** Once the launcher exited; null before, and when the CLI refused
   * before launching anything (a launch failure has one). */
  readonly receipt: Receipt | null;
  wait(): Promise<IsolatedResult>;
  stop(): Promise<IsolatedResult>;
}

export declare function spawnIsolated(argv: string[], options: IsolatedOptions): IsolatedRun;

export declare const IO_MODES: readonly IoMode[];
export declare const STOP_MODES: readonly StopMode[];
export declare const capabilityNames: readonly CapabilityName[];
export declare const versions: {
  readonly executor: string;
  readonly abi: number;
  readonly napi: number;
  readonly uv: string;
};
