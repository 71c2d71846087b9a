// The executor's shape: registration and what the probes proved, sealed
// plans, and every refusal (nothing launched, the thing at fault named).

import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';

import maelys from '../lib/index.js';
import { binding } from '../lib/binding.js';
import {
  Executor, Plan, PLAN_FORMAT, marker, needBubblewrap, packageDir, sandboxPlan, survivors,
  tempDir, unconfinedPlan,
} from './support/helpers.mjs';

function rejectsWith(promise, code, pattern) {
  return assert.rejects(promise, (e) => {
    assert.ok(e instanceof Error, 'an Error');
    assert.equal(e.code, code, e.message);
    assert.match(e.message, pattern);
    return true;
  });
}

test('registration: backends in order, posix proves nothing and says why', () => {
  const ex = new Executor({ backends: ['posix', 'bubblewrap'] });
  assert.deepEqual(ex.backends, ['posix', 'bubblewrap']);
  assert.deepEqual(ex.capabilities('posix'), []);
  assert.match(ex.missingReason('posix', 'filesystem_read'), /unconfined/);
  assert.match(ex.diagnostic('posix'), /unconfined/);
  for (const cap of ex.capabilities('bubblewrap')) {
    assert.ok(maelys.capabilityNames.includes(cap), cap);
    assert.equal(ex.missingReason('bubblewrap', cap), null);
  }
  assert.throws(() => ex.capabilities('seatbelt'), { code: 'NOT_FOUND', message: /seatbelt/ });
  assert.throws(() => ex.missingReason('posix', 'teleport'), { code: 'ARGUMENT', message: /teleport/ });
  ex.close();
});

test('bubblewrap proves the sandbox capabilities the suite relies on', (t) => {
  if (!needBubblewrap(t)) return;
  const ex = new Executor({ backends: { bubblewrap: {} } });
  for (const cap of ['filesystem_read', 'filesystem_write', 'network_none', 'root_readonly',
    'process_tree', 'seccomp', 'unprivileged']) {
    assert.ok(ex.capabilities('bubblewrap').includes(cap), cap);
  }
  ex.close();
});

test('bad executor options are refused, naming what is wrong', () => {
  assert.throws(() => new Executor(), { code: 'ARGUMENT', message: /options\.backends/ });
  assert.throws(() => new Executor({ backends: [] }), { code: 'ARGUMENT', message: /empty/ });
  assert.throws(() => new Executor({ backends: ['posix'], backend: 'x' }),
    { code: 'ARGUMENT', message: /options\.backend: unknown member/ });
  assert.throws(() => new Executor({ backends: ['seatbelt'] }), { code: 'NOT_FOUND', message: /seatbelt/ });
  assert.throws(() => new Executor({ backends: { posix: { color: 'blue' } } }),
    { code: 'ARGUMENT', message: /posix.*color/ });
  assert.throws(() => new Executor({ backends: { bubblewrap: { jail: '1' } } }),
    { code: 'ARGUMENT', message: /unknown option 'jail'/ });
});

test('a plan is sealed by the core: digest, required capabilities, JSON form', () => {
  const object = sandboxPlan({ workspace: packageDir });
  const a = new Plan(object);
  const b = new Plan(object);
  assert.match(a.digest, /^sha256:[0-9a-f]{64}$/);
  assert.equal(a.digest, b.digest);
  assert.ok(a.requiredCapabilities.includes('network_none'));
  assert.ok(a.requiredCapabilities.includes('filesystem_read'));
  const json = a.toJSON();
  assert.equal(json.format, PLAN_FORMAT);
  assert.equal(json.digest, a.digest);
  // The sealed form reads back to the same digest (it is verified).
  assert.equal(new Plan(json).digest, a.digest);
  assert.throws(() => new Plan({ ...json, rules: [] }), { code: 'ARGUMENT', message: /\$\.digest/ });
  assert.notEqual(new Plan({ ...object, network: { mode: 'inherit' } }).digest, a.digest);
});

test('a bad plan object rejects with the member named; nothing is launched', async () => {
  const ex = new Executor({ backends: ['posix'] });
  const request = { executable: '/bin/true', backend: 'posix' };
  const before = binding.stats().records;
  await rejectsWith(ex.spawn({ ...unconfinedPlan, rules: [{ path: '/etc', acess: 'read', scope: 'literal-file' }] }, request),
    'ARGUMENT', /\$\.rules\[0\]\.acess: unknown member/);
  await rejectsWith(ex.spawn({ ...unconfinedPlan, network: { mode: 'nonee' } }, request),
    'ARGUMENT', /\$\.network\.mode/);
  await rejectsWith(ex.spawn({ network: { mode: 'none' } }, request), 'ARGUMENT', /\$\.format/);
  // The network mode is never implied (ABI 11).
  await rejectsWith(ex.spawn({ format: PLAN_FORMAT }, request), 'ARGUMENT', /network/);
  await rejectsWith(ex.spawn({ ...unconfinedPlan, mounts: [{ kind: 'tmpfs', destination: '/tmp' }] }, request),
    'ARGUMENT', /\$\.mounts\[0\].*size/);
  await rejectsWith(ex.spawn({ ...unconfinedPlan, rules: [{ path: 'relative', access: 'read', scope: 'literal-file' }] }, request),
    'ARGUMENT', /\$\.rules\[0\]/);
  // What JSON would silently drop is refused before the core sees it.
  await rejectsWith(ex.spawn({ ...unconfinedPlan, root: undefined }, request), 'ARGUMENT', /\$\.root: a undefined/);
  await rejectsWith(ex.spawn({ ...unconfinedPlan, rules: [() => 1] }, request), 'ARGUMENT', /\$\.rules\[0\]: a function/);
  await rejectsWith(ex.spawn({ ...unconfinedPlan, rlimits: { nofile: { soft: Infinity, hard: 1 } } }, request),
    'ARGUMENT', /\$\.rlimits\.nofile\.soft/);
  await rejectsWith(ex.spawn({ ...unconfinedPlan, limits: { threads: 4 } }, request),
    'ARGUMENT', /\$\.limits\.threads: unknown member/);
  await rejectsWith(ex.spawn('{"format": "maelys-executor-plan/1"}', request), 'ARGUMENT', /plain object/);
  assert.equal(binding.stats().records, before, 'no execution was created');
  ex.close();
});

