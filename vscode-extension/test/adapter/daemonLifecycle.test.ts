// The controller's daemon lifecycle against the mock: workspace trust, starting
// and failing to start, crashes and automatic restarts, initialize time-outs,
// and what commands do while the daemon is down.
import '../mock/register';
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { beforeEach, test } from 'node:test';
import { RestartPolicy } from '../../src/logic/restartPolicy';
import { fakeInstall, loaderError } from '../fixtures';
import { harness } from '../mock/vscode';
import { openEditor, resetHarness, setup, sleep, statusItem, tick } from './setup';

beforeEach(resetHarness);

test('untrusted workspace: nothing is started and the user is told why', async () => {
  harness.trusted = false;
  const { controller, clients } = setup();
  await controller.activate();
  assert.equal(clients.length, 0);
  assert.equal(controller.currentPhase, 'untrusted');
  assert.match(statusItem().text, /\$\(shield\)/);
  assert.equal(harness.shown.length, 1);
  assert.match(harness.shown[0].message, /off in this workspace because analysing a file runs it/);
  assert.deepEqual(harness.shown[0].actions, ['Manage Workspace Trust']);

  harness.answers.push({ match: 'off in this workspace', action: 'Manage Workspace Trust' });
  await harness.commands.get('wavecast.analyzeNow')!();
  assert.equal(clients.length, 0);
  assert.ok(harness.executed.some((e) => e.id === 'workbench.trust.manage'));

  harness.trusted = true;
  harness.trustGranted.fire();
  await tick();
  assert.equal(clients.length, 1);
  assert.equal(controller.currentPhase, 'running');
});

test('a missing binary is an error that says how to fix it', async () => {
  const { controller, clients } = setup({ executable: () => false });
  await controller.activate();
  assert.equal(clients.length, 0);
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(harness.shown[0].kind, 'error');
  assert.match(harness.shown[0].message, /not found on PATH.*cmake --install build --prefix ~\/\.local.*set wavecast.serverPath/);
  assert.deepEqual(harness.shown[0].actions, ['Open Settings', 'Restart Server', 'Open Server Log']);
  assert.equal(statusItem().backgroundColor.id, 'statusBarItem.errorBackground');
  assert.ok(harness.outputLines.some((l) => l.includes('Searched: /ext/wavecast/server/bin/wavecast, /usr/local/bin/wavecast, /usr/bin/wavecast')));
});

test('the daemon this extension carries, on a machine without libpython3.11: one message saying what to install', async () => {
  const extension = fs.mkdtempSync(path.join(os.tmpdir(), 'wavecast-extension-'));
  try {
    const bundled = fakeInstall(path.join(extension, 'server'), '', loaderError('wavecast-worker', 'libpython3.11.so.1.0'));
    const { controller, clients } = setup({ extensionPath: extension, executable: (file) => file === bundled || file === '/usr/bin/wavecast' });
    await controller.activate();
    assert.equal(clients.length, 0, 'not started');
    assert.equal(controller.currentPhase, 'failed');
    assert.deepEqual(harness.shown, [
      {
        kind: 'error',
        message:
          'The wavecast daemon this extension carries needs libpython3.11.so.1.0, which is not installed. ' +
          'Install on Debian and Ubuntu: sudo apt install libpython3.11, then run "wavecast: Restart Server".',
        actions: ['Open Settings', 'Restart Server', 'Open Server Log'],
      },
    ]);

    // Installed meanwhile: Restart Server checks again and starts it.
    fakeInstall(path.join(extension, 'server'), '', 'usage: wavecast-worker --request-fd N\n');
    await harness.commands.get('wavecast.restartServer')!();
    assert.equal(clients.length, 1);
    assert.equal(clients[0].spec.transport.kind === 'stdio' && clients[0].spec.transport.command, bundled);
    assert.equal(controller.currentPhase, 'running');
  } finally {
    fs.rmSync(extension, { recursive: true, force: true });
  }
});

test('a protocol version mismatch names the side to update and does not offer restarts', async () => {
  const { controller, clients } = setup({
    prepare: (client) => {
      client.experimental = { wavecast: { protocol_version: 3, methods: [] } };
    },
  });
  await controller.activate();
  assert.equal(clients[0].stopped, true);
  assert.equal(controller.currentPhase, 'failed');
  assert.match(harness.shown[0].message, /daemon speaks version 3, this extension version 2. Update the wavecast VS Code extension/);
  assert.deepEqual(harness.shown[0].actions, ['Open Settings', 'Open Server Log']);
});

