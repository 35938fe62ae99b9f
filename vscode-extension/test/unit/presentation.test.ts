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
  lineHover,
  lineLabel,
} from '../../src/logic/presentation';
import type { LinePrediction, Prediction } from '../../src/logic/protocol';

// docs/presentation.md's examples, which the daemon's tests/server/presentation_test.cpp runs too.
const casesFile = path.join(__dirname, '..', '..', '..', '..', 'tests', 'presentation', 'cases.json');

type NumberCase = [number | null, string];
interface LineCase {
  name: string;
  prediction: Pick<Prediction, 'batch_size' | 'method' | 'gpus'>;
  line: LinePrediction;
  label: string;
  hover: string[];
}
interface Cases {
  formatMs: NumberCase[];
  formatShare: NumberCase[];
  formatBytes: NumberCase[];
  formatUsd: NumberCase[];
  formatCount: NumberCase[];
  lines: LineCase[];
}

const cases = JSON.parse(fs.readFileSync(casesFile, 'utf8')) as Cases;
const numberFormats: Record<Exclude<keyof Cases, 'lines'>, (value: number) => string> = {
  formatMs,
  formatShare,
  formatBytes,
  formatUsd,
  formatCount,
};

test('every section of the shared cases is run here', () => {
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

for (const c of cases.lines) {
  test(`line label and hover: ${c.name}`, () => {
    assert.equal(lineLabel(c.line), c.label);
    assert.equal(lineHover(c.prediction, c.line), c.hover.join('\n'));
  });
}

test('formatTflops and formatGpuList, for the picker and the status bar', () => {
  assert.equal(formatTflops(989.4), '989 TFLOP/s');
  assert.equal(formatTflops(8.14), '8.1 TFLOP/s');
  assert.equal(formatTflops(0), '–');
  assert.equal(formatGpuList([]), 'default GPUs');
  assert.equal(formatGpuList(['H100']), 'H100');
  assert.equal(formatGpuList(['H100', 'A100']), 'H100, A100');
  assert.equal(formatGpuList(['H100', 'A100', 'L4', 'T4']), 'H100, A100 +2');
});