test('a plan the backend cannot enforce rejects with the missing capability named', async (t) => {
  const token = marker('refused');
  const ex = new Executor({ backends: ['posix', 'bubblewrap'] });
  const request = (backend) => ({ executable: '/bin/sleep', argv: ['sleep', '30', token], backend });
  // Unconfined posix cannot enforce a sandbox plan: each missing capability
  // is named, with the probe's reason.
  await rejectsWith(ex.spawn(sandboxPlan({ workspace: packageDir }), request('posix')),
    'CAPABILITY', /backend 'posix' did not prove .*filesystem_read.*network_none.*unconfined/);
  // And a capability bubblewrap does not offer (the egress mediator's fd 4).
  if (needBubblewrap(t)) {
    const mediated = {
      ...sandboxPlan({ workspace: packageDir }),
      network: { mode: 'mediated', mediator: 'maelys-egress.fd4', destinations: [{ host: 'example.org', port: 443 }] },
    };
    await rejectsWith(ex.spawn(mediated, request('bubblewrap')), 'CAPABILITY', /network_mediated_fd4/);
  }
  assert.deepEqual(survivors(token), [], 'nothing was launched');
  ex.close();
});

test('a bad request is refused with the member named', async () => {
  const ex = new Executor({ backends: ['posix'] });
  const ok = { executable: '/bin/true', backend: 'posix' };
  await rejectsWith(ex.spawn(unconfinedPlan, { ...ok, bakend: 'posix' }), 'ARGUMENT', /request\.bakend: unknown member/);
  await rejectsWith(ex.spawn(unconfinedPlan, { backend: 'posix' }), 'ARGUMENT', /request\.executable is required/);
  await rejectsWith(ex.spawn(unconfinedPlan, { executable: '/bin/true' }), 'ARGUMENT', /request\.backend is required/);
  await rejectsWith(ex.spawn(unconfinedPlan, { ...ok, executable: 'true' }), 'ARGUMENT', /request\.executable: .*absolute/);
  await rejectsWith(ex.spawn(unconfinedPlan, { ...ok, io: 'pty' }), 'ARGUMENT', /request\.io must be one of/);
  await rejectsWith(ex.spawn(unconfinedPlan, { ...ok, env: { A: 1 } }), 'ARGUMENT', /request\.env\.A must be a string/);
  await rejectsWith(ex.spawn(unconfinedPlan, { ...ok, env: { 'A=B': 'x' } }), 'ARGUMENT', /request\.env\.A=B/);
  await rejectsWith(ex.spawn(unconfinedPlan, { ...ok, argv: ['a', 'b\0c'] }), 'ARGUMENT', /request\.argv\[1\] contains a NUL/);
  await rejectsWith(ex.spawn(unconfinedPlan, { ...ok, platform: 'oci' }), 'UNSUPPORTED', /request\.platform: .*oci/);
  await rejectsWith(ex.spawn(unconfinedPlan, { ...ok, backend: 'bubblewrap' }), 'NOT_FOUND', /bubblewrap/);
  await rejectsWith(ex.spawn(unconfinedPlan, { ...ok, graceMs: 0 }), 'ARGUMENT', /request\.graceMs/);
  ex.close();
});

test('a receipt directory the sandbox could write is refused (invariant 13)', async (t) => {
  if (!needBubblewrap(t)) return;
  const ex = new Executor({ backends: ['bubblewrap'] });
  const ws = tempDir('receipt-ws');
  await rejectsWith(
    ex.spawn(sandboxPlan({ workspace: ws, writable: true }),
      { executable: '/bin/true', backend: 'bubblewrap', receiptDir: path.join(ws, 'receipts') }),
    'DENIED', /receipt directory .* writable/);
  ex.close();
});

test('close() refuses while executions are held, then works; spawn after close is refused', async () => {
  const ex = new Executor({ backends: ['posix'] });
  const e = await ex.spawn(unconfinedPlan, { executable: '/bin/true', backend: 'posix', io: 'inherit' });
  assert.throws(() => ex.close(), { code: 'STATE', message: /not released/ });
  await e.wait();
  e.release();
  ex.close();
  ex.close();
  await rejectsWith(ex.spawn(unconfinedPlan, { executable: '/bin/true', backend: 'posix' }), 'STATE', /closed/);
});
