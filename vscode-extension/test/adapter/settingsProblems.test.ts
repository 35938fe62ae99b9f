// A wrong setting value reaches the user once, with Open Settings, while the
// rest of the same change still applies; a refused token offers Set Remote Token.
import '../mock/register';
import { strict as assert } from 'node:assert';
import { beforeEach, test } from 'node:test';
import { harness } from '../mock/vscode';
import { resetHarness, secretsWith, setup, tick } from './setup';

beforeEach(resetHarness);

const warnings = () => harness.shown.filter((s) => s.kind === 'warning');
const logged = (pattern: RegExp) => harness.outputLines.filter((line) => pattern.test(line));

test('a wrong value changed while running: one warning with Open Settings, logged once; the valid values still reach the daemon', async () => {
  const { controller, clients } = setup();
  await controller.activate();
  const client = clients[0];

  harness.answers.push({ match: 'wavecast.debounceMs', action: 'Open Settings' });
  harness.changeSettings({ debounceMs: -5, trigger: 'manual', batchSize: 16 });
  await tick();
  assert.equal(warnings().length, 1);
  assert.match(warnings()[0].message, /^wavecast.debounceMs must be a whole number of milliseconds from 0 to 60000, not -5; using 0\.$/);
  assert.deepEqual(warnings()[0].actions, ['Open Settings']);
  assert.ok(harness.executed.some((e) => e.id === 'workbench.action.openSettings' && e.args[0] === 'wavecast'));
  assert.equal(logged(/settings: wavecast.debounceMs/).length, 1);
  // What the language client sends for this change: the valid values, the default for the wrong one.
  assert.deepEqual(client.spec.daemonSettings(), {
    parallelTargets: [],
    batchSize: 16,
    trigger: 'manual',
    pythonEnv: '',
    debounceMs: 0,
    lineCodeLens: false,
    lineDiagnostics: false,
    scriptArgs: { '': [] },
    scriptWorkingDirectories: {},
    worldSize: null,
    compile: null,
  });

  // Other changes and restarts with the same wrong value: not again.
  harness.changeSettings({ lineDiagnostics: true });
  await tick();
  await harness.commands.get('wavecast.restartServer')!();
  harness.changeSettings({ tf32Conv: 'off' });
  await tick();
  await tick();
  assert.equal(clients.length, 3, 'restarted twice');
  assert.equal(warnings().length, 1);
  assert.equal(logged(/settings: wavecast.debounceMs/).length, 1);
  assert.equal(clients[2].spec.initializationOptions.debounceMs, 0);
  assert.equal(clients[2].spec.initializationOptions.lineDiagnostics, true);

  // Fixed, then wrong again: a new message.
  harness.changeSettings({ debounceMs: 500 });
  harness.changeSettings({ debounceMs: 'soon' });
  await tick();
  assert.equal(warnings().length, 2);
  assert.match(warnings()[1].message, /not "soon"/);
  assert.equal(controller.currentPhase, 'running');
});

test('a wrong value at start is shown once, not again on each restart', async () => {
  harness.config.set('tf32Matmul', 'maybe');
  const { controller, clients } = setup();
  await controller.activate();
  assert.equal(warnings().length, 1);
  assert.match(warnings()[0].message, /wavecast.tf32Matmul must be "script", "on" or "off", not "maybe"; using "script"/);
  harness.changeSettings({ analysisTimeout: 60 });
  await tick();
  await tick();
  await harness.commands.get('wavecast.restartServer')!();
  assert.equal(clients.length, 3);
  assert.deepEqual(clients[2].spec.transport.kind === 'stdio' && clients[2].spec.transport.args, ['serve', '--timeout', '60']);
  assert.equal(warnings().length, 1);
});

