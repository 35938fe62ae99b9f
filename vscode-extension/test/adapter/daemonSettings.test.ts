// The controller's settings that shape the daemon against the mock: the command
// line and initialization options, which changes restart it, and the remote
// address with its token in the secret storage.
import '../mock/register';
import { strict as assert } from 'node:assert';
import { beforeEach, test } from 'node:test';
import { harness } from '../mock/vscode';
import { resetHarness, secretsWith, setup, statusItem, tick } from './setup';

beforeEach(resetHarness);

test('starts `wavecast serve` found on PATH with initialization options from the settings', async () => {
  harness.config.set('targets', ['H100-SXM', 'T4']);
  harness.config.set('batchSize', 32);
  harness.config.set('trigger', 'manual');
  const { controller, clients } = setup();
  await controller.activate();
  const client = clients[0];
  assert.deepEqual(client.spec.transport, { kind: 'stdio', command: '/usr/bin/wavecast', args: ['serve'], env: process.env });
  assert.deepEqual(client.spec.initializationOptions, {
    protocol_version: 2,
    targets: ['H100-SXM', 'T4'],
    parallelTargets: [],
    batchSize: 32,
    trigger: 'manual',
    pythonEnv: null,
    debounceMs: 0,
    lineCodeLens: false,
    lineDiagnostics: false,
    scriptArgs: { '': [] },
    scriptWorkingDirectories: {},
    worldSize: null,
    compile: null,
  });
  assert.equal(client.started, true);
  assert.equal(controller.currentPhase, 'running');
  assert.equal(statusItem().text, '$(pulse) wavecast: H100-SXM, T4');
  assert.equal(statusItem().command, 'wavecast.pickGpus');
  assert.deepEqual(harness.shown, []);
});

test('analysis settings go to the running daemon; a new server path restarts it', async () => {
  const { controller, clients } = setup({ executable: (f) => f === '/usr/bin/wavecast' || f === '/opt/wavecast' });
  await controller.activate();
  harness.changeSettings({ trigger: 'manual', batchSize: 16 });
  await tick();
  assert.equal(clients.length, 1, 'the language client forwards these through didChangeConfiguration');

  harness.changeSettings({ serverPath: '/opt/wavecast', batchSize: -4 });
  await tick();
  await tick();
  assert.equal(clients.length, 2);
  assert.equal(clients[0].stopped, true);
  assert.deepEqual(clients[1].spec.transport, { kind: 'stdio', command: '/opt/wavecast', args: ['serve'], env: process.env });
  assert.equal(clients[1].spec.initializationOptions.trigger, 'manual');
  assert.equal(clients[1].spec.initializationOptions.batchSize, null);
  assert.match(harness.shown.at(-1)!.message, /wavecast.batchSize/);
  assert.equal(controller.currentPhase, 'running');
});

test('a remote address connects over TCP instead of spawning', async () => {
  harness.config.set('remoteAddress', '127.0.0.1:7325');
  const { controller, clients } = setup({ executable: () => false, secrets: secretsWith('tok') });
  await controller.activate();
  assert.equal(clients[0].spec.transport.kind, 'tcp');
  assert.equal(controller.currentPhase, 'running');
});

test('a token in settings.json moves to the secret storage once, and the user is told to remove it', async () => {
  harness.config.set('remoteAddress', '127.0.0.1:7325');
  harness.config.set('remoteToken', 'legacy');
  const first = setup();
  await first.controller.activate();
  assert.equal(first.clients[0].spec.initializationOptions.token, 'legacy');
  assert.equal(first.context.secrets.values.get('wavecast.remoteToken'), 'legacy');
  assert.equal(first.context.globalState.get('wavecast.remoteTokenMigrated'), true);
  const notice = harness.shown.find((s) => /moved the remote token/.test(s.message))!;
  assert.equal(notice.kind, 'information');
  assert.match(notice.message, /Remove "wavecast.remoteToken" from your settings.json/);
  assert.deepEqual(notice.actions, ['Open Settings']);
  await first.controller.shutdown();

  // Cleared on purpose afterwards: the old settings value does not come back.
  harness.shown = [];
  await first.context.secrets.delete('wavecast.remoteToken');
  const second = setup({ secrets: first.context.secrets, globalState: first.context.globalState });
  await second.controller.activate();
  assert.equal(second.clients.length, 0);
  assert.equal(second.controller.currentPhase, 'failed');
  assert.equal(harness.shown.length, 1);
  assert.match(harness.shown[0].message, /no token is stored: run "wavecast: Set Remote Token"/);
  assert.ok(harness.outputLines.some((l) => /wavecast.remoteToken in the settings is ignored/.test(l)));
});

test('Set Remote Token stores a password-style input and reconnects; Clear Remote Token forgets it', async () => {
  harness.config.set('remoteAddress', '127.0.0.1:7325');
  const { controller, clients, context } = setup({ secrets: secretsWith('old') });
  await controller.activate();
  assert.equal(clients[0].spec.initializationOptions.token, 'old');
  harness.inputBox = (options) => {
    assert.equal(options.password, true);
    return ' new-token ';
  };
  await harness.commands.get('wavecast.setRemoteToken')!();
  await tick();
  await tick();
  assert.equal(context.secrets.values.get('wavecast.remoteToken'), 'new-token');
  assert.equal(clients.length, 2);
  assert.equal(clients[0].stopped, true);
  assert.equal(clients[1].spec.initializationOptions.token, 'new-token');
  assert.equal(controller.currentPhase, 'running');

  await harness.commands.get('wavecast.clearRemoteToken')!();
  await tick();
  await tick();
  assert.equal(context.secrets.values.has('wavecast.remoteToken'), false);
  assert.equal(clients.length, 2);
  assert.equal(controller.currentPhase, 'failed');
  assert.match(harness.shown.at(-1)!.message, /no token is stored/);
});

test('TF32, the analysis time-out and the GPU file go on the daemon’s command line; changing one restarts it', async () => {
  harness.config.set('tf32Matmul', 'on');
  harness.config.set('tf32Conv', 'off');
  harness.config.set('analysisTimeout', 300);
  harness.config.set('gpuFile', 'gpus/lab.json');
  const { controller, clients } = setup();
  await controller.activate();
  assert.deepEqual(clients[0].spec.transport, {
    kind: 'stdio',
    command: '/usr/bin/wavecast',
    args: ['serve', '--tf32-matmul', 'on', '--tf32-conv', 'off', '--timeout', '300', '--gpu-file', '/home/ada/projects/resnet/gpus/lab.json'],
    env: process.env,
  });

  harness.changeSettings({ debounceMs: 1000, lineCodeLens: true });
  await tick();
  assert.equal(clients.length, 1, 'debounce and code lenses reach the running daemon as settings');

  harness.changeSettings({ tf32Matmul: 'script' });
  await tick();
  await tick();
  assert.equal(clients.length, 2);
  assert.equal(clients[0].stopped, true);
  const restarted = clients[1].spec;
  assert.deepEqual(restarted.transport.kind === 'stdio' && restarted.transport.args.slice(0, 3), ['serve', '--tf32-conv', 'off']);
  assert.equal(restarted.initializationOptions.debounceMs, 1000);
  assert.equal(restarted.initializationOptions.lineCodeLens, true);
  assert.equal(controller.currentPhase, 'running');
});
