import { Executor, PLAN_FORMAT, spawnIsolated } from '@maelys/executor';

// 1. The addon: an executor on this process's own loop, a plan as a plain
//    object (maelys-executor-plan/1, sealed by the core), `cat` in a
//    bubblewrap sandbox with its stdin and stdout one socket.
const executor = new Executor({ backends: ['bubblewrap'] });
const plan = {
  format: PLAN_FORMAT,
  mounts: [
    { kind: 'ro-bind', source: '/usr', destination: '/usr' },
    { kind: 'symlink', target: 'usr/bin', destination: '/bin' }, // merged /usr
    { kind: 'symlink', target: 'usr/lib', destination: '/lib' },
    { kind: 'symlink', target: 'usr/lib64', destination: '/lib64' },
    { kind: 'proc', destination: '/proc' },
    { kind: 'dev', destination: '/dev' },
  ],
  network: { mode: 'none' },
  root: { disposition: 'readonly' },
  process_tree_required: true,
};
const execution = await executor.spawn(plan, {
  executable: '/usr/bin/cat',
  backend: 'bubblewrap',
  io: 'duplex-stdio',
});
execution.protocol.end('hello from the sandbox\n');
for await (const chunk of execution.protocol) process.stdout.write(chunk);
console.log(await execution.wait()); // { exitCode: 0, signal: null, stopStage: null }
console.log(execution.receipt.plan_digest);
execution.release();
executor.close();

// 2. spawnIsolated(): maelys-warden's read-only profile, the protocol on the
//    payload's fd 3 and plain pipes on this side.
const run = spawnIsolated(['/bin/sh', '-c', 'exec cat <&3 >&3'], { policy: 'ro' });
run.stderr.pipe(process.stderr);
run.protocol.end('hello over fd 3\n');
for await (const chunk of run.protocol) process.stdout.write(chunk);
console.log(await run.wait()); // { exitCode: 0, signal: null }
console.log(run.receipt.backend.name);
