import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { formatBytes, formatCount, formatGpuList, formatMs, formatShare, formatTflops, formatUsd } from '../../src/logic/format';

test('formatMs keeps about three significant digits and switches units', () => {
  assert.equal(formatMs(0), '0 ms');
  assert.equal(formatMs(0.0042), '4.2 µs');
  assert.equal(formatMs(0.042), '0.042 ms');
  assert.equal(formatMs(4.2139), '4.21 ms');
  assert.equal(formatMs(42.13), '42.1 ms');
  assert.equal(formatMs(421.3), '421 ms');
  assert.equal(formatMs(2570.6), '2.57 s');
  assert.equal(formatMs(12_345), '12.3 s');
  assert.equal(formatMs(Number.NaN), '–');
});

test('formatBytes uses binary units', () => {
  assert.equal(formatBytes(512), '512 B');
  assert.equal(formatBytes(1536), '1.5 KiB');
  assert.equal(formatBytes(16 * 1024 ** 3), '16.0 GiB');
  assert.equal(formatBytes(80 * 1024 ** 3), '80.0 GiB');
  assert.equal(formatBytes(200 * 1024 ** 3), '200 GiB');
  assert.equal(formatBytes(-1), '–');
});

test('formatCount, formatUsd, formatShare and formatTflops', () => {
  assert.equal(formatCount(74.7), '74.7');
  assert.equal(formatCount(12_345.6), '12,346');
  assert.equal(formatUsd(null), '—');
  assert.equal(formatUsd(2.99), '$2.99');
  assert.equal(formatUsd(0.00093), '$0.00093');
  assert.equal(formatUsd(1234.5), '$1235');
  assert.equal(formatShare(0.3464), '35%');
  assert.equal(formatShare(0.0013), '0.1%');
  assert.equal(formatShare(0), '0%');
  assert.equal(formatShare(0.0004), '<0.1%');
  assert.equal(formatTflops(989.4), '989 TFLOP/s');
  assert.equal(formatTflops(8.14), '8.1 TFLOP/s');
  assert.equal(formatTflops(0), '–');
});

test('formatGpuList abbreviates long selections', () => {
  assert.equal(formatGpuList([]), 'default GPUs');
  assert.equal(formatGpuList(['H100']), 'H100');
  assert.equal(formatGpuList(['H100', 'A100']), 'H100, A100');
  assert.equal(formatGpuList(['H100', 'A100', 'L4', 'T4']), 'H100, A100 +2');
});
