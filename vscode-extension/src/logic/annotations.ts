// Text for the status bar and the end-of-line decorations (decorations mode).
import { HOST_BOUND_ADVICE, summarizeOps } from './chartData';
import { formatGpuList, formatMs, formatShare } from './format';
import type { GpuSummary, LinePrediction, Prediction, ServerState } from './protocol';

export type ClientPhase = 'starting' | 'running' | 'stopped' | 'untrusted' | 'failed';

export interface StatusView {
  text: string;
  tooltip: string;
  severity: 'normal' | 'warning' | 'error';
}

export function statusView(
  phase: ClientPhase,
  targets: readonly string[],
  server: { state: ServerState; message: string; percentage?: number } | null,
  /** Why the daemon is not running, when it failed. */
  failure: string | null = null,
): StatusView {
  // The item names wavecast: the targets alone could be any extension's.
  const gpus = `wavecast: ${formatGpuList(targets)}`;
  switch (phase) {
    case 'untrusted':
      return {
        text: '$(shield) wavecast',
        tooltip: 'wavecast runs your training script, so it stays off in an untrusted workspace. Trust the workspace to enable it.',
        severity: 'warning',
      };
    case 'starting':
      return { text: `$(loading~spin) ${gpus}`, tooltip: 'wavecast: starting the daemon…', severity: 'normal' };
    case 'stopped':
      return { text: `$(circle-slash) ${gpus}`, tooltip: 'wavecast: daemon stopped. Run “wavecast: Restart Server”.', severity: 'warning' };
    case 'failed':
      return {
        text: `$(error) ${gpus}`,
        tooltip: failure
          ? `wavecast: ${failure}\n\nClick to restart the daemon or open the server log.`
          : 'wavecast: the daemon is not running. Open the server log for details.',
        severity: 'error',
      };
    case 'running':
      break;
  }
  const state = server?.state ?? 'idle';
  const pick = '\n\nClick to pick target GPUs.';
  if (state === 'analyzing') {
    const percent = server?.percentage !== undefined ? ` ${Math.round(server.percentage)}%` : '';
    return {
      text: `$(sync~spin) ${gpus}${percent}`,
      tooltip: `wavecast: ${server?.message || 'analysing'}${pick}`,
      severity: 'normal',
    };
  }
  if (state === 'error') {
    return { text: `$(warning) ${gpus}`, tooltip: `wavecast: ${server?.message || 'analysis failed'}${pick}`, severity: 'error' };
  }
  return { text: `$(pulse) ${gpus}`, tooltip: `wavecast: ${server?.message || 'idle'}${pick}`, severity: 'normal' };
}

export interface LineDecoration {
  /** 1-based line number in the file. */
  line: number;
  text: string;
  hover: string;
}

/** One decoration per predicted line of `file`: "H100-SXM 1.20 ms · T4 9.81 ms (12%)". */
export function lineDecorations(prediction: Prediction, file: string): LineDecoration[] {
  const normalize = (f: string) => f.replace(/\\/g, '/');
  const target = normalize(file);
  return prediction.lines
    .filter((line) => line.line >= 1 && normalize(line.file) === target)
    .map((line) => ({ line: line.line, text: decorationText(line), hover: decorationHover(line) }));
}

function decorationText(line: LinePrediction): string {
  const times = line.per_gpu.map((p) => `${p.gpu} ${formatMs(p.total_ms)}`).join(' · ');
  const share = Math.max(0, ...line.per_gpu.map((p) => p.share));
  return `${times} (${formatShare(share)})`;
}

function decorationHover(line: LinePrediction): string {
  // Results with the host model: times are wall time, "GPU busy" the kernels' time.
  const busy = line.per_gpu.some((p) => p.gpu_ms !== undefined);
  const header = busy
    ? '| GPU | forward | backward | optimizer | total | GPU busy | share |\n|---|---:|---:|---:|---:|---:|---:|'
    : '| GPU | forward | backward | optimizer | total | share |\n|---|---:|---:|---:|---:|---:|';
  const rows = line.per_gpu.map(
    (p) =>
      `| ${p.gpu} | ${formatMs(p.forward_ms)} | ${formatMs(p.backward_ms)} | ${formatMs(p.optimizer_ms)} | ` +
      `${formatMs(p.total_ms)} | ${busy ? `${p.gpu_ms !== undefined ? formatMs(p.gpu_ms) : '–'} | ` : ''}${formatShare(p.share)} |`,
  );
  const hostBound = line.per_gpu
    .filter((p) => p.host_bound === true)
    .map((p) => (p.gpu_idle_ms !== undefined ? `${p.gpu} (GPU idle ${formatMs(p.gpu_idle_ms)} of ${formatMs(p.total_ms)})` : p.gpu));
  const advice =
    hostBound.length > 0
      ? `\n\n**Host-bound** on ${hostBound.join(', ')}: the GPU waits for the CPU to issue this line's work; ${HOST_BOUND_ADVICE}.`
      : '';
  return `**wavecast** — ${line.op_count} op${line.op_count === 1 ? '' : 's'}: ${summarizeOps(line.ops, 6)}\n\n${header}\n${rows.join('\n')}${advice}`;
}

/** "H100-SXM 3.60 ms (host-bound) · T4 3.19 s": iteration (wall) time per GPU, for the notification after an analysis. */
export function iterationTimes(summaries: readonly GpuSummary[]): string {
  return summaries.map((s) => `${s.gpu} ${formatMs(s.iteration_ms)}${s.host_bound === true ? ' (host-bound)' : ''}`).join(' · ');
}