test('the daemon refusing initialize shows its message verbatim', async () => {
  const { controller } = setup({
    prepare: (client) => {
      client.startError = new Error('Initialize failed');
      client.spec.onInitializeFailed('wavecast protocol version mismatch: the daemon speaks 1, the client 3. Update the wavecast daemon.');
    },
  });
  await controller.activate();
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(harness.shown[0].message, 'wavecast protocol version mismatch: the daemon speaks 1, the client 3. Update the wavecast daemon.');
});

test('crashes restart automatically a few times, then the user is offered a restart', async () => {
  let now = 0;
  const { controller, clients } = setup({ policy: new RestartPolicy(3, 180_000, () => now) });
  await controller.activate();
  const decisions = [1, 2, 3, 4].map(() => {
    now += 1000;
    return clients[0].spec.onClosed();
  });
  assert.deepEqual(
    decisions.map((d) => d.restart),
    [true, true, true, false],
  );
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(harness.shown.filter((s) => s.kind === 'warning' && /restarting it \(attempt \d of 3\)/.test(s.message)).length, 3);
  const last = harness.shown.at(-1)!;
  assert.equal(last.kind, 'error');
  assert.match(last.message, /crashed 4 times in 3 minutes/);
  assert.deepEqual(last.actions, ['Restart Server', 'Open Server Log']);

  await harness.commands.get('wavecast.restartServer')!();
  assert.equal(clients.length, 2);
  assert.equal(controller.currentPhase, 'running');
  assert.equal(clients[1].spec.onClosed().restart, true, 'a manual restart resets the budget');
});

test('after an automatic restart the status returns to running', async () => {
  const { controller, clients } = setup();
  await controller.activate();
  const listGpusCalls = clients[0].requestsOf('wavecast/listGpus').length;
  assert.equal(clients[0].spec.onClosed().restart, true);
  assert.equal(controller.currentPhase, 'starting');
  assert.match(statusItem().text, /loading~spin/);
  clients[0].running();
  await tick();
  assert.equal(controller.currentPhase, 'running');
  assert.equal(clients[0].requestsOf('wavecast/listGpus').length, listGpusCalls + 1);
});

test('commands while the daemon is down offer a restart instead of failing silently', async () => {
  const { controller } = setup({ executable: () => false });
  await controller.activate();
  openEditor();
  await harness.commands.get('wavecast.showResults')!();
  assert.match(harness.shown.at(-1)!.message, /daemon is not running/);
  assert.deepEqual(harness.shown.at(-1)!.actions, ['Restart Server', 'Open Server Log']);
  await harness.commands.get('wavecast.openServerLog')!();
  assert.ok(harness.executed.some((e) => e.id === 'output.show'));
});

test('the panel’s buttons while the daemon is down say so instead of doing nothing', async () => {
  const { controller } = setup();
  await controller.activate();
  openEditor();
  await harness.commands.get('wavecast.showResults')!();
  await (controller as any).stopClient();
  harness.panels[0].webview.received.fire({ type: 'analyze' });
  await tick();
  assert.match(harness.shown.at(-1)!.message, /The wavecast daemon is not running. Restart it/);
  assert.deepEqual(harness.shown.at(-1)!.actions, ['Restart Server', 'Open Server Log']);
});

test('Pick GPUs after a failed restart shows the start error and offers a restart', async () => {
  let failNext = false;
  const { controller, clients } = setup({
    prepare: (client) => {
      if (failNext) client.startError = new Error('spawn /usr/bin/wavecast EACCES');
    },
  });
  await controller.activate();
  openEditor();
  await harness.commands.get('wavecast.showResults')!();
  failNext = true;
  await harness.commands.get('wavecast.restartServer')!();
  assert.equal(controller.currentPhase, 'failed');
  assert.match(statusItem().tooltip, /did not start: spawn \/usr\/bin\/wavecast EACCES/);
  failNext = false;

  // From the panel's button (this threw a TypeError on a null API) …
  harness.panels[0].webview.received.fire({ type: 'pickGpus' });
  await tick();
  let shown = harness.shown.at(-1)!;
  assert.equal(shown.kind, 'error');
  assert.equal(shown.message, 'The wavecast daemon is not running: The wavecast daemon did not start: spawn /usr/bin/wavecast EACCES');
  assert.deepEqual(shown.actions, ['Restart Server', 'Open Server Log']);

  // … and from the status bar; choosing Restart Server brings it back.
  harness.answers.push({ match: 'is not running', action: 'Restart Server' });
  await harness.commands.get('wavecast.pickGpus')!();
  shown = harness.shown.at(-1)!;
  assert.match(shown.message, /is not running: The wavecast daemon did not start/);
  assert.equal(clients.length, 3);
  assert.equal(controller.currentPhase, 'running');
});

