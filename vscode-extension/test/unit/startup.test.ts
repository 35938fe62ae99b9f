import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { createMessageConnection, InitializeRequest, StreamMessageReader, StreamMessageWriter } from 'vscode-languageserver-protocol/node';
import { endProcess } from '../../src/logic/process';
import { initializeTimeoutMessage, startOutcome, TimeoutError, withTimeout } from '../../src/logic/startup';

test('withTimeout passes results and errors through and rejects with a TimeoutError when nothing comes', async () => {
  assert.equal(await withTimeout(Promise.resolve(7), 1000, 'slow'), 7);
  await assert.rejects(withTimeout(Promise.reject(new Error('refused')), 1000, 'slow'), /refused/);
  const never = new Promise<never>(() => undefined);
  await assert.rejects(withTimeout(never, 20, 'no answer'), (error: unknown) => error instanceof TimeoutError && error.message === 'no answer');
});

test('the time-out message names the setting and what to do', () => {
  const message = initializeTimeoutMessage(30);
  assert.match(message, /did not answer initialize within 30 s and was stopped/);
  assert.match(message, /Open the server log/);
  assert.match(message, /wavecast.initializeTimeout/);
});

test('one outcome per start: a close while starting is a failed start', () => {
  assert.deepEqual(startOutcome(undefined, false, null), { ok: true });
  assert.deepEqual(startOutcome(new TimeoutError('late'), false, null), { ok: false, reason: 'late', timedOut: true });
  assert.deepEqual(startOutcome(new Error('Initialize failed'), false, 'protocol mismatch'), { ok: false, reason: 'protocol mismatch', timedOut: false });
  assert.deepEqual(startOutcome(new Error('disposed'), true, null), { ok: false, reason: 'it exited while starting (disposed)', timedOut: false });
  assert.equal(startOutcome(undefined, true, null).ok, false);
  assert.deepEqual(startOutcome(new Error('disposed'), true, 'Pending response rejected', "wavecast: error: GPU file '/x.json' does not exist"), {
    ok: false,
    reason: "it exited while starting: wavecast: error: GPU file '/x.json' does not exist",
    timedOut: false,
  });
});

test('a daemon that never answers initialize: the request times out and the process is ended', { timeout: 15_000 }, async () => {
  // Reads stdin forever, never writes: a hung daemon.
  const child = spawn(process.execPath, ['-e', 'process.stdin.resume(); setInterval(() => {}, 1000);'], { stdio: ['pipe', 'pipe', 'ignore'] });
  const connection = createMessageConnection(new StreamMessageReader(child.stdout!), new StreamMessageWriter(child.stdin!));
  connection.listen();
  try {
    const initialize = connection.sendRequest(InitializeRequest.type, { processId: null, rootUri: null, capabilities: {} });
    initialize.catch(() => undefined);
    await assert.rejects(withTimeout(initialize, 300, initializeTimeoutMessage(0.3)), TimeoutError);
    assert.equal(child.exitCode, null, 'still running until ended');
    await endProcess(child, 0);
    assert.ok(child.exitCode !== null || child.signalCode !== null);
    assert.equal(child.signalCode, 'SIGTERM');
  } finally {
    connection.dispose();
    child.kill('SIGKILL');
  }
});

test('endProcess leaves a process that exits within the grace period alone', { timeout: 15_000 }, async () => {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => process.exit(3), 100);'], { stdio: 'ignore' });
  await new Promise((resolve) => child.once('spawn', resolve));
  await endProcess(child, 5000);
  assert.equal(child.exitCode, 3);
  await endProcess(child, 0); // already gone: returns at once
});
