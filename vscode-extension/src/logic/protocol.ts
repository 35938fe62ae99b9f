// Types and request definitions of wavecast's custom LSP methods
// (docs/protocol.md). No `vscode` import: shared by the extension, the
// webview bundle and the integration tests.
import { NotificationType, RequestType } from 'vscode-languageserver-protocol';

/** Version of the custom `wavecast/*` protocol this client speaks. */
export const PROTOCOL_VERSION = 1;

export interface GpuInfo {
  id: string;
  name: string;
  computeCapability: string;
  smCount: number;
  memoryGiB: number;
  memoryBandwidthGBs: number;
  fp32Tflops: number;
  tf32Tflops: number;
  fp16Tflops: number;
  bf16Tflops: number;
  pricePerHourUsd: number | null;
}

export interface ListGpusResult {
  gpus: GpuInfo[];
  targets: string[];
}

export interface MemoryBreakdown {
  weights_bytes: number;
  gradients_bytes: number;
  optimizer_state_bytes: number;
  activations_bytes: number;
  workspace_bytes: number;
  peak_bytes: number;
}

/**
 * Times are wall time (the CPU issuing work and the GPU running it on two
 * clocks). The host-model keys (`gpu_ms`, `host_ms`, `gpu_idle_ms`,
 * `host_bound`) are absent from older daemons' results.
 */
export interface GpuSummary {
  gpu: string;
  name: string;
  iteration_ms: number;
  forward_ms: number;
  backward_ms: number;
  optimizer_ms: number;
  /** Kernel time of the iteration: the GPU busy. */
  gpu_ms?: number;
  /** CPU time issuing the iteration. */
  host_ms?: number;
  /** Iteration minus GPU time. */
  gpu_idle_ms?: number;
  /** The GPU idles for more than half the iteration. */
  host_bound?: boolean;
  samples_per_second: number;
  cost_per_1k_samples_usd: number | null;
  price_per_hour_usd: number | null;
  memory: MemoryBreakdown;
  memory_capacity_bytes: number;
  fits_in_memory: boolean;
}

export interface LineGpuTime {
  gpu: string;
  forward_ms: number;
  backward_ms: number;
  optimizer_ms: number;
  total_ms: number;
  share: number;
  /** Kernel time of the same ops (absent from older daemons). */
  gpu_ms?: number;
  /** How long the GPU waited for these ops' launches. */
  gpu_idle_ms?: number;
  /** The GPU idles for more than half of this span's time. */
  host_bound?: boolean;
}

export interface LinePrediction {
  file: string;
  line: number;
  ops: string[];
  op_count: number;
  per_gpu: LineGpuTime[];
}

export interface ModulePrediction {
  module: string;
  op_count: number;
  per_gpu: LineGpuTime[];
}

export interface OpGpuTime {
  gpu: string;
  /** GPU (kernel) time. */
  time_ms: number;
  /** How much the op moved the end of the iteration (absent from older daemons). */
  wall_ms?: number;
  method: string;
}

export interface OpPrediction {
  id: number;
  name: string;
  phase: string;
  file: string;
  line: number;
  family: string;
  flops: number;
  bytes: number;
  approximate: boolean;
  module?: string;
  /** CPU time issuing the op (absent from older daemons). */
  host_ms?: number;
  per_gpu: OpGpuTime[];
}

export interface Prediction {
  method: string;
  batch_size: number;
  /** The torch that traced the script, as it names itself ("2.11.0+cu130"); absent from older daemons. */
  torch_version?: string;
  /** The interpreter or venv that traced it; absent from older daemons. */
  python_env?: string;
  gpus: string[];
  summaries: GpuSummary[];
  lines: LinePrediction[];
  modules?: ModulePrediction[];
  ops: OpPrediction[];
  /** What the predictor wants the user to know: a kind, its facts and the daemon's sentence. */
  advisories: Advisory[];
  /** The traced script, how it was traced, and the ops that ran for real on the CPU. */
  file?: string;
  trace_mode?: 'shape' | 'cpu' | 'cuda';
  fallback_ops?: string[];
  /** The trace's warnings (docs/trace-format.md), each with the daemon's sentence. */
  trace_warnings?: TraceWarning[];
}

export type Severity = 'warning' | 'info';

/** docs/results-json.md "advisories"; the facts vary by kind. */
export interface Advisory {
  kind: string;
  severity: Severity;
  message: string;
  gpu?: string;
  [fact: string]: unknown;
}

/** docs/trace-format.md "warnings", with the daemon's sentence. */
export interface TraceWarning {
  kind: string;
  severity: Severity;
  message: string;
  file?: string;
  line?: number;
  [fact: string]: unknown;
}

export type AnalysisState = 'none' | 'analyzing' | 'ready' | 'error';

export interface AnalysisError {
  kind: string;
  message: string;
  file: string | null;
  line: number | null;
  hint: string | null;
}

export interface ResultsResponse {
  uri: string;
  state: AnalysisState;
  contentVersion: number | null;
  prediction: Prediction | null;
  error: AnalysisError | null;
}

export interface ResultsChangedParams {
  uri: string;
  state: AnalysisState;
  summaries: GpuSummary[];
}

export type ServerState = 'idle' | 'analyzing' | 'error';

export interface StatusParams {
  state: ServerState;
  message: string;
  percentage?: number;
}

export type Trigger = 'onSave' | 'manual';

export interface InitializationOptions {
  protocolVersion: number;
  targets: string[];
  batchSize: number | null;
  trigger: Trigger;
  /** Null keys are ignored by the daemon (its default applies). */
  pythonEnv: string | null;
  /** Wait after a save before analysing. */
  debounceMs: number;
  /** Per-line times as code lenses too (the daemon's default: only for clients without inlay hints). */
  lineCodeLens: boolean;
  /** Per-line times as Information diagnostics too. */
  lineDiagnostics: boolean;
  /** Authenticates a TCP connection (`wavecast serve --listen`). */
  token?: string;
}

/** What the server advertises in `capabilities.experimental.wavecast`. */
export interface ServerWavecastCapability {
  protocolVersion: number;
  methods: string[];
}

export const ListGpusRequest = new RequestType<Record<string, never>, ListGpusResult, void>('wavecast/listGpus');
export const SetTargetsRequest = new RequestType<{ gpus: string[] }, { targets: string[] }, void>('wavecast/setTargets');
export const SetBatchSizeRequest = new RequestType<{ uri: string; batchSize: number | null }, Record<string, never>, void>(
  'wavecast/setBatchSize',
);
export const AnalyzeRequest = new RequestType<{ uri: string; batchSize?: number }, ResultsResponse, void>('wavecast/analyze');
export const ResultsRequest = new RequestType<{ uri: string }, ResultsResponse, void>('wavecast/results');
export const ResultsChangedNotification = new NotificationType<ResultsChangedParams>('wavecast/resultsChanged');
export const StatusNotification = new NotificationType<StatusParams>('wavecast/status');

/** Methods this client calls; the server must advertise all of them. */
export const REQUIRED_METHODS: readonly string[] = [
  ListGpusRequest.method,
  SetTargetsRequest.method,
  SetBatchSizeRequest.method,
  AnalyzeRequest.method,
  ResultsRequest.method,
];
