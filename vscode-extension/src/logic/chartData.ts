// Turns a results response into what the results panel draws: bar charts per
// GPU, memory against capacity and the per-line table. Pure, so the webview
// bundle and the unit tests share it.
import { formatBytes, formatCount, formatMs, formatShare, formatUsd, lineShare, tracedWith } from './presentation';
import type { GpuSummary, SpanGpuTime, LinePrediction, ParallelConfiguration, ParallelRefusal, Results } from './protocol';

export interface BarSegment {
  kind: string;
  label: string;
  value: number;
  /** Width as a fraction of the chart's full scale. */
  fraction: number;
}

// GPUs are labelled by id ("H100-SXM"), with the driver name
// ("NVIDIA H100 80GB HBM3") as the tooltip.

export interface Bar {
  gpu: string;
  /** Driver name, for tooltips. */
  name: string;
  value: number | null;
  label: string;
  fraction: number;
  best: boolean;
  segments: BarSegment[];
  /** Iteration chart: what the wall time is made of ("GPU busy 0.284 ms · CPU 3.60 ms"); null without host-model keys. */
  detail: string | null;
  /** Iteration chart: "host-bound: GPU idle 3.32 ms of 3.60 ms" when the GPU idles most of the iteration. */
  hostBound: string | null;
}

export interface BarChart {
  id: 'iteration' | 'throughput' | 'cost';
  title: string;
  better: 'lower' | 'higher';
  bars: Bar[];
  /** Why some bars are empty, if any are. */
  note: string | null;
}

export interface MemoryBar {
  gpu: string;
  name: string;
  segments: BarSegment[];
  peakBytes: number;
  capacityBytes: number;
  peakFraction: number;
  capacityFraction: number;
  fits: boolean;
  label: string;
}

export interface LineCell {
  gpu: string;
  totalMs: number;
  share: number;
  label: string;
  shareLabel: string;
  /** The GPU idles for more than half of the line's (wall) time. */
  hostBound: boolean;
  /** Tooltip: wall and GPU time, and the idle time when host-bound; '' without host-model keys. */
  title: string;
}

export interface LineRow {
  file: string;
  /** 0 gathers ops with no line in the project; such a row links nowhere. */
  line: number;
  fileLabel: string;
  ops: string;
  opCount: number;
  cells: LineCell[];
  /** Largest share of the iteration over the GPUs, in [0, 1], for the heat bar. */
  maxShare: number;
  /** Host-bound on at least one GPU. */
  hostBound: boolean;
}

/** Multi-GPU configurations side by side: one column each, one row per figure. */
export interface ConfigurationTable {
  columns: { label: string; detail: string }[];
  rows: { label: string; cells: string[]; best: number | null }[];
  /** Targets the model cannot run: "16× H100-SXM, tp 16: --tp 16 spans more than ...". */
  refusals: string[];
  /** What a layout tells of itself: "8× H100-SXM, tp 2: tp 2 splits the Linear layers, not ...". */
  notes: string[];
}

export interface ChartModel {
  state: Results['state'];
  title: string;
  subtitle: string;
  /** Which torch and Python environment traced the script, when the daemon says. */
  tracedWith: string | null;
  errorText: string | null;
  errorLocation: { file: string; line: number } | null;
  hint: string | null;
  charts: BarChart[];
  memory: MemoryBar[];
  gpuColumns: { gpu: string; name: string }[];
  rows: LineRow[];
  warnings: string[];
  /** Null without multi-GPU configurations. */
  configurations: ConfigurationTable | null;
}

/** The rank with the most memory: every stage must fit. */
function largestRankBytes(c: ParallelConfiguration): number {
  return Math.max(0, ...c.stages.map((s) => s.memory.peak_bytes));
}

