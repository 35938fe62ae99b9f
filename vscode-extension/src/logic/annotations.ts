// Text for the status bar and the notification after an analysis.
import { compileLabel } from './picker';
import { formatGpuList, formatMs } from './presentation';
import type { CompileMode, GpuSummary, ServerState } from './protocol';

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
  /** "traced with torch …" of the last results seen, when the daemon says. */
  traced: string | null = null,
  /** The torch.compile mode every script is predicted in (wavecast.compile), if any. */
  compile: CompileMode | null = null,
): StatusView {
  // The item names wavecast: the targets alone could be any extension's. A what-if that
  // changes every figure is named beside them.
  const gpus = `wavecast: ${formatGpuList(targets)}${compile ? ` · ${compileLabel(compile)}` : ''}`;
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
  const pick = `${traced ? `\n\n${traced}` : ''}\n\nClick to pick target GPUs.`;
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

/** "H100-SXM 3.60 ms (host-bound) · T4 3.19 s": iteration (wall) time per GPU, for the notification after an analysis. */
export function iterationTimes(summaries: readonly GpuSummary[]): string {
  return summaries.map((s) => `${s.gpu} ${formatMs(s.iteration_ms)}${s.host_bound === true ? ' (host-bound)' : ''}`).join(' · ');
}
