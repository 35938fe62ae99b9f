import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { buildChartModel, configurationTable, hostBoundLabel, iterationDetail, summarizeOps } from '../../src/logic/chartData';
import type { ParallelConfiguration } from '../../src/logic/protocol';
import { loadHostBoundResults, loadResults, loadTracedResults } from '../fixtures';

test('three bar charts with one bar per GPU, scaled to the largest value', () => {
  const model = buildChartModel(loadResults());
  assert.equal(model.title, 'train_resnet.py');
  assert.equal(model.subtitle, "batch size 192 · 4 GPUs · analytic roofline (FLOPs and bytes against each GPU's spec-sheet peaks)");
  assert.equal(model.tracedWith, null, 'an older daemon does not say what traced');
  assert.equal(buildChartModel(loadTracedResults()).tracedWith, 'traced with torch 2.11.0+cu130');
  assert.deepEqual(
    model.charts.map((c) => c.id),
    ['iteration', 'throughput', 'cost'],
  );
  const iteration = model.charts[0];
  assert.deepEqual(
    iteration.bars.map((b) => b.label),
    ['359 ms', '617 ms', '1.47 s', '3.19 s'],
  );
  assert.equal(iteration.bars[3].fraction, 1);
  assert.ok(Math.abs(iteration.bars[0].fraction - 358.662 / 3185.0) < 1e-9);
  assert.equal(iteration.bars[0].name, 'NVIDIA H100 80GB HBM3');
  assert.deepEqual(
    iteration.bars.map((b) => b.best),
    [true, false, false, false],
  );
  // Stacked forward/backward/optimizer segments add up to the bar.
  const segments = iteration.bars[0].segments;
  assert.deepEqual(
    segments.map((s) => s.kind),
    ['forward', 'backward', 'optimizer'],
  );
  const sum = segments.reduce((total, s) => total + s.fraction, 0);
  assert.ok(Math.abs(sum - iteration.bars[0].fraction) < 1e-3);

  const throughput = model.charts[1];
  assert.equal(throughput.better, 'higher');
  assert.equal(throughput.bars.find((b) => b.best)?.gpu, 'H100-SXM');
  const cost = model.charts[2];
  assert.equal(cost.bars.find((b) => b.best)?.gpu, 'A100-SXM4-40GB');
  assert.equal(cost.bars[1].label, '$0.0011');
  assert.equal(cost.note, null);
});

test('a script that waits for its batches shows the wait before the forward pass', () => {
  const results = loadResults();
  const summary = results.prediction!.summaries[0];
  summary.input_ms = 100;
  summary.iteration_ms += 100;
  const bar = buildChartModel(results).charts[0].bars.find((b) => b.gpu === summary.gpu)!;
  assert.deepEqual(
    bar.segments.map((s) => [s.kind, s.label.split(' ')[0]]),
    [['input', 'waiting'], ['forward', 'forward'], ['backward', 'backward'], ['optimizer', 'optimizer']],
  );
  const sum = bar.segments.reduce((total, s) => total + s.fraction, 0);
  assert.ok(Math.abs(sum - bar.fraction) < 1e-3);
});

test('a GPU without a price (cost 0) gets an empty cost bar and a note', () => {
  const results = loadResults();
  results.prediction!.summaries[2].cost_per_1k_samples_usd = 0;
  results.prediction!.summaries[3].cost_per_1k_samples_usd = 0;
  const cost = buildChartModel(results).charts[2];
  assert.deepEqual(
    cost.bars.map((b) => b.value === null),
    [false, false, true, true],
  );
  assert.equal(cost.bars[2].fraction, 0);
  assert.equal(cost.bars[3].label, 'no price');
  assert.equal(cost.note, 'No rental price for L4, T4: add price_per_hour_usd for it in ~/.config/wavecast/gpus.json.');
});