export function configurationTable(parallel: ParallelConfiguration[] | undefined, refusals: ParallelRefusal[] | undefined): ConfigurationTable | null {
  const configs = parallel ?? [];
  const refused = (refusals ?? []).map((r) => `${r.label}: ${r.message}`);
  // Older daemons send no advisories per layout.
  const notes = configs.flatMap((c) => (c.advisories ?? []).map((a) => `${c.label}: ${a.message}`));
  if (configs.length === 0 && refused.length === 0) return null;
  const row = (label: string, value: (c: ParallelConfiguration) => number | null, format: (v: number) => string, better: 'lower' | 'higher' | null) => {
    const values = configs.map(value);
    let best: number | null = null;
    if (better && configs.length > 1) {
      values.forEach((v, i) => {
        if (v === null || !Number.isFinite(v) || v <= 0) return;
        const current = best === null ? null : values[best];
        if (current === null || current === undefined || (better === 'lower' ? v < current : v > current)) best = i;
      });
    }
    return { label, cells: values.map((v) => (v === null ? '–' : format(v))), best };
  };
  return {
    columns: configs.map((c) => ({
      label: c.label,
      detail:
        `${c.system} · ${c.nodes} node${c.nodes === 1 ? '' : 's'} · global batch ${c.global_batch}` +
        (c.microbatch_text ? ` · ${c.microbatch_text}` : ''),
    })),
    rows: [
      row('Iteration', (c) => c.iteration_ms, formatMs, 'lower'),
      row('Samples/s', (c) => c.samples_per_second, formatCount, 'higher'),
      row('Samples/s per GPU', (c) => c.samples_per_second_per_gpu, formatCount, 'higher'),
      row('Tokens/s per GPU', (c) => (c.sequence_length > 0 ? c.tokens_per_second_per_gpu : null), formatCount, 'higher'),
      row('MFU', (c) => c.mfu, formatShare, 'higher'),
      row('Communication', (c) => c.communication_ms, formatMs, null),
      row('… exposed', (c) => c.communication_exposed_ms, formatMs, 'lower'),
      row('Pipeline bubble', (c) => (c.pp > 1 ? c.bubble_ms : null), formatMs, null),
      row('Memory per rank', largestRankBytes, formatBytes, 'lower'),
      {
        label: 'Fits in memory',
        cells: configs.map((c) => (c.fits_in_memory ? 'yes' : 'out of memory')),
        best: null,
      },
      row('Cost per 1,000 samples', (c) => (c.cost_per_1k_samples_usd > 0 ? c.cost_per_1k_samples_usd : null), formatUsd, 'lower'),
    ],
    refusals: refused,
    notes,
  };
}

/** "host-bound: GPU idle 3.32 ms of 3.60 ms" for a host-bound span, else null (also for older daemons' results). */
export function hostBoundLabel(span: { host_bound?: boolean; gpu_idle_ms?: number }, wallMs: number): string | null {
  if (span.host_bound !== true) return null;
  return span.gpu_idle_ms !== undefined ? `host-bound: GPU idle ${formatMs(span.gpu_idle_ms)} of ${formatMs(wallMs)}` : 'host-bound';
}

/** "GPU busy 0.284 ms · CPU 3.60 ms" for an iteration; null when the daemon predates the host model. */
export function iterationDetail(s: GpuSummary): string | null {
  if (s.gpu_ms === undefined) return null;
  const host = s.host_ms !== undefined ? ` · CPU ${formatMs(s.host_ms)}` : '';
  return `GPU busy ${formatMs(s.gpu_ms)}${host}`;
}

function lineCellTitle(entry: SpanGpuTime): string {
  if (entry.gpu_ms === undefined) return '';
  const parts = [`wall ${formatMs(entry.total_ms)}`, `GPU busy ${formatMs(entry.gpu_ms)}`];
  const hostBound = hostBoundLabel(entry, entry.total_ms);
  if (hostBound) parts.push(hostBound);
  return parts.join(' · ');
}

export function baseName(file: string): string {
  const parts = file.split(/[\\/]/);
  return parts[parts.length - 1] || file;
}

