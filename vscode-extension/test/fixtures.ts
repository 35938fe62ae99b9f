// Shared fixture loaders for the tests.
import * as fs from 'fs';
import * as path from 'path';
import type { ListGpusResult, Results } from '../src/logic/protocol';

const fixtureDir = path.join(__dirname, '..', '..', 'test', 'fixtures');

export function loadResults(): Results {
  return JSON.parse(fs.readFileSync(path.join(fixtureDir, 'results-resnet50.json'), 'utf8')) as Results;
}

/**
 * Results with the host model's keys (gpu_ms, host_ms, gpu_idle_ms, host_bound):
 * `wavecast predict samples/small_cnn.py --gpu H100-SXM,T4 --batch-size 8 --json`,
 * small kernels that leave both GPUs waiting for the CPU. results-resnet50.json
 * predates these keys and stands for an older daemon.
 */
export function loadHostBoundResults(): Results {
  return JSON.parse(fs.readFileSync(path.join(fixtureDir, 'results-small-cnn.json'), 'utf8')) as Results;
}

/** The host-bound results as a daemon that names its tracer sends them (prediction.torch_version). */
export function loadTracedResults(): Results {
  const results = loadHostBoundResults();
  results.prediction!.torch_version = '2.11.0+cu130';
  results.prediction!.traced_with = 'torch 2.11.0+cu130';
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
      compute_capability: '9.0',
      sms: 132,
      memory_gib: 80,
      memory_bandwidth_gbs: 3350,
      peak_tflops: { fp32: 66.9, tf32: 494.7, fp16: 989.4, bf16: 989.4 },
      host_link: { name: 'PCIe 5.0 x16', host_to_device_gbs: 57.1, device_to_host_gbs: 52.8 },
      price_per_hour_usd: 2.99,
    },
    {
      id: 'A100-SXM4-40GB',
      name: 'NVIDIA A100-SXM4-40GB',
      compute_capability: '8.0',
      sms: 108,
      memory_gib: 40,
      memory_bandwidth_gbs: 1555,
      peak_tflops: { fp32: 19.5, tf32: 156, fp16: 312, bf16: 312 },
      host_link: { name: 'PCIe 4.0 x16', host_to_device_gbs: 25.1, device_to_host_gbs: 26.8 },
      price_per_hour_usd: 1.29,
    },
    {
      id: 'T4',
      name: 'Tesla T4',
      compute_capability: '7.5',
      sms: 40,
      memory_gib: 16,
      memory_bandwidth_gbs: 320,
      peak_tflops: { fp32: 8.1, tf32: 0, fp16: 65, bf16: 0 },
      host_link: { name: 'PCIe 3.0 x16', host_to_device_gbs: 12.2, device_to_host_gbs: 12.9 },
      price_per_hour_usd: 0.35,
    },
    {
      id: 'MI210',
      name: 'AMD Instinct MI210',
      compute_capability: '',
      sms: 104,
      memory_gib: 64,
      memory_bandwidth_gbs: 1638.4,
      peak_tflops: { fp32: 22.6, tf32: 0, fp16: 181, bf16: 181 },
      host_link: { name: 'PCIe 4.0 x16', host_to_device_gbs: 25.1, device_to_host_gbs: 26.8 },
      price_per_hour_usd: 0,
    },
  ],
  targets: ['H100-SXM', 'T4'],
};
