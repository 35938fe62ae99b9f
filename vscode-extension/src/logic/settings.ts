// Validation of the `wavecast.*` settings. The configuration schema in
// package.json only warns in the settings editor; this turns whatever is in
// settings.json into a well-formed value plus messages the user can act on.
import * as path from 'path';
import type { CompileMode, InitializationOptions, Trigger } from './protocol';
import { PROTOCOL_VERSION } from './protocol';

export type DisplayMode = 'inlayHints' | 'decorations';

/** A TF32 override passed to the daemon (`--tf32-matmul`, `--tf32-conv`); `script`: what the script sets. */
export type Tf32Mode = 'script' | 'on' | 'off';

export interface RemoteAddress {
  host: string;
  port: number;
}

/**
 * A multi-GPU target (docs/parallel.md): the words of a layout ("8x H100-SXM, FSDP"), read
 * by the daemon's one layout parser, or its parts.
 */
export type ParallelTargetSetting = string | { gpu: string; count?: number; layout?: string; system?: string };

export interface WavecastSettings {
  targets: string[];
  parallelTargets: ParallelTargetSetting[];
  trigger: Trigger;
  batchSize: number | null;
  pythonEnv: string | null;
  serverPath: string | null;
  remote: RemoteAddress | null;
  /** The deprecated settings-file token, read only to move it to the secret storage. */
  settingsToken: string | null;
  display: DisplayMode;
  /** How long to wait for the daemon's answer to `initialize`, in seconds. */
  initializeTimeout: number;
  tf32Matmul: Tf32Mode;
  tf32Conv: Tf32Mode;
  /** Seconds the daemon may spend tracing one iteration; null: its default. */
  analysisTimeout: number | null;
  /** Extra GPU definitions, as written in the setting (see resolveUserPath). */
  gpuFile: string | null;
  debounceMs: number;
  lineCodeLens: boolean;
  lineDiagnostics: boolean;
  /** sys.argv[1:] of every script traced as written (launch configurations override per file). */
  scriptArgs: string[];
  /** Ranks a torch.distributed script is traced as rank 0 of; null: the daemon's 8. */
  worldSize: number | null;
  /** The torch.compile mode scripts are traced as if compiled in; null: as each script says.
   * The daemon knows the modes and names a wrong one. */
  compile: CompileMode | null;
}

export interface SettingsReadResult {
  settings: WavecastSettings;
  problems: string[];
}

export const MAX_BATCH_SIZE = 1 << 20;
export const DEFAULT_INITIALIZE_TIMEOUT_S = 30;
export const MAX_INITIALIZE_TIMEOUT_S = 3600;
export const MAX_ANALYSIS_TIMEOUT_S = 86400;
export const DEFAULT_DEBOUNCE_MS = 0;
export const MAX_DEBOUNCE_MS = 60000;

