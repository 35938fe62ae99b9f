// Items of the GPU quick pick, built from `wavecast/listGpus`.
import { formatGpuList, formatTflops, formatUsd } from './presentation';
import type { CompileMode, GpuInfo, ListGpusResult } from './protocol';
import { parallelTargetLabel, type ParallelTargetSetting } from './settings';

// Items are labelled by GPU id ("H100-SXM"): short, and what settings and
// `wavecast predict --gpu` take; the driver name goes in the detail line.

export interface GpuPickItem {
  /** GPU id sent back to the daemon; '' for a multi-GPU target. */
  id: string;
  /** A multi-GPU target (wavecast.parallelTargets) instead of a GPU. */
  parallelTarget?: ParallelTargetSetting;
  /** A torch.compile mode (wavecast.compile) every target is predicted in, instead of a GPU. */
  compileMode?: CompileMode;
  label: string;
  description: string;
  detail: string;
  picked: boolean;
}

/** The GPU's highest dense peak with the precision it is reached at. */
export function peakThroughput(gpu: GpuInfo): { tflops: number; precision: string } {
  const candidates: [number, string][] = [
    [gpu.peak_tflops.bf16, 'BF16'],
    [gpu.peak_tflops.fp16, 'FP16'],
    [gpu.peak_tflops.tf32, 'TF32'],
    [gpu.peak_tflops.fp32, 'FP32'],
  ];
  let best: [number, string] = [0, 'FP32'];
  for (const candidate of candidates) {
    if (Number.isFinite(candidate[0]) && candidate[0] > best[0]) best = candidate;
  }
  return { tflops: best[0], precision: best[1] };
}

function formatPricePerHour(price: number): string {
  return price <= 0 ? 'no price' : `${formatUsd(price)}/h`;
}

/**
 * One item per GPU, in the daemon's order, with the current targets ticked.
 * `targets` may hold ids or names (settings written by hand use either).
 */
export function buildGpuPickItems(list: ListGpusResult, targets: readonly string[] = list.targets): GpuPickItem[] {
  const wanted = new Set(targets.map((t) => t.toLowerCase()));
  return list.gpus.map((gpu) => {
    const peak = peakThroughput(gpu);
    // AMD GPUs have no CUDA compute capability; their compute units stand in for SMs.
    const architecture = gpu.compute_capability ? [`sm_${gpu.compute_capability.replace('.', '')}`, `${gpu.sms} SMs`] : [`${gpu.sms} CUs`];
    return {
      id: gpu.id,
      label: gpu.id,
      description: [
        `${gpu.memory_gib} GiB`,
        peak.tflops > 0 ? `${formatTflops(peak.tflops)} ${peak.precision}` : null,
        formatPricePerHour(gpu.price_per_hour_usd),
      ]
        .filter((part): part is string => part !== null)
        .join(' · '),
      detail: [
        gpu.name,
        ...architecture,
        `${Math.round(gpu.memory_bandwidth_gbs).toLocaleString('en-US')} GB/s`,
        `FP32 ${formatTflops(gpu.peak_tflops.fp32)}`,
        `${gpu.host_link.name} ${Math.round(gpu.host_link.host_to_device_gbs)} GB/s to it`,
      ].join(' · '),
      picked: wanted.has(gpu.id.toLowerCase()) || wanted.has(gpu.name.toLowerCase()),
    };
  });
}

/** Placeholder text of the picker: what is selected now. */
export function pickerPlaceholder(list: ListGpusResult): string {
  return `Target GPUs (now: ${formatGpuList(list.targets, 4)}). Space toggles, Enter applies.`;
}

/** The GPUs a node of the usual kind holds: what the offered multi-GPU targets span. */
export const OFFERED_NODE_GPUS = 8;

function targetKey(target: ParallelTargetSetting): string {
  return parallelTargetLabel(target).toLowerCase().replace(/[\s×]/g, '');
}

/** What the last results said of the model, which the offered layouts follow. */
export interface ModelFacts {
  /** The matrices' precision: the results' gemm precision (torch's name). */
  matrixPrecision?: string;
  /** The most experts a mixture-of-experts layer routes tokens to (0 or absent: none). */
  routedExperts?: number;
}

