// What each .vsix carries, as `vsce ls` lists it for a copy of the extension
// beside a staged daemon (server/, as `npm run stage:linux-x64` leaves it):
// the universal package never the daemon, the linux-x64 one the daemon
// without wavecast-learn (the LibTorch training helper) or the docs.
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';

const root = path.join(__dirname, '..', '..', '..');
const vsce = path.join(root, 'node_modules', '@vscode', 'vsce', 'vsce');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));

/** What `cmake --install build --prefix server` puts there (cmake/Install.cmake). */
const STAGED = [
  'server/bin/wavecast',
  'server/lib/wavecast/wavecast-worker',
  'server/lib/wavecast/wavecast-learn',
  'server/share/wavecast/data/gpus.json',
  'server/share/wavecast/data/weights/gemm.json',
  'server/share/wavecast/python/wavecast_tracer/__init__.py',
  'server/share/wavecast/samples/small_cnn.py',
  'server/share/doc/wavecast/README.md',
];
const COPIED = ['package.json', 'README.md', 'CHANGELOG.md', 'LICENSE', '.vscodeignore', '.vscodeignore.linux-x64', 'media/results.css', manifest.icon];
const BUILT = ['dist/extension.js', 'dist/webview.js'];

let copy = '';

before(() => {
  copy = fs.mkdtempSync(path.join(os.tmpdir(), 'wavecast-package-'));
  for (const file of COPIED) {
    fs.mkdirSync(path.dirname(path.join(copy, file)), { recursive: true });
    fs.copyFileSync(path.join(root, file), path.join(copy, file));
  }
  for (const file of [...BUILT, ...STAGED]) {
    fs.mkdirSync(path.dirname(path.join(copy, file)), { recursive: true });
    fs.writeFileSync(path.join(copy, file), 'placeholder\n');
  }
});

after(() => fs.rmSync(copy, { recursive: true, force: true }));

function listed(...args: string[]): string[] {
  const output = execFileSync(process.execPath, [vsce, 'ls', '--no-dependencies', ...args], { cwd: copy, encoding: 'utf8' });
  return output.split('\n').filter((line) => line !== '').sort();
}

const EXTENSION_FILES = ['CHANGELOG.md', 'LICENSE', 'README.md', ...BUILT, 'media/icon.png', 'media/results.css', 'package.json'].sort();

test('the universal package never carries server/, even when a daemon is staged there', () => {
  assert.deepEqual(listed(), EXTENSION_FILES);
});

test('the linux-x64 package carries the daemon, its worker, data and tracer, without wavecast-learn or the docs', () => {
  const files = listed('--ignoreFile', '.vscodeignore.linux-x64');
  assert.deepEqual(
    files.filter((f) => f.startsWith('server/')),
    [
      'server/bin/wavecast',
      'server/lib/wavecast/wavecast-worker',
      'server/share/wavecast/data/gpus.json',
      'server/share/wavecast/data/weights/gemm.json',
      'server/share/wavecast/python/wavecast_tracer/__init__.py',
    ],
  );
  assert.deepEqual(
    files.filter((f) => !f.startsWith('server/')),
    EXTENSION_FILES,
    'the rest as in the universal package',
  );
});

test('only package:linux-x64 stages the daemon, stripped, and packs it for its target', () => {
  assert.doesNotMatch(manifest.scripts.package, /server|ignoreFile|--target/);
  assert.match(manifest.scripts['stage:linux-x64'], /cmake --install .* --prefix server --strip$/);
  assert.match(manifest.scripts['package:linux-x64'], /^npm run stage:linux-x64 && vsce package .*--target linux-x64 --ignoreFile \.vscodeignore\.linux-x64$/);
});
