import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { RestartPolicy } from '../../src/logic/restartPolicy';

test('restarts a few times, then stops and says what to do', () => {
  let now = 0;
  const policy = new RestartPolicy(3, 60_000, () => now);
  const decisions = [1, 2, 3, 4].map(() => {
    now += 1000;
    return policy.recordCrash();
  });
  assert.deepEqual(
    decisions.map((d) => d.restart),
    [true, true, true, false],
  );
  assert.match(decisions[0].message, /attempt 1 of 3/);
  assert.match(decisions[3].message, /crashed 4 times in 1 minutes/);
  assert.match(decisions[3].message, /Open the server log/);
});

test('crashes older than the window do not count', () => {
  let now = 0;
  const policy = new RestartPolicy(2, 60_000, () => now);
  policy.recordCrash();
  now = 30_000;
  policy.recordCrash();
  now = 70_000;
  const third = policy.recordCrash();
  assert.equal(third.restart, true);
  assert.equal(third.crashesInWindow, 2);
});

test('reset gives a fresh budget after a manual restart', () => {
  const policy = new RestartPolicy(1, 60_000, () => 0);
  policy.recordCrash();
  assert.equal(policy.recordCrash().restart, false);
  policy.reset();
  assert.equal(policy.recordCrash().restart, true);
});
