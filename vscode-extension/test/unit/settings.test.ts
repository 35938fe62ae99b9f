import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { initializationOptions, parseBatchSize, parseRemoteAddress, readSettings } from '../../src/logic/settings';

test('defaults when nothing is set', () => {
  const { settings, problems } = readSettings({});
  assert.deepEqual(problems, []);
  assert.deepEqual(settings, {
    targets: [],
    trigger: 'onSave',
    batchSize: null,
    pythonEnv: null,
    serverPath: null,
    remote: null,
    remoteToken: null,
    display: 'inlayHints',
    initializeTimeout: 30,
  });
});

test('valid values are kept; targets trimmed and deduplicated', () => {
  const { settings, problems } = readSettings({
    targets: [' H100-SXM ', 'T4', 'T4'],
    trigger: 'manual',
    batchSize: 64,
    pythonEnv: '/opt/venv',
    serverPath: '/usr/local/bin/wavecast',
    remoteAddress: '10.0.0.5:7325',
    remoteToken: 'secret',
    display: 'decorations',
  });
  assert.deepEqual(problems, []);
  assert.deepEqual(settings.targets, ['H100-SXM', 'T4']);
  assert.equal(settings.trigger, 'manual');
  assert.equal(settings.batchSize, 64);
  assert.deepEqual(settings.remote, { host: '10.0.0.5', port: 7325 });
  assert.equal(settings.display, 'decorations');
});

test('the initialize time-out is a number of seconds; anything else falls back to 30 s with a message', () => {
  assert.equal(readSettings({ initializeTimeout: 5 }).settings.initializeTimeout, 5);
  for (const bad of [0, -1, '10', Number.NaN, 1e9]) {
    const { settings, problems } = readSettings({ initializeTimeout: bad });
    assert.equal(settings.initializeTimeout, 30);
    assert.equal(problems.length, 1);
    assert.match(problems[0], /wavecast.initializeTimeout must be a number of seconds from 1 to 3600/);
  }
});

test('invalid values fall back to defaults and say what to write', () => {
  const { settings, problems } = readSettings({
    targets: ['A100', 7, ''],
    trigger: 'always',
    batchSize: 0,
    display: 'sidebar',
    remoteAddress: 'localhost',
  });
  assert.deepEqual(settings.targets, ['A100']);
  assert.equal(settings.trigger, 'onSave');
  assert.equal(settings.batchSize, null);
  assert.equal(settings.display, 'inlayHints');
  assert.equal(settings.remote, null);
  assert.equal(problems.length, 6);
  assert.match(problems[0], /ignored 7/);
  assert.match(problems.join('\n'), /"onSave" or "manual"/);
  assert.match(problems.join('\n'), /at least 1/);
  assert.match(problems.join('\n'), /host:port/);
});

test('a remote address without a token is reported', () => {
  const { problems } = readSettings({ remoteAddress: '127.0.0.1:7325' });
  assert.equal(problems.length, 1);
  assert.match(problems[0], /remoteToken is empty/);
});

test('parseBatchSize accepts whole numbers in range only', () => {
  assert.equal(parseBatchSize(' 48 '), 48);
  assert.deepEqual(parseBatchSize('1.5'), { error: '"1.5" is not a whole number; enter a batch size such as 32.' });
  assert.deepEqual(parseBatchSize('-3'), { error: '"-3" is not a whole number; enter a batch size such as 32.' });
  assert.deepEqual(parseBatchSize('0'), { error: 'the batch size must be at least 1.' });
  assert.match((parseBatchSize('99999999') as { error: string }).error, /at most 1048576/);
});

test('parseRemoteAddress handles names, IPv4, IPv6 and bad ports', () => {
  assert.deepEqual(parseRemoteAddress('gpu-box:7325'), { host: 'gpu-box', port: 7325 });
  assert.deepEqual(parseRemoteAddress('[::1]:9000'), { host: '::1', port: 9000 });
  assert.match((parseRemoteAddress('host:70000') as { error: string }).error, /outside 1–65535/);
  assert.match((parseRemoteAddress('::1:9000') as { error: string }).error, /not host:port/);
});

test('initialization options carry the token only for a remote daemon', () => {
  const local = readSettings({ remoteToken: 'abc' }).settings;
  assert.equal(initializationOptions(local).token, undefined);
  const remote = readSettings({ remoteAddress: '127.0.0.1:7325', remoteToken: 'abc' }).settings;
  assert.equal(initializationOptions(remote).token, 'abc');
});

test('initialization options carry the protocol version and settings', () => {
  const { settings } = readSettings({ targets: ['T4'], batchSize: 32, trigger: 'manual', pythonEnv: '/opt/venv' });
  assert.deepEqual(initializationOptions(settings), {
    protocolVersion: 1,
    targets: ['T4'],
    batchSize: 32,
    trigger: 'manual',
    pythonEnv: '/opt/venv',
  });
});
