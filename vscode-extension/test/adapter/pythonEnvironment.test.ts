// The worker's Python environment follows the Python extension's selected
// interpreter; wavecast.pythonEnv overrides it; without that extension nothing changes.
import '../mock/register';
import { strict as assert } from 'node:assert';
import { beforeEach, test } from 'node:test';
import { FakePythonExtension, globalInterpreter, venvEnvironment } from '../mock/pythonExtension';
import { harness } from '../mock/vscode';
import { resetHarness, secretsWith, setup, tick } from './setup';

const TORCH2 = '/home/ada/venvs/torch2';
const NIGHTLY = '/home/ada/venvs/nightly';

beforeEach(resetHarness);

function installPythonExtension(folder = TORCH2): FakePythonExtension {
  const extension = new FakePythonExtension(venvEnvironment(folder));
  harness.pythonExtension = extension;
  return extension;
}

const logged = (pattern: RegExp) => harness.outputLines.filter((line) => pattern.test(line));

test('without the Python extension the daemon keeps its default environment, and nothing is shown', async () => {
  const { controller, clients } = setup();
  await controller.activate();
  assert.equal(controller.currentPhase, 'running');
  assert.equal(clients[0].spec.initializationOptions.pythonEnv, null);
  assert.equal(clients[0].spec.daemonSettings().pythonEnv, '', "'' is the daemon's default");
  assert.deepEqual(harness.shown, []);
  assert.equal(logged(/the daemon's default \(no wavecast.pythonEnv, no interpreter from the Python extension\)/).length, 1);
});

test("the Python extension's interpreter is the worker's environment; selecting another tells the running daemon", async () => {
  const extension = installPythonExtension();
  const { controller, clients } = setup();
  await controller.activate();
  assert.equal(extension.activations, 1, 'the Python extension is activated to ask it');
  assert.equal((extension.environments.askedFor[0] as { name: string }).name, 'resnet', "the first workspace folder's interpreter");
  const client = clients[0];
  assert.equal(client.spec.initializationOptions.pythonEnv, `${TORCH2}/bin/python`);
  assert.equal(client.spec.daemonSettings().pythonEnv, `${TORCH2}/bin/python`);
  assert.equal(logged(/Python extension's interpreter, Python 3\.11\.2 \(VirtualEnvironment\) \/home\/ada\/venvs\/torch2\/bin\/python/).length, 1);

  extension.environments.select(venvEnvironment(NIGHTLY, '3.11.9'));
  await tick();
  assert.equal(clients.length, 1, 'a setting, not a restart');
  assert.deepEqual(
    client.settingsSent.map((s) => (s as { pythonEnv: string }).pythonEnv),
    [`${NIGHTLY}/bin/python`],
  );
  assert.equal(logged(/Python 3\.11\.9 \(VirtualEnvironment\) \/home\/ada\/venvs\/nightly\/bin\/python/).length, 1);
  assert.deepEqual(harness.shown, []);

  // The same interpreter again, or one for another workspace folder: nothing to send.
  extension.environments.select(venvEnvironment(NIGHTLY, '3.11.9'));
  extension.environments.select(venvEnvironment('/elsewhere/venv'), { uri: { toString: () => 'file:///elsewhere' } });
  await tick();
  assert.equal(client.settingsSent.length, 1);
});

test('a global interpreter goes to the worker as its executable', async () => {
  harness.pythonExtension = new FakePythonExtension(globalInterpreter('/usr/bin/python3'));
  const { controller, clients } = setup();
  await controller.activate();
  assert.equal(clients[0].spec.initializationOptions.pythonEnv, '/usr/bin/python3');
});

test('wavecast.pythonEnv overrides the interpreter; cleared, the interpreter applies again', async () => {
  const extension = installPythonExtension();
  harness.config.set('pythonEnv', '/opt/venv');
  const { controller, clients } = setup();
  await controller.activate();
  const client = clients[0];
  assert.equal(client.spec.initializationOptions.pythonEnv, '/opt/venv');

  extension.environments.select(venvEnvironment(NIGHTLY));
  await tick();
  assert.deepEqual(client.settingsSent, [], 'the override stays');
  assert.equal(client.spec.daemonSettings().pythonEnv, '/opt/venv');

  // The language client sends the section itself on a settings change; its value is the interpreter now.
  harness.changeSettings({ pythonEnv: '' });
  await tick();
  assert.equal(client.spec.daemonSettings().pythonEnv, `${NIGHTLY}/bin/python`);
  assert.equal(clients.length, 1);
  assert.equal(logged(/nightly\/bin\/python/).length, 1);
});

test("a remote daemon does not get this machine's interpreter", async () => {
  installPythonExtension();
  harness.config.set('remoteAddress', '127.0.0.1:7325');
  const { controller, clients } = setup({ executable: () => false, secrets: secretsWith('tok') });
  await controller.activate();
  assert.equal(clients[0].spec.initializationOptions.pythonEnv, null);
  assert.equal(clients[0].spec.daemonSettings().pythonEnv, '');
});

test('the Python extension installed while wavecast runs is followed from then on', async () => {
  const { controller, clients } = setup();
  await controller.activate();
  assert.equal(clients[0].spec.initializationOptions.pythonEnv, null);
  installPythonExtension();
  harness.extensionsChanged.fire();
  await tick();
  await tick();
  assert.deepEqual(
    clients[0].settingsSent.map((s) => (s as { pythonEnv: string }).pythonEnv),
    [`${TORCH2}/bin/python`],
  );
});

test('an interpreter resolved after the daemon started is sent once it runs', async () => {
  const extension = installPythonExtension();
  const { controller, clients } = setup();
  await controller.activate();
  let release!: () => void;
  extension.environments.resolveGate = new Promise((resolve) => (release = resolve));
  extension.environments.select(venvEnvironment(NIGHTLY));
  // A newer selection overtakes a slower one still resolving.
  extension.environments.resolveGate = Promise.resolve();
  extension.environments.select(venvEnvironment('/home/ada/venvs/latest'));
  await tick();
  release();
  await tick();
  assert.deepEqual(
    clients[0].settingsSent.map((s) => (s as { pythonEnv: string }).pythonEnv),
    ['/home/ada/venvs/latest/bin/python'],
  );
});
