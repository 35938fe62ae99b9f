// Validation of the `wavecast.*` settings. The configuration schema in
// package.json only warns in the settings editor; this turns whatever is in
// settings.json into a well-formed value plus messages the user can act on.
import type { InitializationOptions, Trigger } from './protocol';
import { PROTOCOL_VERSION } from './protocol';

export type DisplayMode = 'inlayHints' | 'decorations';

export interface RemoteAddress {
  host: string;
  port: number;
}

export interface WavecastSettings {
  targets: string[];
  trigger: Trigger;
  batchSize: number | null;
  pythonEnv: string | null;
  serverPath: string | null;
  remote: RemoteAddress | null;
  remoteToken: string | null;
  display: DisplayMode;
  /** How long to wait for the daemon's answer to `initialize`, in seconds. */
  initializeTimeout: number;
}

export interface SettingsReadResult {
  settings: WavecastSettings;
  problems: string[];
}

export const MAX_BATCH_SIZE = 1 << 20;
export const DEFAULT_INITIALIZE_TIMEOUT_S = 30;
export const MAX_INITIALIZE_TIMEOUT_S = 3600;

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

  let trigger: Trigger = 'onSave';
  if (raw.trigger === 'manual' || raw.trigger === 'onSave') trigger = raw.trigger;
  else if (raw.trigger !== undefined) problems.push(`wavecast.trigger must be "onSave" or "manual", not ${JSON.stringify(raw.trigger)}.`);

  let batchSize: number | null = null;
  if (raw.batchSize !== undefined && raw.batchSize !== null && raw.batchSize !== '') {
    const parsed = parseBatchSize(String(raw.batchSize));
    if (typeof parsed === 'number') batchSize = parsed;
    else problems.push(`wavecast.batchSize: ${parsed.error}`);
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
  const remoteToken = nonEmpty(raw.remoteToken);
  if (remote && !remoteToken) {
    problems.push(
      'wavecast.remoteToken is empty: copy the token that `wavecast serve --listen` printed (or its --token-file) into this setting.',
    );
  }

  return {
    settings: {
      targets,
      trigger,
      batchSize,
      pythonEnv: nonEmpty(raw.pythonEnv),
      serverPath: nonEmpty(raw.serverPath),
      remote,
      remoteToken,
      display,
      initializeTimeout,
    },
    problems,
  };
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

export function initializationOptions(settings: WavecastSettings): InitializationOptions {
  const options: InitializationOptions = {
    protocolVersion: PROTOCOL_VERSION,
    targets: settings.targets,
    batchSize: settings.batchSize,
    trigger: settings.trigger,
    pythonEnv: settings.pythonEnv,
  };
  if (settings.remote && settings.remoteToken) options.token = settings.remoteToken;
  return options;
}

/**
 * Settings that choose which daemon to talk to, so a change needs a new
 * connection. The others reach the running daemon through
 * workspace/didChangeConfiguration.
 */
export const RESTART_SETTINGS: readonly string[] = ['serverPath', 'remoteAddress', 'remoteToken'];