test('memory bars compare the peak to each capacity on one scale', () => {
  const model = buildChartModel(loadResults());
  const [h100, , , t4] = model.memory;
  assert.equal(h100.capacityFraction, 1);
  assert.ok(h100.fits);
  assert.equal(t4.fits, false);
  assert.equal(t4.label, '16.4 GiB of 16.0 GiB — out of memory');
  assert.ok(t4.peakFraction > t4.capacityFraction);
  assert.deepEqual(
    t4.segments.map((s) => s.kind),
    ['weights', 'gradients', 'optimizer-state', 'activations', 'workspace'],
  );
  assert.deepEqual(model.warnings, [
    'aten::nonzero x2 has no formula of its own and was predicted approximately, as its closest family (elementwise)',
    'out of memory on T4: the iteration needs about 16.4 GiB, the GPU has 16.0 GiB; lower the batch size or choose a larger GPU',
    "the script's CUDA tensors were traced on the CPU (no GPU is used in shape or cpu mode; shapes are the same)",
  ]);
});

test('line rows are sorted by line with a cell per GPU column', () => {
  const model = buildChartModel(loadResults());
  assert.deepEqual(
    model.gpuColumns.map((c) => c.gpu),
    ['H100-SXM', 'A100-SXM4-40GB', 'L4', 'T4'],
  );
  assert.equal(model.rows.length, 11);
  // Ops outside the project's lines (line 0) come last.
  assert.deepEqual(
    model.rows.map((r) => r.line),
    [24, 25, 26, 27, 28, 29, 30, 41, 43, 45, 0],
  );
  assert.equal(model.rows[10].fileLabel, 'other code');
  const row27 = model.rows[3];
  assert.equal(row27.fileLabel, 'train_resnet.py:27');
  assert.equal(row27.ops, 'convolution, batch_norm, relu_, add_');
  assert.equal(row27.cells[0].label, '124 ms');
  assert.equal(row27.cells[0].shareLabel, '35%');
  assert.equal(row27.cells[3].label, '1.11 s');
  assert.equal(row27.opCount, 58);
  assert.equal(row27.maxShare, 0.3471);
});

test('errors and missing predictions produce a message instead of charts', () => {
  const failed = buildChartModel({
    uri: 'file:///w/train.py',
    state: 'error',
    content_version: 3,
    prediction: null,
    error: { kind: 'missing_provider', message: 'wavecast_input() is missing', file: '/w/train.py', line: 12, hint: 'Define wavecast_input(batch_size=32).' },
  });
  assert.equal(failed.errorText, 'missing_provider: wavecast_input() is missing');
  assert.deepEqual(failed.errorLocation, { file: '/w/train.py', line: 12 });
  assert.equal(failed.charts.length, 0);
  const pending = buildChartModel({ uri: 'file:///w/train.py', state: 'analyzing', content_version: null, prediction: null, error: null });
  assert.equal(pending.subtitle, 'Analysing…');
});

test('summarizeOps drops the aten:: prefix, counts repeats and truncates', () => {
  assert.equal(summarizeOps(['aten::conv2d', 'aten::relu', 'aten::conv2d']), 'conv2d ×2, relu');
  assert.equal(summarizeOps(['a', 'b', 'c', 'd', 'e', 'f'], 4), 'a, b, c, d, +2 more');
});

test('with the host model the iteration chart shows wall time, GPU busy time and host-bound GPUs', () => {
  const model = buildChartModel(loadHostBoundResults());
  const iteration = model.charts[0];
  assert.equal(iteration.title, 'Iteration time (wall)');
  assert.deepEqual(
    iteration.bars.map((b) => [b.gpu, b.label, b.detail, b.hostBound]),
    [
      ['H100-SXM', '3.60 ms', 'GPU busy 0.284 ms · CPU 3.59 ms', 'host-bound: GPU idle 3.32 ms of 3.60 ms'],
      ['T4', '3.60 ms', 'GPU busy 1.32 ms · CPU 3.59 ms', 'host-bound: GPU idle 2.28 ms of 3.60 ms'],
    ],
  );
  assert.equal(
    iteration.note,
    'Host-bound on H100-SXM, T4: the GPU waits for the CPU to issue work for more than half the iteration; ' +
      'a larger batch, CUDA graphs or torch.compile (fewer, larger kernels) would use it better.',
  );
  // The phases are wall time too and still add up to the bar.
  const sum = iteration.bars[0].segments.reduce((total, s) => total + s.value, 0);
  assert.ok(Math.abs(sum - 3.599) < 1e-9);
  // Only the iteration chart carries host details.
  assert.ok(model.charts.slice(1).every((c) => c.bars.every((b) => b.detail === null && b.hostBound === null)));
});

