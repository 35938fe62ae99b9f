import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { iterationTimes, lineDecorations, statusView } from '../../src/logic/annotations';
import { loadHostBoundResults, loadResults } from '../fixtures';

test('status bar shows targets and the analysis state', () => {
  assert.equal(statusView('running', ['H100-SXM', 'T4'], null).text, '$(pulse) wavecast: H100-SXM, T4');
  const busy = statusView('running', ['H100-SXM'], { state: 'analyzing', message: 'tracing train.py', percentage: 41.6 });
  assert.equal(busy.text, '$(sync~spin) wavecast: H100-SXM 42%');
  assert.match(busy.tooltip, /tracing train.py/);
  const error = statusView('running', ['T4'], { state: 'error', message: 'worker crashed' });
  assert.equal(error.severity, 'error');
  assert.match(error.tooltip, /worker crashed/);
  assert.equal(statusView('failed', [], null).text, '$(error) wavecast: default GPUs');
  const untrusted = statusView('untrusted', ['T4'], null);
  assert.equal(untrusted.severity, 'warning');
  assert.match(untrusted.tooltip, /untrusted workspace/);
});

test('one decoration per predicted line of the file, with a hover table', () => {
  const results = loadResults();
  const decorations = lineDecorations(results.prediction!, '/home/ada/projects/resnet/train_resnet.py');
  assert.equal(decorations.length, 10, 'the line-0 entry (ops outside the project) is not drawn');
  const line27 = decorations.find((d) => d.line === 27)!;
  assert.equal(line27.text, 'H100-SXM 124 ms · A100-SXM4-40GB 214 ms · L4 509 ms · T4 1.11 s (35%)');
  assert.match(line27.hover, /^\*\*wavecast\*\* — predicted time of this line per training iteration \(batch 192\)\n/);
  assert.match(line27.hover, /\n58 ops: `aten::convolution`, `aten::batch_norm`, `aten::relu_`, `aten::add_`\n/);
  assert.match(line27.hover, /\| T4 \| 368 ms \| 737 ms \| 0 ms \| 1.11 s \| – \| 35% \|/);
  assert.equal(lineDecorations(results.prediction!, '/elsewhere.py').length, 0);
});

test('with the host model the hover adds GPU busy time and names the host-bound GPUs', () => {
  const results = loadHostBoundResults();
  const decorations = lineDecorations(results.prediction!, '/home/ada/projects/cnn/small_cnn.py');
  const line22 = decorations.find((d) => d.line === 22)!;
  assert.equal(line22.text, 'H100-SXM 0.464 ms · T4 0.653 ms (18%)');
  assert.match(line22.hover, /\| GPU \| forward \| backward \| optimizer \| total \| GPU busy \| share \|/);
  assert.match(line22.hover, /\| H100-SXM \| 0.254 ms \| 0.210 ms \| 0 ms \| 0.464 ms \| 0.058 ms \| 13% \|/);
  assert.match(line22.hover, /\| T4 \| 0.452 ms \| 0.200 ms \| 0 ms \| 0.653 ms \| 0.456 ms \| 18% \|/);
  assert.match(
    line22.hover,
    /\*\*Host-bound\*\* on H100-SXM \(GPU idle 0.406 ms of 0.464 ms\): the GPU waits for the CPU to issue this line's work; a larger batch, CUDA graphs or torch.compile/,
  );
  const line47 = decorations.find((d) => d.line === 47)!;
  assert.match(line47.hover, /on H100-SXM \(GPU idle 1.01 ms of 1.02 ms\), T4 \(GPU idle 1.01 ms of 1.03 ms\):/);
  // Line 25 is not host-bound anywhere: no advice.
  assert.doesNotMatch(decorations.find((d) => d.line === 25)!.hover, /Host-bound/);
});

test('results without the host model show GPU busy as missing and no host-bound GPU', () => {
  const decorations = lineDecorations(loadResults().prediction!, '/home/ada/projects/resnet/train_resnet.py');
  assert.ok(decorations.every((d) => !/Host-bound/.test(d.hover)));
  const rows = decorations.flatMap((d) => d.hover.split('\n').filter((l) => /^\| [A-Z]/.test(l) && !l.startsWith('| GPU |')));
  assert.equal(rows.length, 4 * decorations.length);
  for (const row of rows) assert.match(row, / \| – \| [\d.<]+% \|$/);
});

test('iteration times per GPU mark the host-bound ones', () => {
  assert.equal(iterationTimes(loadHostBoundResults().prediction!.summaries), 'H100-SXM 3.60 ms (host-bound) · T4 3.60 ms (host-bound)');
  assert.equal(iterationTimes(loadResults().prediction!.summaries), 'H100-SXM 359 ms · A100-SXM4-40GB 617 ms · L4 1.47 s · T4 3.19 s');
  const summaries = loadHostBoundResults().prediction!.summaries;
  summaries[1].host_bound = false;
  assert.equal(iterationTimes(summaries), 'H100-SXM 3.60 ms (host-bound) · T4 3.60 ms');
});