function barChart(
  id: BarChart['id'],
  title: string,
  better: BarChart['better'],
  summaries: GpuSummary[],
  value: (s: GpuSummary) => number | null,
  label: (v: number) => string,
  segments: (s: GpuSummary, scale: number) => BarSegment[] = () => [],
  annotate: (s: GpuSummary) => Pick<Bar, 'detail' | 'hostBound'> = () => ({ detail: null, hostBound: null }),
): BarChart {
  const values = summaries.map(value).map((v) => (v !== null && Number.isFinite(v) ? v : null));
  const present = values.filter((v): v is number => v !== null);
  const scale = present.length > 0 ? Math.max(...present) : 0;
  const bestValue = present.length > 1 ? (better === 'lower' ? Math.min(...present) : Math.max(...present)) : null;
  const bars = summaries.map((s, i): Bar => {
    const v = values[i];
    return {
      gpu: s.gpu,
      name: s.name,
      value: v,
      label: v === null ? 'no price' : label(v),
      fraction: v === null || scale <= 0 ? 0 : v / scale,
      best: v !== null && v === bestValue,
      segments: v === null || scale <= 0 ? [] : segments(s, scale),
      ...annotate(s),
    };
  });
  const missing = bars.filter((b) => b.value === null).map((b) => b.gpu);
  return {
    id,
    title,
    better,
    bars,
    note:
      missing.length > 0
        ? `No rental price for ${missing.join(', ')}: add price_per_hour_usd for it in ~/.config/wavecast/gpus.json.`
        : null,
  };
}

type MemoryPart = 'weights_bytes' | 'gradients_bytes' | 'optimizer_state_bytes' | 'activations_bytes' | 'workspace_bytes';
const MEMORY_KINDS: [MemoryPart, string][] = [
  ['weights_bytes', 'weights'],
  ['gradients_bytes', 'gradients'],
  ['optimizer_state_bytes', 'optimizer state'],
  ['activations_bytes', 'activations'],
  ['workspace_bytes', 'workspace'],
];

function memoryBars(summaries: GpuSummary[]): MemoryBar[] {
  const scale = Math.max(1, ...summaries.map((s) => Math.max(s.memory.peak_bytes, s.memory_capacity_bytes)));
  return summaries.map((s) => ({
    gpu: s.gpu,
    name: s.name,
    segments: MEMORY_KINDS.map(([key, label]) => ({
      kind: label.replace(' ', '-'),
      label,
      value: s.memory[key],
      fraction: s.memory[key] / scale,
    })).filter((segment) => segment.value > 0),
    peakBytes: s.memory.peak_bytes,
    capacityBytes: s.memory_capacity_bytes,
    peakFraction: s.memory.peak_bytes / scale,
    capacityFraction: s.memory_capacity_bytes / scale,
    fits: s.fits_in_memory,
    label: `${formatBytes(s.memory.peak_bytes)} of ${formatBytes(s.memory_capacity_bytes)}${s.fits_in_memory ? '' : ' — out of memory'}`,
  }));
}

function lineRows(lines: LinePrediction[], gpus: string[]): LineRow[] {
  const unattributed = (line: LinePrediction) => line.line < 1 || line.file === '';
  return [...lines]
    .sort((a, b) => {
      if (unattributed(a) !== unattributed(b)) return unattributed(a) ? 1 : -1;
      return a.file === b.file ? a.line - b.line : a.file.localeCompare(b.file);
    })
    .map((line) => {
      const cells = gpus.map((gpu): LineCell => {
        const entry = line.per_gpu.find((p) => p.gpu === gpu);
        const totalMs = entry?.total_ms ?? 0;
        const share = entry?.share ?? 0;
        return {
          gpu,
          totalMs,
          share,
          label: entry ? formatMs(totalMs) : '–',
          shareLabel: entry ? formatShare(share) : '',
          hostBound: entry?.host_bound === true,
          title: entry ? lineCellTitle(entry) : '',
        };
      });
      return {
        file: line.file,
        line: line.line,
        fileLabel: line.line >= 1 && line.file ? `${baseName(line.file)}:${line.line}` : 'other code',
        ops: summarizeOps(line.ops),
        opCount: line.op_count,
        cells,
        maxShare: lineShare(line),
        hostBound: cells.some((c) => c.hostBound),
      };
    });
}

