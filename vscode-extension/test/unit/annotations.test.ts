import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { lineDecorations, statusView } from '../../src/logic/annotations';
import { loadResults } from '../fixtures';

test('status bar shows targets and the analysis state', () => {
  assert.equal(statusView('running', ['H100-SXM', 'T4'], null).text, '$(pulse) H100-SXM, T4');
  const busy = statusView('running', ['H100-SXM'], { state: 'analyzing', message: 'tracing train.py', percentage: 41.6 });
  assert.equal(busy.text, '$(sync~spin) H100-SXM 42%');
  assert.match(busy.tooltip, /tracing train.py/);
  const error = statusView('running', ['T4'], { state: 'error', message: 'worker crashed' });
  assert.equal(error.severity, 'error');
  assert.match(error.tooltip, /worker crashed/);
  assert.equal(statusView('failed', [], null).text, '$(error) default GPUs');
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
  assert.match(line27.hover, /58 ops: convolution, batch_norm, relu_, add_/);
  assert.match(line27.hover, /\| T4 \| 368 ms \| 737 ms \| 0 ms \| 1.11 s \| 35% \|/);
  assert.equal(lineDecorations(results.prediction!, '/elsewhere.py').length, 0);
});
