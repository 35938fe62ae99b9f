// Every transition of the daemon's lifecycle, with a scripted clock and timers.
import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import type { ClientPhase } from '../../src/logic/annotations';
import { DaemonLifecycle, startFailure, type Failure, type StartReport, type Timers } from '../../src/logic/daemonLifecycle';
import { REQUIRED_METHODS } from '../../src/logic/protocol';
import { RestartPolicy } from '../../src/logic/restartPolicy';
import { TimeoutError } from '../../src/logic/startup';

const CAPABLE = { wavecast: { protocol_version: 2, methods: [...REQUIRED_METHODS] } };
const STARTED: StartReport = { error: undefined, lastWords: null, capabilities: CAPABLE };

class FakeTimers implements Timers {
  readonly pending = new Map<number, { callback: () => void; ms: number }>();
  private next = 0;
  set(callback: () => void, ms: number): unknown {
    this.next += 1;
    this.pending.set(this.next, { callback, ms });
    return this.next;
  }
  clear(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  /** Runs every pending timer, as if their time had come. */
  fire(): void {
    const due = [...this.pending.values()];
    this.pending.clear();
    due.forEach((t) => t.callback());
  }
}

function lifecycle(options: { maxRestarts?: number; initializeTimeout?: number } = {}) {
  let now = 0;
  const phases: ClientPhase[] = [];
  const timedOut: Failure[] = [];
  const timers = new FakeTimers();
  const policy = new RestartPolicy(options.maxRestarts ?? 3, 180_000, () => (now += 1000));
  const machine = new DaemonLifecycle(
    {
      changed: (phase) => phases.push(phase),
      initializeTimeoutSeconds: () => options.initializeTimeout ?? 30,
      restartTimedOut: (failure) => timedOut.push(failure),
    },
    policy,
    timers,
  );
  return { machine, phases, timedOut, timers };
}

/** A lifecycle whose first client is running; returns its launch. */
function running(options: Parameters<typeof lifecycle>[0] = {}) {
  const setup = lifecycle(options);
  const launch = setup.machine.connect();
  assert.equal(setup.machine.beginStart(launch), true);
  assert.equal(setup.machine.settleStart(launch, STARTED).kind, 'running');
  return { ...setup, launch };
}

test('a start: stopped, then finding the daemon and starting it read as starting, then running', () => {
  const { machine, phases } = lifecycle();
  assert.equal(machine.phase, 'stopped');
  const launch = machine.connect();
  assert.deepEqual(machine.state, { kind: 'connecting', launch });
  assert.equal(machine.beginStart(launch), true);
  assert.deepEqual(machine.state, { kind: 'starting', launch, closedWhileStarting: false, initializeError: null });
  assert.deepEqual(machine.settleStart(launch, STARTED), { kind: 'running', protocol: 'wavecast protocol 2' });
  assert.deepEqual(machine.state, { kind: 'running', launch });
  assert.deepEqual(phases, ['starting', 'starting', 'running']);
  assert.equal(machine.failure, null);
});

test('an untrusted workspace is untrusted until a start; stopping keeps it untrusted', () => {
  const { machine } = lifecycle();
  machine.untrusted();
  assert.equal(machine.phase, 'untrusted');
  machine.stop();
  assert.equal(machine.phase, 'untrusted');
  assert.equal(machine.settingsNeedRestart(), false);
  assert.equal(machine.tokenChanged(true), false);
  machine.connect();
  assert.equal(machine.phase, 'starting');
});

test('a newer attempt, or a stop, supersedes one still finding the daemon', () => {
  const { machine } = lifecycle();
  const first = machine.connect();
  const second = machine.connect();
  assert.equal(machine.beginStart(first), false);
  assert.equal(machine.connectFailed(first, 'not found'), false);
  assert.equal(machine.isCurrent(first), false);
  assert.equal(machine.isCurrent(second), true);
  machine.stop();
  assert.equal(machine.beginStart(second), false);
  assert.equal(machine.phase, 'stopped');
});

test('no daemon found: failed with the reason', () => {
  const { machine } = lifecycle();
  const launch = machine.connect();
  assert.equal(machine.connectFailed(launch, 'The wavecast daemon was not found.'), true);
  assert.equal(machine.phase, 'failed');
  assert.equal(machine.failure, 'The wavecast daemon was not found.');
});

test('a start that fails: the reason, and what to offer', () => {
  const { machine } = lifecycle();
  const launch = machine.connect();
  machine.beginStart(launch);
  const settled = machine.settleStart(launch, { ...STARTED, error: new Error('spawn /usr/bin/wavecast EACCES') });
  assert.deepEqual(settled, {
    kind: 'failed',
    failure: { message: 'The wavecast daemon did not start: spawn /usr/bin/wavecast EACCES', remedy: 'restart' },
  });
  assert.equal(machine.failure, 'The wavecast daemon did not start: spawn /usr/bin/wavecast EACCES');
  // The failed client's close comes afterwards: not a crash.
  assert.equal(machine.closed(launch).kind, 'notCurrent');
  assert.equal(machine.phase, 'failed');
});

test('initialize times out: the time-out message, offering a restart', () => {
  const { machine } = lifecycle();
  const launch = machine.connect();
  machine.beginStart(launch);
  const settled = machine.settleStart(launch, { ...STARTED, error: new TimeoutError('did not answer initialize within 30 s') });
  assert.deepEqual(settled, { kind: 'failed', failure: { message: 'did not answer initialize within 30 s', remedy: 'restart' } });
});

test('a refused token offers Set Remote Token', () => {
  const { machine } = lifecycle();
  const launch = machine.connect();
  machine.beginStart(launch);
  machine.initializeFailed(launch, 'authentication failed: wrong token');
  const settled = machine.settleStart(launch, { ...STARTED, error: new Error('Initialize failed') });
  assert.deepEqual(settled, {
    kind: 'failed',
    failure: {
      message: 'The wavecast daemon refused the connection: authentication failed: wrong token. Set the right token with "wavecast: Set Remote Token".',
      remedy: 'remoteToken',
    },
  });
});

test('the daemon refusing our protocol version, or lacking methods, offers settings and the log, not a restart', () => {
  const refusal = 'wavecast protocol version mismatch: the daemon speaks 1, the client 3. Update the wavecast daemon.';
  const { machine } = lifecycle();
  let launch = machine.connect();
  machine.beginStart(launch);
  machine.initializeFailed(launch, refusal);
  assert.deepEqual(machine.settleStart(launch, { ...STARTED, error: new Error('Initialize failed') }), {
    kind: 'failed',
    failure: { message: refusal, remedy: 'settings' },
  });

  launch = machine.connect();
  machine.beginStart(launch);
  const settled = machine.settleStart(launch, { ...STARTED, capabilities: { wavecast: { protocol_version: 2, methods: ['wavecast/listGpus'] } } });
  assert.equal(settled.kind, 'failed');
  assert.match(settled.kind === 'failed' ? settled.failure.message : '', /^The wavecast daemon lacks wavecast\/setTargets, .*Update the wavecast daemon/);
  assert.equal(settled.kind === 'failed' && settled.failure.remedy, 'settings');
});

test('an initialize error of an older attempt is not this start’s reason', () => {
  const { machine } = lifecycle();
  const old = machine.connect();
  const launch = machine.connect();
  machine.beginStart(launch);
  machine.initializeFailed(old, 'wavecast protocol version mismatch');
  assert.deepEqual(machine.state, { kind: 'starting', launch, closedWhileStarting: false, initializeError: null });
});

test('a close while starting is one failed start with the daemon’s last words, never a restart', () => {
  const { machine, timers } = lifecycle();
  const launch = machine.connect();
  machine.beginStart(launch);
  const closed = machine.closed(launch);
  assert.deepEqual(closed, { kind: 'exitedWhileStarting', decision: { restart: false, crashesInWindow: 0, message: 'The wavecast daemon exited while starting.' } });
  assert.equal(machine.phase, 'starting');
  // Even when start() itself resolved.
  const settled = machine.settleStart(launch, { ...STARTED, lastWords: "wavecast: error: GPU file '/nope.json' does not exist" });
  assert.deepEqual(settled, {
    kind: 'failed',
    failure: { message: "The wavecast daemon did not start: it exited while starting: wavecast: error: GPU file '/nope.json' does not exist", remedy: 'restart' },
  });
  assert.equal(timers.pending.size, 0);
});

test('a crash while running restarts with the policy’s budget and comes back running', () => {
  const { machine, launch, timers, phases } = running({ initializeTimeout: 5 });
  const closed = machine.closed(launch);
  assert.equal(closed.kind, 'restarting');
  assert.deepEqual(closed.decision, {
    restart: true,
    crashesInWindow: 1,
    message: 'The wavecast daemon stopped unexpectedly; restarting it (attempt 1 of 3).',
  });
  assert.deepEqual(machine.state, { kind: 'restarting', launch });
  assert.equal(machine.phase, 'starting');
  assert.deepEqual([...timers.pending.values()].map((t) => t.ms), [5000], 'the restart is watched for the initialize time-out');
  assert.equal(machine.clientRunning(launch), true);
  assert.equal(machine.phase, 'running');
  assert.equal(timers.pending.size, 0, 'back in time: the watch is gone');
  assert.deepEqual(phases.slice(-2), ['starting', 'running']);
  // Running again is only news after a restart.
  assert.equal(machine.clientRunning(launch), false);
});

test('a restart that does not come back within the initialize time-out fails', () => {
  const { machine, launch, timers, timedOut } = running({ initializeTimeout: 7 });
  machine.closed(launch);
  timers.fire();
  assert.equal(machine.phase, 'failed');
  assert.equal(timedOut.length, 1);
  assert.equal(timedOut[0].remedy, 'restart');
  assert.match(timedOut[0].message, /did not answer initialize within 7 s and was stopped/);
  assert.equal(machine.failure, timedOut[0].message);
  // The stopped client's late arrival changes nothing.
  assert.equal(machine.clientRunning(launch), false);
  assert.equal(machine.phase, 'failed');
});

test('a second crash while restarting re-arms one watch', () => {
  const { machine, launch, timers } = running();
  machine.closed(launch);
  assert.equal(machine.closed(launch).kind, 'restarting');
  assert.equal(timers.pending.size, 1);
});

test('too many crashes give up: failed until the user restarts, who gets a fresh budget', () => {
  const { machine, launch, timers } = running({ maxRestarts: 2 });
  assert.equal(machine.closed(launch).kind, 'restarting');
  machine.clientRunning(launch);
  assert.equal(machine.closed(launch).kind, 'restarting');
  machine.clientRunning(launch);
  const gaveUp = machine.closed(launch);
  assert.equal(gaveUp.kind, 'gaveUp');
  assert.equal(gaveUp.decision.restart, false);
  assert.match(gaveUp.decision.message, /crashed 3 times in 3 minutes and was not restarted again/);
  assert.equal(machine.phase, 'failed');
  assert.equal(machine.failure, gaveUp.decision.message);
  assert.equal(timers.pending.size, 0);

  machine.userRestart();
  assert.equal(machine.phase, 'stopped');
  const next = machine.connect();
  machine.beginStart(next);
  machine.settleStart(next, STARTED);
  assert.equal(machine.closed(next).kind, 'restarting', 'the budget is fresh');
  assert.equal(machine.closed(launch).kind, 'notCurrent', 'the old client is nobody’s crash');
});

test('stop: the client is let go of; its close, start or running are ignored', () => {
  const { machine, launch, timers } = running();
  machine.closed(launch);
  machine.stop();
  assert.equal(machine.phase, 'stopped');
  assert.equal(timers.pending.size, 0, 'a stop ends the restart watch');
  assert.deepEqual(machine.closed(launch), {
    kind: 'notCurrent',
    decision: { restart: false, crashesInWindow: 0, message: 'The wavecast daemon was stopped.' },
  });
  assert.equal(machine.clientRunning(launch), false);
  assert.deepEqual(machine.settleStart(launch, STARTED), { kind: 'superseded' });
  assert.equal(machine.phase, 'stopped');
});

test('a start stopped while awaiting its client is superseded, not reported', () => {
  const { machine } = lifecycle();
  const launch = machine.connect();
  machine.beginStart(launch);
  machine.stop();
  assert.deepEqual(machine.settleStart(launch, { ...STARTED, error: new Error('Connection got disposed.') }), { kind: 'superseded' });
  assert.equal(machine.phase, 'stopped');
});

test('fail: from any state, and it ends the current client', () => {
  const { machine, launch } = running();
  machine.fail('did not answer initialize');
  assert.equal(machine.failure, 'did not answer initialize');
  assert.equal(machine.isCurrent(launch), false);
  assert.equal(machine.closed(launch).kind, 'notCurrent');
});

test('settings that are the daemon’s command line restart it unless untrusted; a new token reconnects only a remote daemon', () => {
  const { machine } = running();
  assert.equal(machine.settingsNeedRestart(), true);
  assert.equal(machine.tokenChanged(true), true);
  assert.equal(machine.tokenChanged(false), false);
  machine.fail('x');
  assert.equal(machine.settingsNeedRestart(), true, 'a failed daemon restarts with the fixed settings');
});

test('startFailure keeps the daemon’s own words for a protocol refusal and a time-out', () => {
  assert.deepEqual(startFailure('late', true), { message: 'late', remedy: 'restart' });
  assert.deepEqual(startFailure('wavecast protocol version mismatch: update the daemon', false), {
    message: 'wavecast protocol version mismatch: update the daemon',
    remedy: 'settings',
  });
  assert.deepEqual(startFailure('it exited while starting', false), { message: 'The wavecast daemon did not start: it exited while starting', remedy: 'restart' });
});
