import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { buildGpuPickItems, buildParallelPickItems, peakThroughput, pickerPlaceholder } from '../../src/logic/picker';
import { GPU_LIST } from '../fixtures';

test('each GPU becomes an item with memory, peak throughput and price', () => {
  const items = buildGpuPickItems(GPU_LIST);
  assert.deepEqual(
    items.map((i) => i.id),
    ['H100-SXM', 'A100-SXM4-40GB', 'T4', 'MI210'],
  );
  assert.equal(items[0].label, 'H100-SXM');
  assert.equal(items[0].description, '80 GiB · 989 TFLOP/s BF16 · $2.99/h');
  assert.equal(
    items[0].detail,
    'NVIDIA H100 80GB HBM3 · sm_90 · 132 SMs · 3,350 GB/s · FP32 66.9 TFLOP/s · PCIe 5.0 x16 57 GB/s to it',
  );
  assert.equal(items[2].description, '16 GiB · 65.0 TFLOP/s FP16 · $0.35/h');
  // No CUDA compute capability (AMD) and no known price.
  assert.equal(items[3].description, '64 GiB · 181 TFLOP/s BF16 · no price');
  assert.equal(items[3].detail, 'AMD Instinct MI210 · 104 CUs · 1,638 GB/s · FP32 22.6 TFLOP/s · PCIe 4.0 x16 25 GB/s to it');
});

test('current targets are ticked, matched by id or name, case-insensitively', () => {
  assert.deepEqual(
    buildGpuPickItems(GPU_LIST).map((i) => i.picked),
    [true, false, true, false],
  );
  assert.deepEqual(
    buildGpuPickItems(GPU_LIST, ['nvidia a100-sxm4-40gb', 'mi210']).map((i) => i.picked),
    [false, true, false, true],
  );
});

test('peak throughput falls back to FP32 when no tensor-core precision is listed', () => {
  const gpu = { ...GPU_LIST.gpus[2], peak_tflops: { ...GPU_LIST.gpus[2].peak_tflops, fp16: 0 } };
  assert.deepEqual(peakThroughput(gpu), { tflops: 8.1, precision: 'FP32' });
});

test('the placeholder names the current targets', () => {
  assert.equal(pickerPlaceholder(GPU_LIST), 'Target GPUs (now: H100-SXM, T4). Space toggles, Enter applies.');
});

test('multi-GPU targets: DDP, FSDP and FSDP with recomputation per target GPU; FSDP in the script\'s 16-bit precision too', () => {
  const labels = (precision?: string) => buildParallelPickItems(GPU_LIST, [], { matrixPrecision: precision }).map((i) => i.label);
  assert.deepEqual(labels(), [
    '8× H100-SXM, DDP',
    '8× H100-SXM, FSDP',
    '8× H100-SXM, FSDP, recompute',
    '8× T4, DDP',
    '8× T4, FSDP',
    '8× T4, FSDP, recompute',
  ]);
  assert.deepEqual(labels('float32'), labels());
  assert.deepEqual(labels('bfloat16').filter((label) => label.includes('param')), [
    '8× H100-SXM, FSDP, param bf16, reduce fp32',
    '8× T4, FSDP, param bf16, reduce fp32',
  ]);
  assert.equal(labels('float16')[3], '8× H100-SXM, FSDP, param fp16, reduce fp32');
});

test('a mixture of experts is also offered FSDP with its experts over as many ranks of the node as share them out', () => {
  const experts = (routedExperts: number) =>
    buildParallelPickItems(GPU_LIST, [], { routedExperts })
      .map((i) => i.label)
      .filter((label) => label.includes(', ep'));
  assert.deepEqual(experts(64), ['8× H100-SXM, FSDP, ep8', '8× T4, FSDP, ep8']);
  assert.deepEqual(experts(6), ['8× H100-SXM, FSDP, ep2', '8× T4, FSDP, ep2']);
  assert.deepEqual(experts(4)[0], '8× H100-SXM, FSDP, ep4');
  assert.deepEqual(experts(0), []);
  assert.deepEqual(experts(7), [], 'no rank count of the node shares out 7 experts');
});