/** `raw` maps setting names without the `wavecast.` prefix to their values. */
export function readSettings(raw: Readonly<Record<string, unknown>>): SettingsReadResult {
  const problems: string[] = [];

  const targets: string[] = [];
  if (Array.isArray(raw.targets)) {
    for (const entry of raw.targets) {
      if (typeof entry === 'string' && entry.trim() !== '') {
        if (!targets.includes(entry.trim())) targets.push(entry.trim());
      } else {
        problems.push(`wavecast.targets: ignored ${JSON.stringify(entry)}; each entry must be a GPU name such as "A100-SXM4-40GB".`);
      }
    }
  } else if (raw.targets !== undefined && raw.targets !== null) {
    problems.push('wavecast.targets must be a list of GPU names, for example ["H100-SXM", "T4"].');
  }

  const parallelTargets = readParallelTargets(raw.parallelTargets, problems);

  let trigger: Trigger = 'onSave';
  if (raw.trigger === 'manual' || raw.trigger === 'onSave') trigger = raw.trigger;
  else if (raw.trigger !== undefined) problems.push(`wavecast.trigger must be "onSave" or "manual", not ${JSON.stringify(raw.trigger)}.`);

  let batchSize: number | null = null;
  if (raw.batchSize !== undefined && raw.batchSize !== null && raw.batchSize !== '') {
    const parsed = parseBatchSize(String(raw.batchSize));
    if (typeof parsed === 'number') batchSize = parsed;
    else problems.push(`wavecast.batchSize: ${parsed.error.replace(/\.$/, '')}; using the script's default.`);
  }

  let display: DisplayMode = 'inlayHints';
  if (raw.display === 'inlayHints' || raw.display === 'decorations') display = raw.display;
  else if (raw.display !== undefined)
    problems.push(`wavecast.display must be "inlayHints" or "decorations", not ${JSON.stringify(raw.display)}.`);

  let initializeTimeout = DEFAULT_INITIALIZE_TIMEOUT_S;
  if (raw.initializeTimeout !== undefined && raw.initializeTimeout !== null) {
    const value = raw.initializeTimeout;
    if (typeof value === 'number' && Number.isFinite(value) && value >= 1 && value <= MAX_INITIALIZE_TIMEOUT_S) initializeTimeout = value;
    else
      problems.push(
        `wavecast.initializeTimeout must be a number of seconds from 1 to ${MAX_INITIALIZE_TIMEOUT_S}, not ${JSON.stringify(value)}; using ${DEFAULT_INITIALIZE_TIMEOUT_S}.`,
      );
  }

  let remote: RemoteAddress | null = null;
  if (typeof raw.remoteAddress === 'string' && raw.remoteAddress.trim() !== '') {
    const parsed = parseRemoteAddress(raw.remoteAddress);
    if ('error' in parsed) problems.push(`wavecast.remoteAddress: ${parsed.error}`);
    else remote = parsed;
  }

  const tf32Matmul = readTf32(raw.tf32Matmul, 'tf32Matmul', problems);
  const tf32Conv = readTf32(raw.tf32Conv, 'tf32Conv', problems);

  let analysisTimeout: number | null = null;
  if (raw.analysisTimeout !== undefined && raw.analysisTimeout !== null) {
    const value = raw.analysisTimeout;
    if (Number.isInteger(value) && (value as number) >= 1 && (value as number) <= MAX_ANALYSIS_TIMEOUT_S) analysisTimeout = value as number;
    else
      problems.push(
        `wavecast.analysisTimeout must be a whole number of seconds from 1 to ${MAX_ANALYSIS_TIMEOUT_S}, not ${JSON.stringify(value)}; using the daemon's default.`,
      );
  }

  let debounceMs = DEFAULT_DEBOUNCE_MS;
  if (raw.debounceMs !== undefined && raw.debounceMs !== null) {
    const value = raw.debounceMs;
    if (Number.isInteger(value) && (value as number) >= 0 && (value as number) <= MAX_DEBOUNCE_MS) debounceMs = value as number;
    else
      problems.push(
        `wavecast.debounceMs must be a whole number of milliseconds from 0 to ${MAX_DEBOUNCE_MS}, not ${JSON.stringify(value)}; using ${DEFAULT_DEBOUNCE_MS}.`,
      );
  }

  return {
    settings: {
      targets,
      parallelTargets,
      trigger,
      batchSize,
      pythonEnv: nonEmpty(raw.pythonEnv),
      serverPath: nonEmpty(raw.serverPath),
      remote,
      settingsToken: nonEmpty(raw.remoteToken),
      display,
      initializeTimeout,
      tf32Matmul,
      tf32Conv,
      analysisTimeout,
      gpuFile: nonEmpty(raw.gpuFile),
      debounceMs,
      lineCodeLens: readBoolean(raw.lineCodeLens, 'lineCodeLens', problems),
      lineDiagnostics: readBoolean(raw.lineDiagnostics, 'lineDiagnostics', problems),
      scriptArgs: readWords(raw.scriptArgs, problems),
      worldSize: readWorldSize(raw.worldSize, problems),
      compile: readCompile(raw.compile, problems),
    },
    problems,
  };
}

