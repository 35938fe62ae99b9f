// Human-readable numbers for the status bar, picker, decorations and webview.
// Pure functions; the webview bundle imports this module too.

/** Milliseconds with about three significant digits: 0.042 ms, 4.21 ms, 42.1 ms, 421 ms, 4.21 s. */
export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return '–';
  const abs = Math.abs(ms);
  if (abs >= 10_000) return `${(ms / 1000).toFixed(1)} s`;
  if (abs >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (abs >= 100) return `${ms.toFixed(0)} ms`;
  if (abs >= 10) return `${ms.toFixed(1)} ms`;
  if (abs >= 1) return `${ms.toFixed(2)} ms`;
  if (abs >= 0.01) return `${ms.toFixed(3)} ms`;
  if (ms === 0) return '0 ms';
  return `${(ms * 1000).toFixed(1)} µs`;
}

const BINARY_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** Bytes in binary units: 512 B, 1.5 KiB, 23.4 GiB. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return '–';
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < BINARY_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  if (unit === 0) return `${value} B`;
  return `${value >= 100 ? value.toFixed(0) : value.toFixed(1)} ${BINARY_UNITS[unit]}`;
}

/** Whole numbers with thousands separators; fractional below 100. */
export function formatCount(value: number): string {
  if (!Number.isFinite(value)) return '–';
  if (Math.abs(value) < 100) return value.toFixed(1);
  return Math.round(value).toLocaleString('en-US');
}

/** US dollars; null (no price known) prints as an em dash. */
export function formatUsd(value: number | null): string {
  if (value === null || !Number.isFinite(value)) return '—';
  if (Math.abs(value) >= 100) return `$${value.toFixed(0)}`;
  if (Math.abs(value) >= 1) return `$${value.toFixed(2)}`;
  if (value === 0) return '$0';
  return `$${value.toPrecision(2)}`;
}

/** A share in [0, 1] as a percentage: 0.1234 -> "12%", 0.004 -> "0.4%". */
export function formatShare(share: number): string {
  if (!Number.isFinite(share)) return '–';
  const percent = share * 100;
  if (percent > 0 && percent < 0.1) return '<0.1%';
  if (percent > 0 && percent < 1) return `${percent.toFixed(1)}%`;
  return `${percent.toFixed(0)}%`;
}

/** Peak throughput in TFLOP/s. */
export function formatTflops(tflops: number): string {
  if (!Number.isFinite(tflops) || tflops <= 0) return '–';
  return tflops >= 100 ? `${tflops.toFixed(0)} TFLOP/s` : `${tflops.toFixed(1)} TFLOP/s`;
}

/** Short GPU list for the status bar: "H100, A100 +2". */
export function formatGpuList(names: readonly string[], maxShown = 2): string {
  if (names.length === 0) return 'default GPUs';
  const shown = names.slice(0, maxShown).join(', ');
  return names.length > maxShown ? `${shown} +${names.length - maxShown}` : shown;
}
