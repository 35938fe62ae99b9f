import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { describeWorkerEnvironment, selectedInterpreter, workerEnvironment } from '../../src/logic/pythonEnvironment';

test('the worker gets the interpreter executable, else the environment folder, else the active path', () => {
  const venv = selectedInterpreter({
    activePath: '/v/bin/python',
    executable: '/v/bin/python',
    folder: '/v',
    environmentType: 'VirtualEnvironment',
    version: { major: 3, minor: 11, micro: 2 },
  });
  assert.deepEqual(venv, { path: '/v/bin/python', description: 'Python 3.11.2 (VirtualEnvironment) /v/bin/python' });
  // A conda environment without python has only its folder.
  assert.equal(selectedInterpreter({ activePath: '/c/envs/x', folder: '/c/envs/x', environmentType: 'Conda' }).path, '/c/envs/x');
  // Not resolved (the Python extension could not tell more).
  assert.deepEqual(selectedInterpreter({ activePath: '/usr/bin/python3' }), { path: '/usr/bin/python3', description: '/usr/bin/python3' });
});

test('wavecast.pythonEnv wins over the interpreter, which wins over the daemon default; a remote daemon gets only the setting', () => {
  const interpreter = { path: '/v/bin/python', description: 'v' };
  assert.deepEqual(workerEnvironment('/opt/venv', interpreter, false), { path: '/opt/venv', source: 'setting' });
  assert.deepEqual(workerEnvironment(null, interpreter, false), { path: '/v/bin/python', source: 'pythonExtension' });
  assert.deepEqual(workerEnvironment(null, null, false), { path: null, source: 'daemonDefault' });
  assert.deepEqual(workerEnvironment(null, interpreter, true), { path: null, source: 'daemonDefault' });
  assert.deepEqual(workerEnvironment('/remote/venv', interpreter, true), { path: '/remote/venv', source: 'setting' });
  assert.match(describeWorkerEnvironment({ path: '/opt/venv', source: 'setting' }, interpreter), /\/opt\/venv \(wavecast.pythonEnv\)/);
  assert.match(describeWorkerEnvironment({ path: '/v/bin/python', source: 'pythonExtension' }, interpreter), /Python extension's interpreter, v\./);
});
