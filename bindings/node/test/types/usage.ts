// Compiled (never run) by test/types.test.mjs: the declarations describe
// the API as the README uses it, and refuse what the API refuses.

import {
  Executor,
  Plan,
  PLAN_FORMAT,
  spawnIsolated,
  type ExecutionResult,
  type ExecutorError,
  type PlanObject,
  type StopResult,
} from '@maelys/executor';

const plan: PlanObject = {
  format: PLAN_FORMAT,
  mounts: [{ kind: 'ro-bind', source: '/usr', destination: '/usr' }],
  network: { mode: 'none' },
  root: { disposition: 'readonly' },
  limits: { tasks: 64, memory: 256 << 20 },
};

export async function usage(): Promise<void> {
  const executor = new Executor({ backends: { bubblewrap: { bwrap: '/usr/bin/bwrap' } } });
  const caps: string[] = executor.capabilities('bubblewrap');
  const sealed = new Plan(plan);
  const digest: string = sealed.digest;
  const execution = await executor.spawn(sealed, {
    executable: '/usr/bin/cat',
    backend: 'bubblewrap',
    io: 'duplex-stdio',
    env: { LANG: 'C.UTF-8' },
  });
  execution.protocol?.end('x');
  const result: ExecutionResult = await execution.wait();
  const code: number | null = result.exitCode;
  const stopped: StopResult = await execution.stop({ mode: 'graceful', graceMs: 100 });
  execution.unref().ref().release();
  executor.close();

  const run = spawnIsolated(['/bin/true'], { policy: 'ro', env: { A: 'b' }, graceMs: 500 });
  run.stderr.resume();
  const ended = await run.stop();
  const again: number | null = (await run.wait()).exitCode;

  try {
    await executor.spawn(plan, { executable: '/bin/true', backend: 'posix' });
  } catch (e) {
    const code: string = (e as ExecutorError).code;
    void code;
  }

  // @ts-expect-error: the network mode is required
  const noNetwork: PlanObject = { format: PLAN_FORMAT };
  // @ts-expect-error: an unknown io mode
  await executor.spawn(plan, { executable: '/bin/true', backend: 'posix', io: 'pty' });
  // @ts-expect-error: a request names its backend
  await executor.spawn(plan, { executable: '/bin/true' });
  // @ts-expect-error: a policy is 'ro', 'rw' or a plan
  spawnIsolated(['/bin/true'], { policy: 'rwx' });

  void [caps, digest, code, stopped, ended, again, noNetwork];
}