test('a GPU that is not host-bound gets its GPU time but no marker or advice', () => {
  const results = loadHostBoundResults();
  const t4 = results.prediction!.summaries[1];
  t4.host_bound = false;
  const iteration = buildChartModel(results).charts[0];
  assert.equal(iteration.bars[1].detail, 'GPU busy 1.32 ms · CPU 3.59 ms');
  assert.equal(iteration.bars[1].hostBound, null);
  assert.equal(iteration.bars[0].hostBound, 'host-bound: GPU idle 3.32 ms of 3.60 ms');
  assert.match(iteration.note!, /^Host-bound on H100-SXM: /);
  results.prediction!.summaries[0].host_bound = false;
  assert.equal(buildChartModel(results).charts[0].note, null);
});

test('results from a daemon without the host model show no host details', () => {
  const model = buildChartModel(loadResults());
  assert.equal(model.charts[0].title, 'Iteration time');
  assert.ok(model.charts.every((c) => c.bars.every((b) => b.detail === null && b.hostBound === null)));
  assert.equal(model.charts[0].note, null);
  assert.ok(model.rows.every((r) => !r.hostBound && r.cells.every((c) => !c.hostBound && c.title === '')));
  assert.equal(iterationDetail(loadResults().prediction!.summaries[0]), null);
});

test('host-bound lines are marked per GPU, with wall, GPU and idle time in the tooltip', () => {
  const model = buildChartModel(loadHostBoundResults());
  assert.deepEqual(
    model.gpuColumns.map((c) => c.gpu),
    ['H100-SXM', 'T4'],
  );
  assert.deepEqual(
    model.rows.map((r) => [r.line, r.hostBound, r.cells.map((c) => c.hostBound)]),
    [
      [22, true, [true, false]],
      [23, true, [true, false]],
      [24, true, [true, false]],
      [25, false, [false, false]],
      [26, true, [true, false]],
      [45, true, [true, true]],
      [47, true, [true, true]],
    ],
  );
  const [h100, t4] = model.rows[0].cells;
  assert.equal(h100.label, '0.464 ms');
  assert.equal(h100.title, 'wall 0.464 ms · GPU busy 0.058 ms · host-bound: GPU idle 0.406 ms of 0.464 ms');
  assert.equal(t4.title, 'wall 0.653 ms · GPU busy 0.456 ms');
  assert.equal(model.rows[6].cells[1].title, 'wall 1.03 ms · GPU busy 0.014 ms · host-bound: GPU idle 1.01 ms of 1.03 ms');
});

test('hostBoundLabel needs host_bound true; the idle time is optional', () => {
  assert.equal(hostBoundLabel({ host_bound: true, gpu_idle_ms: 3.26 }, 3.6), 'host-bound: GPU idle 3.26 ms of 3.60 ms');
  assert.equal(hostBoundLabel({ host_bound: true }, 3.6), 'host-bound');
  assert.equal(hostBoundLabel({ host_bound: false, gpu_idle_ms: 1 }, 3.6), null);
  assert.equal(hostBoundLabel({}, 3.6), null);
});