/** "convolution ×2, relu_" from op names such as "aten::convolution". */
export function summarizeOps(ops: readonly string[], maxShown = 4): string {
  const counts = new Map<string, number>();
  for (const op of ops) {
    const name = op.replace(/^aten::/, '');
    counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  const parts = [...counts.entries()].map(([name, n]) => (n > 1 ? `${name} ×${n}` : name));
  return parts.length > maxShown ? `${parts.slice(0, maxShown).join(', ')}, +${parts.length - maxShown} more` : parts.join(', ');
}

export function buildChartModel(results: Results): ChartModel {
  const fileTitle = baseName(decodeURIComponent(results.uri.replace(/^file:\/\//, '')));
  const empty: ChartModel = {
    state: results.state,
    title: fileTitle,
    subtitle: '',
    tracedWith: null,
    errorText: null,
    errorLocation: null,
    hint: null,
    charts: [],
    memory: [],
    gpuColumns: [],
    rows: [],
    warnings: [],
    configurations: null,
  };
  if (results.state === 'error' && results.error) {
    const e = results.error;
    return {
      ...empty,
      subtitle: 'Analysis failed',
      errorText: `${e.kind}: ${e.message}`,
      errorLocation: e.file && e.line ? { file: e.file, line: e.line } : null,
      hint: e.hint,
    };
  }
  const p = results.prediction;
  if (!p) {
    const subtitle =
      results.state === 'analyzing'
        ? 'Analysing…'
        : 'No prediction yet. Save the file or run “wavecast: Analyze Now”.';
    return { ...empty, subtitle };
  }
  const summaries = p.summaries;
  const phaseSegments = (s: GpuSummary, scale: number): BarSegment[] =>
    (
      [
        ['input', 'waiting for batches', s.input_ms],
        ['forward', 'forward', s.forward_ms],
        ['backward', 'backward', s.backward_ms],
        ['optimizer', 'optimizer', s.optimizer_ms],
      ] as [string, string, number][]
    )
      .filter(([, , value]) => value > 0)
      .map(([kind, label, value]) => ({ kind, label: `${label} ${formatMs(value)}`, value, fraction: value / scale }));
  const annotateIteration = (s: GpuSummary) => ({ detail: iterationDetail(s), hostBound: hostBoundLabel(s, s.iteration_ms) });
  // With the host model, times are wall time: the CPU issuing and the GPU running overlap.
  const wall = summaries.some((s) => s.gpu_ms !== undefined);
  const iteration = barChart('iteration', wall ? 'Iteration time (wall)' : 'Iteration time', 'lower', summaries, (s) => s.iteration_ms, formatMs, phaseSegments, annotateIteration);
  const hostBoundGpus = summaries.filter((s) => s.host_bound === true).map((s) => s.gpu);
  if (hostBoundGpus.length > 0) {
    iteration.note =
      `Host-bound on ${hostBoundGpus.join(', ')}: the GPU waits for the CPU to issue work for more than half the iteration; ` +
      'a larger batch, CUDA graphs or torch.compile (fewer, larger kernels) would use it better.';
  }
  const charts = [
    iteration,
    barChart('throughput', 'Throughput (samples/s)', 'higher', summaries, (s) => s.samples_per_second, formatCount),
    // A cost of 0 comes from an unknown price (or batch size), not a free GPU.
    barChart('cost', 'Cost per 1,000 samples', 'lower', summaries, (s) => (s.cost_per_1k_samples_usd ? s.cost_per_1k_samples_usd : null), formatUsd),
  ];
  const stale = results.state === 'analyzing' ? ' · re-analysing…' : '';
  return {
    ...empty,
    subtitle: `batch size ${p.batch_size} · ${summaries.length} GPU${summaries.length === 1 ? '' : 's'} · ${p.method}${stale}`,
    tracedWith: tracedWith(p),
    charts,
    memory: memoryBars(summaries),
    gpuColumns: summaries.map((s) => ({ gpu: s.gpu, name: s.name })),
    rows: lineRows(p.lines, summaries.map((s) => s.gpu)),
    // The predictor's advisories already cover memory that does not fit.
    warnings: [...(p.advisories ?? []), ...(p.trace_warnings ?? [])].map((w) => w.message),
    configurations: configurationTable(p.parallel, p.parallel_refusals),
  };
}
