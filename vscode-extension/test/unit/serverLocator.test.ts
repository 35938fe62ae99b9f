import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { locateServer, type LocateInput } from '../../src/logic/serverLocator';

const base: Omit<LocateInput, 'isExecutable'> = {
  serverPath: null,
  pathEnv: '/usr/local/bin:/usr/bin',
  homeDir: '/home/ada',
  workspaceFolders: ['/src/wavecast/samples'],
  workspaceTrusted: true,
  extensionPath: '/home/ada/.vscode/extensions/wavecast.wavecast-0.1.0',
  developing: false,
  platform: 'linux',
  arch: 'x64',
};

test('the setting wins when it points to an executable', () => {
  const found = locateServer({ ...base, serverPath: '/opt/wavecast/bin/wavecast', isExecutable: () => true });
  assert.deepEqual(found, { path: '/opt/wavecast/bin/wavecast', source: 'setting' });
});

test('a wrong setting is an error, not a silent fallback', () => {
  const found = locateServer({ ...base, serverPath: '/nope/wavecast', isExecutable: (f) => f === '/usr/bin/wavecast' });
  assert.ok('error' in found);
  assert.equal(found.kind, 'badSetting');
  assert.match(found.error, /wavecast.serverPath is "\/nope\/wavecast"/);
});

test('the daemon a platform-specific .vsix carries comes before PATH', () => {
  const bundled = '/home/ada/.vscode/extensions/wavecast.wavecast-0.1.0/server/bin/wavecast';
  const found = locateServer({ ...base, isExecutable: (f) => f === bundled || f === '/usr/bin/wavecast' });
  assert.deepEqual(found, { path: bundled, source: 'extension' });
});

test('PATH is searched in order before the install folders and the workspace', () => {
  const found = locateServer({
    ...base,
    pathEnv: '/opt/tools/bin:/usr/bin',
    isExecutable: (f) => f === '/usr/bin/wavecast' || f === '/home/ada/.local/bin/wavecast' || f.endsWith('build/bin/wavecast'),
  });
  assert.deepEqual(found, { path: '/usr/bin/wavecast', source: 'PATH' });
});

test('~/.local/bin is found when PATH lacks it (VS Code started from a desktop launcher)', () => {
  const found = locateServer({ ...base, pathEnv: '/usr/bin', isExecutable: (f) => f === '/home/ada/.local/bin/wavecast' });
  assert.deepEqual(found, { path: '/home/ada/.local/bin/wavecast', source: 'install folder' });
});

test('relative PATH entries are skipped: they mean whatever folder the editor runs in', () => {
  const found = locateServer({ ...base, pathEnv: '.:bin::/usr/bin', isExecutable: () => false });
  assert.ok('error' in found);
  assert.ok(!found.searched.some((f) => !f.startsWith('/')), found.searched.join(', '));
});

test('a build tree inside a trusted workspace folder is found; never the folder above it', () => {
  const inside = '/src/wavecast/samples/build/bin/wavecast';
  const found = locateServer({ ...base, isExecutable: (f) => f === inside || f === '/src/wavecast/build/bin/wavecast' });
  assert.deepEqual(found, { path: inside, source: 'workspace build tree' });

  const above = locateServer({ ...base, isExecutable: (f) => f === '/src/wavecast/build/bin/wavecast' });
  assert.ok('error' in above);
  assert.ok(!above.searched.includes('/src/wavecast/build/bin/wavecast'));
});

test('an untrusted workspace’s build tree is not searched', () => {
  const inside = '/src/wavecast/samples/build/bin/wavecast';
  const found = locateServer({ ...base, workspaceTrusted: false, isExecutable: (f) => f === inside });
  assert.ok('error' in found);
  assert.ok(!found.searched.includes(inside));
});

test('the extension’s own source checkout is searched only while developing the extension', () => {
  const checkout = { ...base, extensionPath: '/src/wavecast/vscode-extension', workspaceFolders: [] };
  const built = (f: string) => f === '/src/wavecast/build/bin/wavecast';
  assert.ok('error' in locateServer({ ...checkout, isExecutable: built }));
  assert.deepEqual(locateServer({ ...checkout, developing: true, isExecutable: built }), {
    path: '/src/wavecast/build/bin/wavecast',
    source: 'source checkout',
  });
});

test('nothing found: the error names the setting and the install command, and lists what was searched', () => {
  const found = locateServer({ ...base, isExecutable: () => false });
  assert.ok('error' in found);
  assert.equal(found.kind, 'notFound');
  assert.match(found.error, /this copy of the extension carries none \(its linux-x64 package does\)\. Install that package/);
  assert.match(found.error, /not found on PATH or in ~\/\.local\/bin, \/usr\/local\/bin or \/usr\/bin/);
  assert.match(found.error, /cmake --install build --prefix ~\/\.local/);
  assert.match(found.error, /set wavecast.serverPath/);
  assert.deepEqual(found.searched, [
    '/home/ada/.vscode/extensions/wavecast.wavecast-0.1.0/server/bin/wavecast',
    '/usr/local/bin/wavecast',
    '/usr/bin/wavecast',
    '/home/ada/.local/bin/wavecast',
    '/src/wavecast/samples/build/bin/wavecast',
  ]);
});

test('on macOS and Windows no package carries a daemon: the message says it runs on Linux and points to the remote set-up', () => {
  for (const [platform, arch, name] of [
    ['darwin', 'arm64', 'macOS \\(darwin-arm64\\)'],
    ['win32', 'x64', 'Windows \\(win32-x64\\)'],
  ] as const) {
    const found = locateServer({ ...base, platform, arch, pathEnv: '/usr/bin', isExecutable: () => false });
    assert.ok('error' in found);
    assert.equal(found.kind, 'noPackageForPlatform');
    assert.match(found.error, new RegExp(`^The wavecast daemon runs on Linux only, so none comes with the extension on ${name}, and none was found on PATH`));
    assert.match(found.error, /the README's "A daemon on another machine" section/);
    assert.match(found.error, /wavecast serve --listen there, wavecast.remoteAddress here\), or set wavecast.serverPath/);
  }
});

test('on Linux other than x64 the message points to building it, as the README says', () => {
  const found = locateServer({ ...base, arch: 'arm64', isExecutable: () => false });
  assert.ok('error' in found);
  assert.equal(found.kind, 'noPackageForPlatform');
  assert.equal(
    found.error,
    'No package of the extension carries a wavecast daemon for linux-arm64, and none was found on PATH or in ~/.local/bin, /usr/local/bin or /usr/bin. ' +
      'Build and install it from a wavecast checkout as the README\'s "Install" section says (scripts/setup.sh build && cmake --install build --prefix ~/.local), ' +
      'or set wavecast.serverPath to the wavecast executable.',
  );
});

test('a daemon on PATH is used on any platform', () => {
  const found = locateServer({ ...base, platform: 'darwin', arch: 'arm64', pathEnv: '/opt/homebrew/bin', isExecutable: (f) => f === '/opt/homebrew/bin/wavecast' });
  assert.deepEqual(found, { path: '/opt/homebrew/bin/wavecast', source: 'PATH' });
});
