import { strict as assert } from 'node:assert';
import * as fs from 'fs';
import * as path from 'path';
import { test } from 'node:test';
import {
  formatBytes,
  formatCount,
  formatGpuList,
  formatMs,
  formatShare,
  formatTflops,
  formatUsd,
  lineShare,
  tracedWith,
} from '../../src/logic/presentation';

// docs/presentation.md's examples, which the daemon's tests/server/presentation_test.cpp runs too.
// Its `lines` (labels and hovers) are the daemon's alone: the extension shows what the daemon rendered.
const casesFile = path.join(__dirname, '..', '..', '..', '..', 'tests', 'presentation', 'cases.json');

type NumberCase = [number | null, string];
interface Cases {
  formatMs: NumberCase[];
  formatShare: NumberCase[];
  formatBytes: NumberCase[];
  formatUsd: NumberCase[];
  formatCount: NumberCase[];
}

const cases = JSON.parse(fs.readFileSync(casesFile, 'utf8')) as Cases;
const numberFormats: Record<keyof Cases, (value: number) => string> = {
  formatMs,
  formatShare,
  formatBytes,
  formatUsd,
  formatCount,
};

test('every number section of the shared cases is run here', () => {
  assert.deepEqual(Object.keys(cases).sort(), ['about', ...Object.keys(numberFormats), 'lines'].sort());
});

for (const [name, format] of Object.entries(numberFormats)) {
  test(`${name} reads as the shared cases say`, () => {
    const section = cases[name as keyof typeof numberFormats];
    assert.ok(section.length > 0);
    for (const [value, expected] of section) {
      assert.equal(format(value ?? Number.NaN), expected, `${name}(${value})`);
    }
  });
}

test('a line’s share is its largest over the GPUs', () => {
  assert.equal(lineShare({ per_gpu: [] }), 0);
  const times = (share: number) => ({ gpu: 'x', input_ms: 0, forward_ms: 0, backward_ms: 0, optimizer_ms: 0, total_ms: 0, share, gpu_ms: 0, gpu_idle_ms: 0, host_bound: false });
  assert.equal(lineShare({ per_gpu: [times(0.12), times(0.35), times(0.2)] }), 0.35);
});

test('traced with: the torch; nothing when the trace does not say', () => {
  assert.equal(
    tracedWith({ torch_version: '2.11.0+cu130', traced_with: 'torch 2.11.0+cu130 (/home/ada/venv)' }),
    'traced with torch 2.11.0+cu130 (/home/ada/venv)',
  );
  assert.equal(tracedWith({ torch_version: '', traced_with: 'torch (unknown version)' }), null);
});

test('formatTflops and formatGpuList, for the picker and the status bar', () => {
  assert.equal(formatTflops(989.4), '989 TFLOP/s');
  assert.equal(formatTflops(8.14), '8.1 TFLOP/s');
  assert.equal(formatTflops(0), '–');
  assert.equal(formatGpuList([]), 'default GPUs');
  assert.equal(formatGpuList(['H100']), 'H100');
  assert.equal(formatGpuList(['H100', 'A100']), 'H100, A100');
  assert.equal(formatGpuList(['H100', 'A100', 'L4', 'T4']), 'H100, A100 +2');
});
