// Shared fixture loaders for the tests.
import * as fs from 'fs';
import * as path from 'path';
import type { ListGpusResult, ResultsResponse } from '../src/logic/protocol';

const fixtureDir = path.join(__dirname, '..', '..', 'test', 'fixtures');

export function loadResults(): ResultsResponse {
  return JSON.parse(fs.readFileSync(path.join(fixtureDir, 'results-resnet50.json'), 'utf8')) as ResultsResponse;
}

/**
 * Results with the host model's keys (gpu_ms, host_ms, gpu_idle_ms, host_bound):
 * `wavecast predict samples/small_cnn.py --gpu H100-SXM,T4 --batch-size 8 --json`,
 * small kernels that leave both GPUs waiting for the CPU. results-resnet50.json
 * predates these keys and stands for an older daemon.
 */
export function loadHostBoundResults(): ResultsResponse {
  return JSON.parse(fs.readFileSync(path.join(fixtureDir, 'results-small-cnn.json'), 'utf8')) as ResultsResponse;
}

/** The host-bound results as a daemon that names its tracer sends them (prediction.torch_version, python_env). */
export function loadTracedResults(): ResultsResponse {
  const results = loadHostBoundResults();
  results.prediction!.torch_version = '2.11.0+cu130';
  results.prediction!.python_env = '/home/ada/.venvs/torch/bin/python';
  return results;
}

/** What glibc's dynamic loader prints for a program whose library is missing. */
export const loaderError = (program: string, library: string) =>
  `${program}: error while loading shared libraries: ${library}: cannot open shared object file: No such file or directory\n`;

/**
 * A daemon installed in `prefix` as `cmake --install` lays it out, whose
 * programs print `daemonStderr` / `workerStderr` and exit as the loader
 * (127) or they themselves would; returns the daemon's path.
 */
export function fakeInstall(prefix: string, daemonStderr: string, workerStderr: string): string {
  const program = (file: string, stderr: string, status: number) => {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, `#!/bin/sh\nprintf '%s' '${stderr.replace(/'/g, "'\\''")}' >&2\nexit ${status}\n`, { mode: 0o755 });
  };
  const server = path.join(prefix, 'bin', 'wavecast');
  program(server, daemonStderr, daemonStderr ? 127 : 0);
  program(path.join(prefix, 'lib', 'wavecast', 'wavecast-worker'), workerStderr, workerStderr.includes('error while loading') ? 127 : 64);
  return server;
}

export function fixturePath(name: string): string {
  return path.join(fixtureDir, name);
}

export const GPU_LIST: ListGpusResult = {
  gpus: [
    {
      id: 'H100-SXM',
      name: 'NVIDIA H100 80GB HBM3',
      computeCapability: '9.0',
      smCount: 132,
      memoryGiB: 80,
      memoryBandwidthGBs: 3350,
      fp32Tflops: 66.9,
      tf32Tflops: 494.7,
      fp16Tflops: 989.4,
      bf16Tflops: 989.4,
      pricePerHourUsd: 2.99,
    },
    {
      id: 'A100-SXM4-40GB',
      name: 'NVIDIA A100-SXM4-40GB',
      computeCapability: '8.0',
      smCount: 108,
      memoryGiB: 40,
      memoryBandwidthGBs: 1555,
      fp32Tflops: 19.5,
      tf32Tflops: 156,
      fp16Tflops: 312,
      bf16Tflops: 312,
      pricePerHourUsd: 1.29,
    },
    {
      id: 'T4',
      name: 'Tesla T4',
      computeCapability: '7.5',
      smCount: 40,
      memoryGiB: 16,
      memoryBandwidthGBs: 320,
      fp32Tflops: 8.1,
      tf32Tflops: 0,
      fp16Tflops: 65,
      bf16Tflops: 0,
      pricePerHourUsd: 0.35,
    },
    {
      id: 'MI210',
      name: 'AMD Instinct MI210',
      computeCapability: '',
      smCount: 104,
      memoryGiB: 64,
      memoryBandwidthGBs: 1638.4,
      fp32Tflops: 22.6,
      tf32Tflops: 0,
      fp16Tflops: 181,
      bf16Tflops: 181,
      pricePerHourUsd: 0,
    },
  ],
  targets: ['H100-SXM', 'T4'],
};