test('an unknown GPU in wavecast.targets: Open Settings, once; the rest of the change applies', async () => {
  const { controller, clients } = setup({
    prepare: (client) => {
      let targets: string[] = [];
      client.handlers.set('wavecast/setTargets', (p: { gpus: string[] }) => {
        const unknown = p.gpus.find((gpu) => !['H100-SXM', 'T4'].includes(gpu));
        if (unknown) throw Object.assign(new Error(`unknown GPU '${unknown}'; did you mean H100-SXM, H100-PCIe, H20?`), { code: -32602 });
        targets = p.gpus;
        return { targets };
      });
    },
  });
  await controller.activate();
  const client = clients[0];
  harness.changeSettings({ targets: ['H10'], batchSize: 16 });
  await tick();
  await tick();
  assert.equal(harness.shown.length, 1, JSON.stringify(harness.shown));
  assert.equal(warnings()[0].message, "wavecast.targets: unknown GPU 'H10'; did you mean H100-SXM, H100-PCIe, H20?; keeping H100-SXM, T4.");
  assert.deepEqual(warnings()[0].actions, ['Open Settings']);
  assert.equal(client.spec.daemonSettings().batchSize, 16, 'the batch size of the same change still goes to the daemon');
  assert.ok(!('targets' in client.spec.daemonSettings()), 'targets only through wavecast/setTargets');

  harness.changeSettings({ targets: ['T4', 'H200X'] });
  await tick();
  await tick();
  assert.equal(harness.shown.length, 2, 'another wrong value is a new message');
  assert.match(harness.shown[1].message, /unknown GPU 'H200X'/);
  harness.changeSettings({ targets: ['H200X'], lineCodeLens: true });
  await tick();
  await tick();
  assert.equal(harness.shown.length, 2, 'the same one again is not');

  harness.changeSettings({ targets: ['T4'] });
  await tick();
  await tick();
  harness.changeSettings({ targets: ['H10'] });
  await tick();
  await tick();
  assert.equal(harness.shown.length, 3, 'fixed, then wrong again');
  assert.equal(controller.currentPhase, 'running');
});

test('a refused token offers Set Remote Token, which asks for the token and reconnects', async () => {
  harness.config.set('remoteAddress', '127.0.0.1:7325');
  let refuse = true;
  const { controller, clients, context } = setup({
    secrets: secretsWith('wrong'),
    prepare: (client) => {
      if (!refuse) return;
      client.startError = new Error('Initialize failed');
      client.spec.onInitializeFailed("authentication failed: initializationOptions.token must be the daemon's token (see --token-file)");
    },
  });
  harness.answers.push({ match: 'refused the connection', action: 'Set Remote Token' });
  harness.inputBox = () => {
    refuse = false;
    return 'right';
  };
  await controller.activate();
  await tick();
  await tick();
  assert.match(harness.shown[0].message, /refused the connection: authentication failed.*"wavecast: Set Remote Token"/);
  assert.deepEqual(harness.shown[0].actions, ['Set Remote Token', 'Open Server Log']);
  assert.ok(harness.executed.some((e) => e.id === 'wavecast.setRemoteToken'));
  assert.equal(context.secrets.values.get('wavecast.remoteToken'), 'right');
  assert.equal(clients.at(-1)!.spec.initializationOptions.token, 'right');
  assert.equal(controller.currentPhase, 'running');
});

test('a refused token left alone: the daemon stays failed', async () => {
  harness.config.set('remoteAddress', '127.0.0.1:7325');
  const { controller, clients } = setup({
    secrets: secretsWith('wrong'),
    prepare: (client) => {
      client.startError = new Error('Initialize failed');
      client.spec.onInitializeFailed("authentication failed: initializationOptions.token must be the daemon's token (see --token-file)");
    },
  });
  await controller.activate();
  assert.equal(clients[0].spec.initializationOptions.token, 'wrong');
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(clients.length, 1);
});

test('no stored token offers Set Remote Token too', async () => {
  harness.config.set('remoteAddress', '127.0.0.1:7325');
  const { controller } = setup();
  await controller.activate();
  assert.equal(harness.shown.length, 1);
  assert.match(harness.shown[0].message, /no token is stored/);
  assert.deepEqual(harness.shown[0].actions, ['Set Remote Token', 'Open Server Log']);
});
