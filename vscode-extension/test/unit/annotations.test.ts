import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { iterationTimes, statusView } from '../../src/logic/annotations';
import { loadHostBoundResults, loadResults } from '../fixtures';

test('status bar shows targets and the analysis state', () => {
  assert.equal(statusView('running', ['H100-SXM', 'T4'], null).text, '$(pulse) wavecast: H100-SXM, T4');
  assert.equal(
    statusView('running', ['H100-SXM', 'T4'], null, null, null, 'reduce-overhead').text,
    '$(pulse) wavecast: H100-SXM, T4 · torch.compile, reduce-overhead',
  );
  const busy = statusView('running', ['H100-SXM'], { state: 'analyzing', message: 'tracing train.py', percentage: 41.6 });
  assert.equal(busy.text, '$(sync~spin) wavecast: H100-SXM 42%');
  assert.match(busy.tooltip, /tracing train.py/);
  const error = statusView('running', ['T4'], { state: 'error', message: 'worker crashed' });
  assert.equal(error.severity, 'error');
  assert.match(error.tooltip, /worker crashed/);
  assert.equal(statusView('failed', [], null).text, '$(error) wavecast: default GPUs');
  const traced = statusView('running', ['T4'], { state: 'idle', message: 'idle' }, null, 'traced with torch 2.11.0+cu130 (/home/ada/venv)');
  assert.equal(traced.tooltip, 'wavecast: idle\n\ntraced with torch 2.11.0+cu130 (/home/ada/venv)\n\nClick to pick target GPUs.');
  assert.equal(statusView('running', ['T4'], { state: 'idle', message: 'idle' }).tooltip, 'wavecast: idle\n\nClick to pick target GPUs.');
  const untrusted = statusView('untrusted', ['T4'], null);
  assert.equal(untrusted.severity, 'warning');
  assert.match(untrusted.tooltip, /untrusted workspace/);
});

test('iteration times per GPU mark the host-bound ones', () => {
  assert.equal(iterationTimes(loadHostBoundResults().prediction!.summaries), 'H100-SXM 3.60 ms (host-bound) · T4 3.60 ms (host-bound)');
  assert.equal(iterationTimes(loadResults().prediction!.summaries), 'H100-SXM 359 ms · A100-SXM4-40GB 617 ms · L4 1.47 s · T4 3.19 s');
  const summaries = loadHostBoundResults().prediction!.summaries;
  summaries[1].host_bound = false;
  assert.equal(iterationTimes(summaries), 'H100-SXM 3.60 ms (host-bound) · T4 3.60 ms');
});