test('a daemon that never answers initialize fails after wavecast.initializeTimeout with the log and restart offered', { timeout: 10_000 }, async () => {
  harness.config.set('initializeTimeout', 1);
  const { controller, clients } = setup({
    prepare: (client) => {
      client.startHook = () => new Promise<void>(() => undefined);
    },
  });
  const started = Date.now();
  await controller.activate();
  assert.ok(Date.now() - started >= 900);
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(clients[0].stopped, true, 'the silent daemon is stopped');
  assert.equal(harness.shown.length, 1);
  assert.equal(harness.shown[0].kind, 'error');
  assert.match(harness.shown[0].message, /did not answer initialize within 1 s and was stopped/);
  assert.deepEqual(harness.shown[0].actions, ['Open Settings', 'Restart Server', 'Open Server Log']);
  assert.match(statusItem().text, /\$\(error\)/);
  assert.match(statusItem().tooltip, /did not answer initialize within 1 s/);
  // A close the stopped client reports afterwards is not a crash.
  assert.equal(clients[0].spec.onClosed().restart, false);
  assert.equal(harness.shown.length, 1);
});

test('a crash during the first start is one failed start: not restarted as well', async () => {
  const { controller, clients } = setup({
    prepare: (client) => {
      client.startHook = async () => {
        const decision = client.spec.onClosed();
        assert.equal(decision.restart, false, 'the client must not restart it');
        throw new Error('Connection got disposed.');
      };
    },
  });
  await controller.activate();
  assert.equal(clients.length, 1);
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(clients[0].stopped, true);
  assert.equal(harness.shown.length, 1, `one outcome, got ${JSON.stringify(harness.shown)}`);
  assert.equal(harness.shown[0].kind, 'error');
  assert.match(harness.shown[0].message, /did not start: it exited while starting \(Connection got disposed.\)/);
  assert.ok(!harness.shown.some((s) => /restarting it/.test(s.message)));
});

test('a crash during the first start fails it even if start() resolved', async () => {
  const { controller, clients } = setup({
    prepare: (client) => {
      client.startHook = async () => {
        client.spec.onClosed();
      };
    },
  });
  await controller.activate();
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(clients[0].stopped, true);
  assert.equal(harness.shown.length, 1);
  assert.match(harness.shown[0].message, /did not start: it exited while starting/);
});

test('an automatic restart that never comes back fails after the initialize time-out', { timeout: 10_000 }, async () => {
  harness.config.set('initializeTimeout', 1);
  const { controller, clients } = setup();
  await controller.activate();
  assert.equal(clients[0].spec.onClosed().restart, true);
  assert.equal(controller.currentPhase, 'starting');
  await sleep(1200);
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(clients[0].stopped, true);
  const last = harness.shown.at(-1)!;
  assert.match(last.message, /did not answer initialize within 1 s/);
  assert.deepEqual(last.actions, ['Open Settings', 'Restart Server', 'Open Server Log']);
});

test('an automatic restart that comes back in time stays running', { timeout: 10_000 }, async () => {
  harness.config.set('initializeTimeout', 1);
  const { controller, clients } = setup();
  await controller.activate();
  clients[0].spec.onClosed();
  clients[0].running();
  await sleep(1200);
  assert.equal(controller.currentPhase, 'running');
  assert.equal(harness.shown.filter((s) => s.kind === 'error').length, 0);
});

test('a daemon that exits while starting is reported once, with its last words', async () => {
  const { controller } = setup({
    prepare: (client) => {
      client.exitLine = "wavecast: error: GPU file '/nope.json' does not exist";
      client.startHook = async () => {
        client.spec.onClosed();
        throw new Error('Connection got disposed.');
      };
    },
  });
  await controller.activate();
  assert.equal(harness.shown.length, 1);
  assert.equal(harness.shown[0].message, "The wavecast daemon did not start: it exited while starting: wavecast: error: GPU file '/nope.json' does not exist");
});