function configuration(fields: Record<string, unknown>): ParallelConfiguration {
  const base = {
    system: 'HGX-H100', nodes: 1, global_batch: 32, sequence_length: 1024, pp: 1, bubble_ms: 0,
    communication_ms: 3, communication_exposed_ms: 1, fits_in_memory: true, cost_per_1k_samples_usd: 0.5,
    stages: [{ memory: { peak_bytes: 8 * 2 ** 30 } }],
  };
  return { ...base, ...fields } as unknown as ParallelConfiguration;
}

test('multi-GPU configurations side by side, the best of each comparable row marked', () => {
  const ddp = configuration({ label: '8× H100-SXM, DDP', iteration_ms: 60, samples_per_second: 533.3, samples_per_second_per_gpu: 66.7, tokens_per_second_per_gpu: 68266, mfu: 0.42 });
  const fsdp = configuration({
    label: '8× H100-SXM, FSDP', iteration_ms: 58, samples_per_second: 551.7, samples_per_second_per_gpu: 69.0, tokens_per_second_per_gpu: 70621, mfu: 0.43,
    communication_exposed_ms: 1.5, stages: [{ memory: { peak_bytes: 6 * 2 ** 30 } }], fits_in_memory: true,
  });
  const table = configurationTable([ddp, fsdp], [{ label: '16× H100-SXM, tp 16', message: '--tp 16 spans more than the 8 GPUs of one node', gpu: 'H100-SXM', system: 'HGX-H100', kind: 'tp_across_nodes' }]);
  assert.ok(table);
  assert.deepEqual(table.columns, [
    { label: '8× H100-SXM, DDP', detail: 'HGX-H100 · 1 node · global batch 32' },
    { label: '8× H100-SXM, FSDP', detail: 'HGX-H100 · 1 node · global batch 32' },
  ]);
  const row = (label: string) => table.rows.find((r) => r.label === label)!;
  assert.deepEqual(row('Iteration').cells, ['60.0 ms', '58.0 ms']);
  assert.equal(row('Iteration').best, 1);
  assert.equal(row('… exposed').best, 0, 'less exposed communication is better');
  assert.deepEqual(row('Memory per rank').cells, ['8.0 GiB', '6.0 GiB']);
  assert.equal(row('Memory per rank').best, 1);
  assert.deepEqual(row('Pipeline bubble').cells, ['–', '–'], 'no pipeline, no bubble');
  assert.equal(row('Communication').best, null, 'more communication hidden is not worse');
  assert.deepEqual(table.refusals, ['16× H100-SXM, tp 16: --tp 16 spans more than the 8 GPUs of one node']);
  assert.equal(configurationTable(undefined, undefined), null);
});

test("a layout's own advisories read as notes under the table, with its label", () => {
  const message = 'tp 2 splits the Linear layers, not the 8 grouped GEMMs of the mixture of experts';
  const tp = configuration({
    label: '8× H100-SXM, DDP, dp 4, tp 2',
    advisories: [{ kind: 'replicated_experts', severity: 'info', message, count: 8, tensor_parallel: 2 }],
  });
  const older = configuration({ label: '8× H100-SXM, DDP' }); // a daemon before per-layout advisories
  assert.deepEqual(configurationTable([tp, older], [])!.notes, [`8× H100-SXM, DDP, dp 4, tp 2: ${message}`]);
});

test('a configuration with microbatches says how they were priced under its label', () => {
  const pipeline = configuration({
    label: '4× H100-SXM, DDP, dp 2, pp 2 (4 microbatches, 1F1B)', pp: 2, microbatches: 4,
    microbatch_pricing: 'traced', microbatch_text: 'microbatches of 8 priced at their own shapes',
  });
  const [column] = configurationTable([pipeline], [])!.columns;
  assert.equal(column.detail, 'HGX-H100 · 1 node · global batch 32 · microbatches of 8 priced at their own shapes');
  const whole = configuration({ label: '8× H100-SXM, DDP', microbatch_pricing: 'whole', microbatch_text: '' });
  assert.equal(configurationTable([whole], [])!.columns[0].detail, 'HGX-H100 · 1 node · global batch 32');
});
