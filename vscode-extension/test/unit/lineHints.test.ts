import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { hintLabels, hintRange, LatestRequests } from '../../src/logic/lineHints';

const at = (line: number, label: string | { value: string }[]) => ({ position: { line, character: 4 }, label });

test('hint labels: plain or in parts, one per line, only lines of the document and never empty', () => {
  const labels = hintLabels(
    [at(3, 'H100-SXM 1.50 ms (15%)'), at(7, [{ value: 'T4 ' }, { value: '12.0 ms' }]), at(3, 'second on line 3'), at(9, ''), at(12, 'past the end'), at(-1, 'before')],
    10,
  );
  assert.deepEqual(labels, [
    { line: 3, text: 'H100-SXM 1.50 ms (15%)' },
    { line: 7, text: 'T4 12.0 ms' },
  ]);
  assert.deepEqual(hintLabels(null, 10), []);
});

test('the range asked for: what is visible and a screen above and below, inside the document', () => {
  assert.deepEqual(hintRange([{ start: 100, end: 140 }], 300), { start: { line: 59, character: 0 }, end: { line: 181, character: 0 } });
  assert.deepEqual(hintRange([{ start: 0, end: 30 }], 50), { start: { line: 0, character: 0 }, end: { line: 49, character: 0 } });
  // Folded code shows as several stretches: from the first to the last.
  assert.deepEqual(hintRange([{ start: 50, end: 60 }, { start: 90, end: 99 }], 1000), {
    start: { line: 0, character: 0 },
    end: { line: 149, character: 0 },
  });
  assert.deepEqual(hintRange([], 20), { start: { line: 0, character: 0 }, end: { line: 19, character: 0 } }, 'nothing known visible: all of it');
  assert.deepEqual(hintRange([], 0), { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } });
});

test('only the newest request per key counts', () => {
  const requests = new LatestRequests<object>();
  const [left, right] = [{}, {}];
  const first = requests.begin(left);
  const other = requests.begin(right);
  const second = requests.begin(left);
  assert.equal(requests.isLatest(left, first), false);
  assert.equal(requests.isLatest(left, second), true);
  assert.equal(requests.isLatest(right, other), true, 'keys do not supersede each other');
  assert.equal(requests.isLatest({}, second), false);
});