function readWorldSize(value: unknown, problems: string[]): number | null {
  if (value === undefined || value === null) return null;
  if (typeof value === 'number' && Number.isInteger(value) && value >= 1) return value;
  problems.push(`wavecast.worldSize must be a whole number of ranks, 1 or more, not ${JSON.stringify(value)}; using 8.`);
  return null;
}

/** The mode as written: the daemon knows the modes and names a wrong one. */
function readCompile(value: unknown, problems: string[]): CompileMode | null {
  if (value === undefined || value === null || value === 'script') return null;
  if (typeof value === 'string' && value.trim() !== '') return value.trim() as CompileMode;
  problems.push(`wavecast.compile must be "script" or a torch.compile mode, not ${JSON.stringify(value)}; using "script".`);
  return null;
}

function readWords(value: unknown, problems: string[]): string[] {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value) && value.every((word) => typeof word === 'string')) return value as string[];
  problems.push(`wavecast.scriptArgs must be a list of strings, not ${JSON.stringify(value)}; using none.`);
  return [];
}

function readTf32(value: unknown, name: string, problems: string[]): Tf32Mode {
  if (value === undefined || value === null) return 'script';
  if (value === 'script' || value === 'on' || value === 'off') return value;
  problems.push(`wavecast.${name} must be "script", "on" or "off", not ${JSON.stringify(value)}; using "script".`);
  return 'script';
}

function readBoolean(value: unknown, name: string, problems: string[]): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value === 'boolean') return value;
  problems.push(`wavecast.${name} must be true or false, not ${JSON.stringify(value)}; using false.`);
  return false;
}

function nonEmpty(value: unknown): string | null {
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : null;
}

/** Parses user input for a batch size; returns the number or why it is refused. */
export function parseBatchSize(text: string): number | { error: string } {
  const trimmed = text.trim();
  if (!/^[0-9]+$/.test(trimmed)) return { error: `"${text}" is not a whole number; enter a batch size such as 32.` };
  const value = Number(trimmed);
  if (value < 1) return { error: 'the batch size must be at least 1.' };
  if (value > MAX_BATCH_SIZE) return { error: `the batch size must be at most ${MAX_BATCH_SIZE}.` };
  return value;
}

/** "host:port" or "[v6]:port". */
export function parseRemoteAddress(text: string): RemoteAddress | { error: string } {
  const trimmed = text.trim();
  const match = /^\[([0-9a-fA-F:.]+)\]:([0-9]+)$/.exec(trimmed) ?? /^([^\s:[\]]+):([0-9]+)$/.exec(trimmed);
  if (!match) return { error: `"${text}" is not host:port; write for example 127.0.0.1:7325.` };
  const port = Number(match[2]);
  if (port < 1 || port > 65535) return { error: `port ${match[2]} is outside 1–65535.` };
  return { host: match[1], port };
}

/**
 * `token` authenticates with a remote daemon; it is sent only to one.
 * `pythonEnv` is the worker's environment (see workerEnvironment).
 */
export function initializationOptions(
  settings: WavecastSettings,
  token: string | null = null,
  pythonEnv: string | null = settings.pythonEnv,
): InitializationOptions {
  const options: InitializationOptions = {
    protocol_version: PROTOCOL_VERSION,
    targets: settings.targets,
    ...daemonSettings(settings, pythonEnv),
    pythonEnv, // null at initialize: the daemon's default environment
  };
  if (settings.remote && token) options.token = token;
  return options;
}

/**
 * The `wavecast` section as the running daemon gets it (workspace/configuration
 * and didChangeConfiguration): only values readSettings accepted, because the
 * daemon drops a whole change for one wrong value. Targets are left out: they
 * go through wavecast/setTargets, whose error names an unknown GPU.
 */