/** The most of a node's ranks that share out `experts` evenly (1: none to share). */
function expertRanks(experts: number): number {
  let ranks = 1;
  for (let r = 2; experts > 0 && r <= OFFERED_NODE_GPUS; r++) if (OFFERED_NODE_GPUS % r === 0 && experts % r === 0) ranks = r;
  return ranks;
}

/** The layout words of a 16-bit matrix precision (torch's name, as the results give it). */
const HALF_PRECISION_WORDS: Readonly<Record<string, string>> = { bfloat16: 'bf16', float16: 'fp16' };

/**
 * Multi-GPU targets beside the GPUs: those in the settings (ticked) and, for each current
 * target GPU, DDP, FSDP and FSDP with activation recomputation (what a model too large for
 * FSDP alone needs) over its usual 8-GPU node (the daemon picks the node). When the script's
 * matrices compute in bf16 or fp16 (`model.matrixPrecision`), also
 * FSDP with that mixed precision: parameters gathered in it, gradients reduced in fp32
 * (torchtitan's default). When its mixture-of-experts layers route tokens to
 * `model.routedExperts` experts, also FSDP with the experts spread over as many of the node's ranks as divide
 * them (expert parallelism).
 */
export function buildParallelPickItems(
  list: ListGpusResult,
  current: readonly ParallelTargetSetting[],
  model: ModelFacts = {},
): GpuPickItem[] {
  const offered: ParallelTargetSetting[] = [...current];
  const layouts = ['DDP', 'FSDP', 'FSDP, recompute'];
  const half = model.matrixPrecision === undefined ? undefined : HALF_PRECISION_WORDS[model.matrixPrecision];
  if (half) layouts.push(`FSDP, param ${half}, reduce fp32`);
  const ep = expertRanks(model.routedExperts ?? 0);
  if (ep > 1) layouts.push(`FSDP, ep${ep}`);
  for (const gpu of list.targets) {
    for (const layout of layouts) offered.push(`${OFFERED_NODE_GPUS}x ${gpu}, ${layout}`);
  }
  const seen = new Set<string>();
  const picked = new Set(current.map(targetKey));
  const items: GpuPickItem[] = [];
  for (const target of offered) {
    const key = targetKey(target);
    if (seen.has(key)) continue;
    seen.add(key);
    items.push({
      id: '',
      parallelTarget: target,
      label: parallelTargetLabel(target),
      description: 'multi-GPU',
      detail: 'one rank predicted with its communication (docs/parallel.md); compared side by side in the results panel',
      picked: picked.has(key),
    });
  }
  return items;
}

/** A torch.compile mode the picker offers, with what it means. */
export interface CompileChoice {
  mode: CompileMode;
  description: string;
}

/**
 * wavecast.compile's modes from the extension's package.json (its enum, "script" aside), so
 * the picker offers what the setting takes; none when the manifest has no such setting.
 */
export function compileChoices(packageJson: unknown): CompileChoice[] {
  const manifest = packageJson as
    | { contributes?: { configuration?: { properties?: Record<string, { enum?: unknown[]; enumDescriptions?: unknown[] }> } } }
    | undefined;
  const setting = manifest?.contributes?.configuration?.properties?.['wavecast.compile'];
  const modes = Array.isArray(setting?.enum) ? setting.enum : [];
  const descriptions = Array.isArray(setting?.enumDescriptions) ? setting.enumDescriptions : [];
  const out: CompileChoice[] = [];
  modes.forEach((mode, i) => {
    if (typeof mode === 'string' && mode !== 'script')
      out.push({ mode: mode as CompileMode, description: typeof descriptions[i] === 'string' ? (descriptions[i] as string) : '' });
  });
  return out;
}

export function compileLabel(mode: CompileMode): string {
  return mode === 'default' ? 'torch.compile' : `torch.compile, ${mode}`;
}

/** One item per torch.compile mode, the current one ticked: picking one predicts every target compiled. */
export function buildCompilePickItems(choices: readonly CompileChoice[], current: CompileMode | null): GpuPickItem[] {
  return choices.map(({ mode, description }) => ({
    id: '',
    compileMode: mode,
    label: compileLabel(mode),
    description: 'every target',
    detail: description.replace(/`/g, ''),
    picked: mode === current,
  }));
}
