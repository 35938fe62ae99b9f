import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { missingTokenMessage, planTokenMigration } from '../../src/logic/remoteToken';

test('a settings token is moved once, into an empty secret storage, and the user told to remove it', () => {
  const plan = planTokenMigration('legacy', null, false);
  assert.equal(plan.store, 'legacy');
  assert.match(plan.notice!, /moved the remote token from your settings to VS Code's secret storage/);
  assert.match(plan.notice!, /Remove "wavecast.remoteToken" from your settings.json/);
});

test('a stored token wins over the settings one; the user is told once, then only the log says so', () => {
  const first = planTokenMigration('legacy', 'stored', false);
  assert.equal(first.store, null);
  assert.match(first.notice!, /in the settings is ignored; the token in the secret storage is used/);
  const later = planTokenMigration('legacy', null, true);
  assert.deepEqual([later.store, later.notice], [null, null], 'a token cleared after the move stays cleared');
  assert.match(later.log!, /is ignored/);
});

test('no settings token: nothing to do', () => {
  assert.deepEqual(planTokenMigration(null, 'stored', false), { store: null, notice: null, log: null });
});

test('the missing-token message names the command', () => {
  assert.match(missingTokenMessage(), /run "wavecast: Set Remote Token"/);
});
