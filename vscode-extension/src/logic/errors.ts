// Turns failures into messages that say what to do.
import { ErrorCodes } from 'vscode-languageserver-protocol';
import { PROTOCOL_VERSION, REQUIRED_METHODS, type WavecastCapability } from './protocol';

export interface CapabilityCheck {
  ok: boolean;
  message: string;
  /** Which side must be updated when the versions differ. */
  update?: 'extension' | 'daemon';
}

export function mismatchMessage(serverVersion: number, clientVersion = PROTOCOL_VERSION): CapabilityCheck {
  const update = serverVersion > clientVersion ? 'extension' : 'daemon';
  const what =
    update === 'extension'
      ? 'Update the wavecast VS Code extension (or use a daemon of the same release).'
      : 'Update the wavecast daemon (rebuild or reinstall `wavecast`, or point wavecast.serverPath to a newer one).';
  return {
    ok: false,
    update,
    message: `wavecast protocol mismatch: the daemon speaks version ${serverVersion}, this extension version ${clientVersion}. ${what}`,
  };
}

/** Checks `capabilities.experimental.wavecast` from the initialize result. */
export function checkServerCapability(experimental: unknown): CapabilityCheck {
  // A version-1 daemon spells it protocolVersion: read it too, to say which side to update.
  type Advertised = Partial<WavecastCapability> & { protocolVersion?: unknown };
  const wavecast = (experimental as { wavecast?: Advertised } | undefined)?.wavecast;
  const version = wavecast?.protocol_version ?? wavecast?.protocolVersion;
  if (!wavecast || typeof version !== 'number') {
    return {
      ok: false,
      update: 'daemon',
      message:
        'The server did not advertise wavecast capabilities: it is not a wavecast daemon or it is too old. ' +
        'Update the wavecast daemon or fix wavecast.serverPath / wavecast.remoteAddress.',
    };
  }
  if (version !== PROTOCOL_VERSION) return mismatchMessage(version);
  const advertised = new Set<string>(wavecast.methods ?? []);
  const missing = REQUIRED_METHODS.filter((method) => !advertised.has(method));
  if (missing.length > 0) {
    return {
      ok: false,
      update: 'daemon',
      message: `The wavecast daemon lacks ${missing.join(', ')}. Update the wavecast daemon.`,
    };
  }
  return { ok: true, message: `wavecast protocol ${version}` };
}

/**
 * The daemon refuses initialize on a version mismatch; its message already
 * says which side to update. Recognise it so the extension does not restart.
 */
export function isProtocolMismatchError(message: string): boolean {
  return /protocol/i.test(message) && /version|mismatch|update/i.test(message);
}

function reasonOf(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.trim().replace(/\.$/, '') || 'unknown error';
}

/** A request the user asked for (analyse, pick GPUs, …) failed: what failed, why, and what to do. */
export function requestFailureMessage(what: string, error: unknown): string {
  return `wavecast: ${what} failed: ${reasonOf(error)}. Open the server log for details; restart the server if it keeps failing.`;
}

/**
 * A command needs the daemon but it is not running. `lastFailure` is why the
 * last start failed, if it did.
 */
export function notRunningMessage(phase: 'starting' | 'stopped' | 'failed', lastFailure: string | null): string {
  if (phase === 'starting') return 'The wavecast daemon is still starting; try again in a moment.';
  if (lastFailure) return `The wavecast daemon is not running: ${lastFailure.replace(/\s+$/, '')}`;
  return 'The wavecast daemon is not running. Restart it to use wavecast.';
}

/** JSON-RPC's InvalidParams: the daemon refused a value (an unknown GPU, a bad batch size). */
export function isInvalidParamsError(error: unknown): error is Error & { code: number } {
  return error instanceof Error && (error as { code?: unknown }).code === ErrorCodes.InvalidParams;
}
