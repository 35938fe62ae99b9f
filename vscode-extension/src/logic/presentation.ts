// The numbers people read in the extension's own views (results panel,
// status bar, picker), formatted as docs/presentation.md says, as the daemon's
// server/src/presentation.cpp does. Per-line labels and hovers are the
// daemon's alone: the editor shows what it rendered. Pure functions; the
// webview bundle imports this module too.
import type { LinePrediction, Prediction } from './protocol';

const MISSING = '–';

/** `value` with `decimals` decimals; toFixed rounds an exact tie away from zero, as the spec says. */
export function formatFixed(value: number, decimals: number): string {
  return value.toFixed(decimals);
}

/** Whether `value` rounded to `decimals` decimals stays below `bound` in magnitude: a band holds it. */
function roundsBelow(value: number, decimals: number, bound: number): boolean {
  return Number(formatFixed(Math.abs(value), decimals)) < bound;
}

/** Values below `bound` (once rounded) show `decimals` decimals. */
interface Band {
  bound: number;
  decimals: number;
}
const MS_BANDS: readonly Band[] = [
  { bound: 1, decimals: 3 },
  { bound: 10, decimals: 2 },
  { bound: 100, decimals: 1 },
  { bound: 1000, decimals: 0 },
];
const USD_BANDS: readonly Band[] = [
  { bound: 0.00001, decimals: 7 },
  { bound: 0.0001, decimals: 6 },
  { bound: 0.001, decimals: 5 },
  { bound: 0.01, decimals: 4 },
  { bound: 0.1, decimals: 3 },
  { bound: 100, decimals: 2 },
];

/** Milliseconds with about three significant digits: 4.2 µs, 0.042 ms, 4.21 ms, 421 ms, 2.57 s. */
export function formatMs(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return MISSING;
  if (ms === 0) return '0 ms';
  if (roundsBelow(ms * 1000, 1, 10)) return `${formatFixed(ms * 1000, 1)} µs`;
  for (const band of MS_BANDS) {
    if (roundsBelow(ms, band.decimals, band.bound)) return `${formatFixed(ms, band.decimals)} ms`;
  }
  const seconds = ms / 1000;
  return `${formatFixed(seconds, roundsBelow(seconds, 2, 10) ? 2 : 1)} s`;
}

/** A share of the iteration as a percentage: 0.3464 -> "35%", 0.0013 -> "0.1%", 0.0004 -> "<0.1%". */
export function formatShare(share: number): string {
  if (!Number.isFinite(share)) return MISSING;
  const percent = share * 100;
  if (percent === 0) return '0%';
  if (!roundsBelow(percent, 1, 1)) return `${formatFixed(percent, 0)}%`;
  // Rounds to 0.0: too small to show, but not nothing.
  return roundsBelow(percent, 1, 0.1) ? '<0.1%' : `${formatFixed(percent, 1)}%`;
}

const BYTE_UNITS = ['KiB', 'MiB', 'GiB', 'TiB'];

/** Bytes in binary units: 512 B, 1.5 KiB, 23.4 GiB, 200 GiB. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return MISSING;
  if (roundsBelow(bytes, 0, 1024)) return `${formatFixed(bytes, 0)} B`;
  let value = bytes;
  for (let unit = 0; ; unit += 1) {
    value /= 1024; // exact: a power of two
    if (roundsBelow(value, 1, 100)) return `${formatFixed(value, 1)} ${BYTE_UNITS[unit]}`;
    if (unit === BYTE_UNITS.length - 1 || roundsBelow(value, 0, 1024)) return `${formatFixed(value, 0)} ${BYTE_UNITS[unit]}`;
  }
}

/** US dollars, two significant digits below $1: $0.0021, $0.012, $2.99, $1235. */
export function formatUsd(usd: number): string {
  if (!Number.isFinite(usd)) return MISSING;
  if (usd === 0) return '$0';
  for (const band of USD_BANDS) {
    if (roundsBelow(usd, band.decimals, band.bound)) return `$${formatFixed(usd, band.decimals)}`;
  }
  return `$${formatFixed(usd, 0)}`;
}

/** One decimal below 100, whole numbers with thousands separators above: 74.7, 3,200. */
export function formatCount(count: number): string {
  if (!Number.isFinite(count)) return MISSING;
  if (roundsBelow(count, 1, 100)) return formatFixed(count, 1);
  return formatFixed(count, 0).replace(/\B(?=(\d{3})+$)/g, ',');
}

/** The line's largest share of the iteration over the target GPUs. */
export function lineShare(line: Pick<LinePrediction, 'per_gpu'>): number {
  return Math.max(0, ...line.per_gpu.map((p) => p.share));
}

/** "traced with torch 2.11.0+cu130 (/home/me/venv)" as the daemon wrote it, or null when the trace does not say. */
export function tracedWith(prediction: Pick<Prediction, 'torch_version' | 'traced_with'>): string | null {
  if (!prediction.torch_version) return null;
  return `traced with ${prediction.traced_with}`;
}

/** Peak throughput in TFLOP/s. */
export function formatTflops(tflops: number): string {
  if (!Number.isFinite(tflops) || tflops <= 0) return MISSING;
  return `${formatFixed(tflops, tflops >= 100 ? 0 : 1)} TFLOP/s`;
}

/** Short GPU list for the status bar: "H100, A100 +2". */
export function formatGpuList(names: readonly string[], maxShown = 2): string {
  if (names.length === 0) return 'default GPUs';
  const shown = names.slice(0, maxShown).join(', ');
  return names.length > maxShown ? `${shown} +${names.length - maxShown}` : shown;
}