export interface DaemonSettings {
  parallelTargets: ParallelTargetSetting[];
  batchSize: number | null;
  trigger: Trigger;
  /** '' is the daemon's default environment (null would keep the previous one). */
  pythonEnv: string;
  debounceMs: number;
  lineCodeLens: boolean;
  lineDiagnostics: boolean;
  /** Arguments of scripts run as written by absolute path; '' for every other script. */
  scriptArgs: Record<string, string[]>;
  /** The folder a script run as written runs from, by its absolute path (launch `cwd`). */
  scriptWorkingDirectories: Record<string, string>;
  worldSize: number | null;
  compile: CompileMode | null;
}

/** `launch`: what launch configurations say of their programs (launchScripts). */
export function daemonSettings(
  settings: WavecastSettings,
  pythonEnv: string | null,
  launch: LaunchScripts = { args: {}, workingDirectories: {} },
): DaemonSettings {
  return {
    parallelTargets: settings.parallelTargets,
    batchSize: settings.batchSize,
    trigger: settings.trigger,
    pythonEnv: pythonEnv ?? '',
    debounceMs: settings.debounceMs,
    lineCodeLens: settings.lineCodeLens,
    lineDiagnostics: settings.lineDiagnostics,
    scriptArgs: { '': settings.scriptArgs, ...launch.args },
    scriptWorkingDirectories: launch.workingDirectories,
    worldSize: settings.worldSize,
    compile: settings.compile,
  };
}

const PARALLEL_TARGET_EXAMPLE = '"8x H100-SXM, FSDP" or {"gpu": "H100-SXM", "count": 8, "layout": "fsdp"}';

/** The well-formed entries of wavecast.parallelTargets; the daemon reads their words. */
export function readParallelTargets(raw: unknown, problems: string[]): ParallelTargetSetting[] {
  const out: ParallelTargetSetting[] = [];
  if (raw === undefined || raw === null) return out;
  if (!Array.isArray(raw)) {
    problems.push(`wavecast.parallelTargets must be a list of targets such as ${PARALLEL_TARGET_EXAMPLE}.`);
    return out;
  }
  for (const entry of raw) {
    if (typeof entry === 'string' && entry.trim() !== '') {
      out.push(entry.trim());
      continue;
    }
    if (entry !== null && typeof entry === 'object' && !Array.isArray(entry)) {
      const e = entry as Record<string, unknown>;
      const count = e.count === undefined ? 1 : e.count;
      const optionalText = (v: unknown) => v === undefined || typeof v === 'string';
      if (typeof e.gpu === 'string' && e.gpu.trim() !== '' && Number.isInteger(count) && (count as number) >= 1 && optionalText(e.layout) && optionalText(e.system)) {
        const target: { gpu: string; count?: number; layout?: string; system?: string } = { gpu: e.gpu.trim(), count: count as number };
        if (typeof e.layout === 'string' && e.layout.trim() !== '') target.layout = e.layout.trim();
        if (typeof e.system === 'string' && e.system.trim() !== '') target.system = e.system.trim();
        out.push(target);
        continue;
      }
    }
    problems.push(`wavecast.parallelTargets: ignored ${JSON.stringify(entry)}; each entry is a target such as ${PARALLEL_TARGET_EXAMPLE}.`);
  }
  return out;
}

/** "8× H100-SXM, FSDP": how the picker and the panel name a target. */
export function parallelTargetLabel(target: ParallelTargetSetting): string {
  if (typeof target === 'string') return target.replace(/^(\d+)\s*x\s*/i, '$1× ');
  const words = [`${target.count ?? 1}× ${target.gpu}`];
  if (target.layout) words.push(target.layout);
  const label = words.join(', ');
  return target.system ? `${label} on ${target.system}` : label;
}

