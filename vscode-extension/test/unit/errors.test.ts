import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { checkServerCapability, isInvalidParamsError, isProtocolMismatchError, mismatchMessage, notRunningMessage, requestFailureMessage } from '../../src/logic/errors';
import { REQUIRED_METHODS } from '../../src/logic/protocol';

test('a matching server with every method passes', () => {
  const check = checkServerCapability({ wavecast: { protocol_version: 2, methods: [...REQUIRED_METHODS, 'wavecast/extra'] } });
  assert.equal(check.ok, true);
});

test('a newer daemon asks to update the extension, an older one the daemon', () => {
  const newer = checkServerCapability({ wavecast: { protocol_version: 3, methods: REQUIRED_METHODS } });
  assert.equal(newer.ok, false);
  assert.equal(newer.update, 'extension');
  assert.match(newer.message, /daemon speaks version 3, this extension version 2/);
  assert.match(newer.message, /Update the wavecast VS Code extension/);
  const older = mismatchMessage(0);
  assert.equal(older.update, 'daemon');
  assert.match(older.message, /Update the wavecast daemon/);
});

test('a version-1 daemon (camelCase protocolVersion) is asked to be updated', () => {
  const v1 = checkServerCapability({ wavecast: { protocolVersion: 1, methods: REQUIRED_METHODS } });
  assert.equal(v1.ok, false);
  assert.equal(v1.update, 'daemon');
  assert.equal(
    v1.message,
    'wavecast protocol mismatch: the daemon speaks version 1, this extension version 2. ' +
      'Update the wavecast daemon (rebuild or reinstall `wavecast`, or point wavecast.serverPath to a newer one).',
  );
});

test('a server without wavecast capabilities or with missing methods is refused', () => {
  assert.match(checkServerCapability(undefined).message, /did not advertise wavecast capabilities/);
  const partial = checkServerCapability({ wavecast: { protocol_version: 2, methods: ['wavecast/listGpus'] } });
  assert.equal(partial.ok, false);
  assert.match(partial.message, /lacks wavecast\/setTargets, wavecast\/setBatchSize, wavecast\/analyze, wavecast\/results/);
});

test('the daemon’s own mismatch error is recognised', () => {
  assert.equal(isProtocolMismatchError('wavecast protocol version mismatch: client 2, server 1; update the daemon'), true);
  assert.equal(isProtocolMismatchError('spawn wavecast ENOENT'), false);
});

test('a failed request names the action, the reason and what to do', () => {
  assert.equal(
    requestFailureMessage('analysing train.py', new Error('Connection got disposed.')),
    'wavecast: analysing train.py failed: Connection got disposed. Open the server log for details; restart the server if it keeps failing.',
  );
  assert.match(requestFailureMessage('picking target GPUs', 'boom'), /picking target GPUs failed: boom\./);
  assert.match(requestFailureMessage('x', new Error('')), /x failed: unknown error\./);
});

test('"not running" says why the last start failed, when it did', () => {
  assert.equal(notRunningMessage('starting', 'old'), 'The wavecast daemon is still starting; try again in a moment.');
  assert.equal(notRunningMessage('failed', 'The wavecast daemon did not start: EACCES'), 'The wavecast daemon is not running: The wavecast daemon did not start: EACCES');
  assert.equal(notRunningMessage('stopped', null), 'The wavecast daemon is not running. Restart it to use wavecast.');
});

test('an InvalidParams response error is recognised by its code', () => {
  assert.equal(isInvalidParamsError(Object.assign(new Error("unknown GPU 'H10'"), { code: -32602 })), true);
  assert.equal(isInvalidParamsError(Object.assign(new Error('internal'), { code: -32603 })), false);
  assert.equal(isInvalidParamsError('unknown GPU'), false);
});
