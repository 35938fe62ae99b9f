import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { bundledWorkerPath, missingBundledLibraries, missingLibraries, missingLibrariesMessage } from '../../src/logic/bundledServer';
import { fakeInstall, loaderError } from '../fixtures';

const tempPrefix = () => fs.mkdtempSync(path.join(os.tmpdir(), 'wavecast-bundled-'));

test('the loader’s message names the missing libraries; usage text and other errors name none', () => {
  const stderr = loaderError('/ext/server/lib/wavecast/wavecast-worker', 'libpython3.11.so.1.0') + loaderError('/ext/server/bin/wavecast', 'libpython3.11.so.1.0');
  assert.deepEqual(missingLibraries(stderr), ['libpython3.11.so.1.0']);
  assert.deepEqual(missingLibraries(loaderError('x', 'libboost_json.so.1.81.0')), ['libboost_json.so.1.81.0']);
  assert.deepEqual(missingLibraries('usage: wavecast-worker --request-fd N …\nStarted by wavecast; not meant to be run by hand.\n'), []);
  assert.deepEqual(missingLibraries(''), []);
});

test('one message says what to install: the Debian package when known', () => {
  assert.equal(
    missingLibrariesMessage(['libpython3.11.so.1.0']),
    'The wavecast daemon this extension carries needs libpython3.11.so.1.0, which is not installed. ' +
      'Install on Debian and Ubuntu: sudo apt install libpython3.11, then run "wavecast: Restart Server".',
  );
  assert.equal(
    missingLibrariesMessage(['libpython3.11.so.1.0', 'libfoo.so.2']),
    'The wavecast daemon this extension carries needs libpython3.11.so.1.0, libfoo.so.2, which are not installed. ' +
      'Install on Debian and Ubuntu: sudo apt install libpython3.11; the package of your distribution that provides libfoo.so.2, then run "wavecast: Restart Server".',
  );
});

test('the worker sits where cmake --install puts it', () => {
  assert.equal(bundledWorkerPath('/ext/wavecast/server/bin/wavecast'), '/ext/wavecast/server/lib/wavecast/wavecast-worker');
});

test('the check runs the daemon and its worker: a worker without libpython is found', async () => {
  const server = fakeInstall(tempPrefix(), '', loaderError('wavecast-worker', 'libpython3.11.so.1.0'));
  try {
    assert.deepEqual(await missingBundledLibraries(server), ['libpython3.11.so.1.0']);
  } finally {
    fs.rmSync(path.dirname(path.dirname(server)), { recursive: true, force: true });
  }
});

test('the check passes when both start (the worker printing its usage), and names the daemon’s own missing libraries', async () => {
  const healthy = fakeInstall(tempPrefix(), '', 'usage: wavecast-worker --request-fd N\n');
  const broken = fakeInstall(tempPrefix(), loaderError('wavecast', 'libboost_json.so.1.81.0'), 'usage: wavecast-worker --request-fd N\n');
  try {
    assert.deepEqual(await missingBundledLibraries(healthy), []);
    assert.deepEqual(await missingBundledLibraries(broken), ['libboost_json.so.1.81.0']);
    assert.deepEqual(await missingBundledLibraries('/nonexistent/bin/wavecast'), [], 'nothing to run is not a missing library');
  } finally {
    for (const server of [healthy, broken]) fs.rmSync(path.dirname(path.dirname(server)), { recursive: true, force: true });
  }
});
