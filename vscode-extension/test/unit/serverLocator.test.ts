import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { buildTreeCandidates, locateServer } from '../../src/logic/serverLocator';

const base = {
  serverPath: null,
  pathEnv: '/usr/local/bin:/usr/bin',
  workspaceFolders: ['/src/wavecast/samples'],
  extensionPath: '/src/wavecast/vscode-extension',
  platform: 'linux' as const,
};

test('the setting wins when it points to an executable', () => {
  const found = locateServer({ ...base, serverPath: '/opt/wavecast/bin/wavecast', isExecutable: () => true });
  assert.deepEqual(found, { path: '/opt/wavecast/bin/wavecast', source: 'setting' });
});

test('a wrong setting is an error, not a silent fallback', () => {
  const found = locateServer({ ...base, serverPath: '/nope/wavecast', isExecutable: (f) => f === '/usr/bin/wavecast' });
  assert.ok('error' in found);
  assert.match(found.error, /wavecast.serverPath is "\/nope\/wavecast"/);
});

test('PATH is searched in order before the build tree', () => {
  const found = locateServer({ ...base, isExecutable: (f) => f === '/usr/bin/wavecast' || f.endsWith('build/bin/wavecast') });
  assert.deepEqual(found, { path: '/usr/bin/wavecast', source: 'PATH' });
});

test('the build tree next to the workspace or the extension is found', () => {
  const found = locateServer({ ...base, isExecutable: (f) => f === '/src/wavecast/build/bin/wavecast' });
  assert.deepEqual(found, { path: '/src/wavecast/build/bin/wavecast', source: 'build tree' });
  assert.deepEqual(buildTreeCandidates(base.workspaceFolders, base.extensionPath), [
    '/src/wavecast/samples/build/bin/wavecast',
    '/src/wavecast/build/bin/wavecast',
  ]);
});

test('nothing found: the error says how to fix it and lists what was searched', () => {
  const found = locateServer({ ...base, isExecutable: () => false });
  assert.ok('error' in found);
  assert.match(found.error, /not found on PATH or in a build\/bin folder/);
  assert.match(found.error, /set wavecast.serverPath/);
  assert.deepEqual(found.searched, [
    '/usr/local/bin/wavecast',
    '/usr/bin/wavecast',
    '/src/wavecast/samples/build/bin/wavecast',
    '/src/wavecast/build/bin/wavecast',
  ]);
});