/** What launch configurations say of the scripts they run, by the script's absolute path. */
export interface LaunchScripts {
  args: Record<string, string[]>;
  workingDirectories: Record<string, string>;
}

/**
 * The `args` and `cwd` of the Python launch configurations of one workspace
 * folder's launch.json, by the absolute path of their `program`
 * (`${workspaceFolder}` resolved, a relative path taken from the folder); a
 * configuration for `${file}` or without a program is skipped, and so are
 * args that are not all strings and a cwd that is not one.
 */
export function launchScripts(configurations: unknown, workspaceFolder: string): LaunchScripts {
  const found: LaunchScripts = { args: {}, workingDirectories: {} };
  if (!Array.isArray(configurations)) return found;
  const resolve = (text: string) => path.resolve(workspaceFolder, text.split('${workspaceFolder}').join(workspaceFolder));
  for (const configuration of configurations) {
    if (typeof configuration !== 'object' || configuration === null) continue;
    const { program, args, cwd } = configuration as { program?: unknown; args?: unknown; cwd?: unknown };
    if (typeof program !== 'string' || program.includes('${file}')) continue;
    const script = resolve(program);
    if (Array.isArray(args) && args.every((word) => typeof word === 'string')) found.args[script] = args as string[];
    if (typeof cwd === 'string' && cwd.trim() !== '' && !cwd.includes('${file')) found.workingDirectories[script] = resolve(cwd);
  }
  return found;
}

/**
 * Remembers which settings problems the user was told about, so the same
 * wrong value is reported once, not on every restart or unrelated change; a
 * value fixed and then broken again is reported again.
 */
export class SettingsProblemMemory {
  private reported = new Set<string>();

  /** The problems of `current` not reported yet; `current` becomes what was reported. */
  unreported(current: readonly string[]): string[] {
    const fresh = current.filter((problem) => !this.reported.has(problem));
    this.reported = new Set(current);
    return fresh;
  }
}

/** `~/…` from the home folder, a relative path from the first workspace folder. */
export function resolveUserPath(text: string, homeDir: string, workspaceFolder: string | undefined): string {
  if (text === '~' || text.startsWith('~/')) return path.join(homeDir, text.slice(1));
  if (path.isAbsolute(text) || !workspaceFolder) return text;
  return path.join(workspaceFolder, text);
}

/**
 * `wavecast serve`'s command line for the options it takes only there; the
 * rest reach the daemon as LSP settings. `resolvePath` turns the GPU file
 * setting into a path.
 */
export function serveArguments(settings: WavecastSettings, resolvePath: (text: string) => string): string[] {
  const args = ['serve'];
  if (settings.tf32Matmul !== 'script') args.push('--tf32-matmul', settings.tf32Matmul);
  if (settings.tf32Conv !== 'script') args.push('--tf32-conv', settings.tf32Conv);
  if (settings.analysisTimeout !== null) args.push('--timeout', String(settings.analysisTimeout));
  if (settings.gpuFile) args.push('--gpu-file', resolvePath(settings.gpuFile));
  return args;
}

/**
 * Settings that choose which daemon to talk to or go on its command line, so
 * a change needs a new connection. The others reach the running daemon
 * through workspace/didChangeConfiguration.
 */
export const RESTART_SETTINGS: readonly string[] = [
  'serverPath',
  'remoteAddress',
  'remoteToken',
  'tf32Matmul',
  'tf32Conv',
  'analysisTimeout',
  'gpuFile',
];

/** Every setting readSettings reads, without the `wavecast.` prefix. */
export const SETTING_NAMES: readonly string[] = [
  'targets',
  'parallelTargets',
  'trigger',
  'batchSize',
  'pythonEnv',
  'display',
  'initializeTimeout',
  'debounceMs',
  'lineCodeLens',
  'lineDiagnostics',
  'scriptArgs',
  'worldSize',
  'compile',
  ...RESTART_SETTINGS,
];
