// The daemon's lifecycle as one state machine: which connection attempt is
// current, whether its client is starting, running, being restarted after a
// crash or has failed, and what a close or a settled start means in each
// state. The controller performs what it decides (creating and stopping
// clients, notifications); no `vscode` here, so every transition is tested.
import type { ClientPhase } from './annotations';
import { checkServerCapability, isProtocolMismatchError } from './errors';
import { isAuthenticationError } from './remote';
import { RestartPolicy, type RestartDecision } from './restartPolicy';
import { initializeTimeoutMessage, startOutcome } from './startup';

/** One connection attempt; callbacks of an older attempt's client are ignored. */
export type LaunchId = number;

export type LifecycleState =
  | { kind: 'stopped' }
  | { kind: 'untrusted' }
  /** Finding the daemon (or the remote token); no client yet. */
  | { kind: 'connecting'; launch: LaunchId }
  /** The client's first start: a close now fails this start instead of restarting. */
  | { kind: 'starting'; launch: LaunchId; closedWhileStarting: boolean; initializeError: string | null }
  | { kind: 'running'; launch: LaunchId }
  /** The client restarts a crashed daemon; it has the initialize time-out to come back. */
  | { kind: 'restarting'; launch: LaunchId }
  | { kind: 'failed'; reason: string };

/** What the user is offered to fix a failure. */
export type FailureRemedy =
  /** Settings, a restart, the log: the generic offer. */
  | 'restart'
  /** The daemon and extension disagree (protocol, capabilities): settings and the log, not a restart. */
  | 'settings'
  /** A remote daemon wants a token (missing or refused). */
  | 'remoteToken'
  /** No daemon comes with the extension for this platform: the README's instructions, and the settings. */
  | 'install';

export interface Failure {
  message: string;
  remedy: FailureRemedy;
}

/** What a close reported by a client means. */
export type CloseOutcome =
  /** A client already let go of (stopped, replaced, failed): nobody's crash. */
  | { kind: 'notCurrent'; decision: RestartDecision }
  /** Reported as the failed start once the start settles, never also restarted. */
  | { kind: 'exitedWhileStarting'; decision: RestartDecision }
  | { kind: 'restarting'; decision: RestartDecision }
  /** Too many crashes: failed until the user restarts it. */
  | { kind: 'gaveUp'; decision: RestartDecision };

export type StartSettlement =
  /** Stopped or started again meanwhile: this start is no longer anyone's to report. */
  | { kind: 'superseded' }
  | { kind: 'running'; protocol: string }
  | { kind: 'failed'; failure: Failure };

/** How the client's start ended, for settleStart. */
export interface StartReport {
  /** The rejection of start() (a TimeoutError after the initialize time-out), if any. */
  error: unknown;
  /** The daemon's last line on stderr. */
  lastWords: string | null;
  /** `capabilities.experimental` of the initialize result. */
  capabilities: unknown;
}

export interface LifecycleHooks {
  /** Any transition: the status bar and the `wavecast.running` context follow. */
  changed(phase: ClientPhase): void;
  /** Seconds an automatic restart may take before it is a failure (wavecast.initializeTimeout). */
  initializeTimeoutSeconds(): number;
  /** An automatic restart did not come back in time: the lifecycle has failed; end the client and tell the user. */
  restartTimedOut(failure: Failure): void;
}

export interface Timers {
  set(callback: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const systemTimers: Timers = {
  set: (callback, ms) => {
    const timer = setTimeout(callback, ms);
    // A watch alone does not keep the extension host (or a test) alive.
    timer.unref?.();
    return timer;
  },
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

const NO_RESTART = (message: string): RestartDecision => ({ restart: false, crashesInWindow: 0, message });

/** The message and offer for a start that failed with `reason`. */
export function startFailure(reason: string, timedOut: boolean): Failure {
  if (timedOut) return { message: reason, remedy: 'restart' };
  // The daemon's refusal already says which side to update.
  if (isProtocolMismatchError(reason)) return { message: reason, remedy: 'settings' };
  if (isAuthenticationError(reason)) {
    return {
      message: `The wavecast daemon refused the connection: ${reason}. Set the right token with "wavecast: Set Remote Token".`,
      remedy: 'remoteToken',
    };
  }
  return { message: `The wavecast daemon did not start: ${reason}`, remedy: 'restart' };
}

export class DaemonLifecycle {
  private current: LifecycleState = { kind: 'stopped' };
  private launches = 0;
  private restartWatch: unknown = undefined;

  constructor(
    private readonly hooks: LifecycleHooks,
    private readonly policy = new RestartPolicy(),
    private readonly timers: Timers = systemTimers,
  ) {}

  get state(): Readonly<LifecycleState> {
    return this.current;
  }

  /** What the status bar and commands see: finding, starting and restarting all read as starting. */
  get phase(): ClientPhase {
    switch (this.current.kind) {
      case 'connecting':
      case 'starting':
      case 'restarting':
        return 'starting';
      default:
        return this.current.kind;
    }
  }

  /** Why the daemon is not running, while it has failed. */
  get failure(): string | null {
    return this.current.kind === 'failed' ? this.current.reason : null;
  }

  /** Whether `launch` is the attempt the current state belongs to. */
  isCurrent(launch: LaunchId): boolean {
    return 'launch' in this.current && this.current.launch === launch;
  }

  /** The workspace is not trusted: nothing may run. */
  untrusted(): void {
    this.enter({ kind: 'untrusted' });
  }

  /** A new attempt to reach the daemon; any older one is superseded. */
  connect(): LaunchId {
    this.launches += 1;
    this.enter({ kind: 'connecting', launch: this.launches });
    return this.launches;
  }

  /** No daemon could be reached for `launch`; false when that attempt was superseded. */
  connectFailed(launch: LaunchId, reason: string): boolean {
    if (this.current.kind !== 'connecting' || this.current.launch !== launch) return false;
    this.enter({ kind: 'failed', reason });
    return true;
  }

  /** The daemon was reached for `launch` and its client starts now; false when that attempt was superseded. */
  beginStart(launch: LaunchId): boolean {
    if (this.current.kind !== 'connecting' || this.current.launch !== launch) return false;
    this.enter({ kind: 'starting', launch, closedWhileStarting: false, initializeError: null });
    return true;
  }

  /** The daemon answered initialize with an error (its reason beats the client's "Initialize failed"). */
  initializeFailed(launch: LaunchId, message: string): void {
    if (this.current.kind === 'starting' && this.current.launch === launch) this.current.initializeError = message;
  }

  /** `launch`'s start() settled: running once the daemon's capabilities fit, else failed. */
  settleStart(launch: LaunchId, report: StartReport): StartSettlement {
    const state = this.current;
    if (state.kind !== 'starting' || state.launch !== launch) return { kind: 'superseded' };
    const outcome = startOutcome(report.error, state.closedWhileStarting, state.initializeError, report.lastWords);
    if (!outcome.ok) return this.failStart(startFailure(outcome.reason, outcome.timedOut));
    const check = checkServerCapability(report.capabilities);
    if (!check.ok) return this.failStart({ message: check.message, remedy: 'settings' });
    this.enter({ kind: 'running', launch });
    return { kind: 'running', protocol: check.message };
  }

  /** `launch`'s connection closed; the decision tells the client whether to restart the daemon. */
  closed(launch: LaunchId): CloseOutcome {
    const state = this.current;
    if (!('launch' in state) || state.launch !== launch || state.kind === 'connecting') {
      return { kind: 'notCurrent', decision: NO_RESTART('The wavecast daemon was stopped.') };
    }
    if (state.kind === 'starting') {
      // settleStart reports it as the failed start; restarting as well would
      // give two outcomes (and a daemon nobody waits for).
      state.closedWhileStarting = true;
      return { kind: 'exitedWhileStarting', decision: NO_RESTART('The wavecast daemon exited while starting.') };
    }
    const decision = this.policy.recordCrash();
    if (!decision.restart) {
      this.enter({ kind: 'failed', reason: decision.message });
      return { kind: 'gaveUp', decision };
    }
    this.enter({ kind: 'restarting', launch });
    this.watchRestart(launch);
    return { kind: 'restarting', decision };
  }

  /** `launch`'s client reached the running state; true when that ends an automatic restart. */
  clientRunning(launch: LaunchId): boolean {
    if (this.current.kind !== 'restarting' || this.current.launch !== launch) return false;
    this.enter({ kind: 'running', launch });
    return true;
  }

  /** Fails with `reason` whatever the state; the current client, if any, is no longer current. */
  fail(reason: string): void {
    this.enter({ kind: 'failed', reason });
  }

  /** The client is stopped (or about to be); an untrusted workspace stays untrusted. */
  stop(): void {
    this.enter(this.current.kind === 'untrusted' ? this.current : { kind: 'stopped' });
  }

  /** The user asked for a restart: stopped, with a fresh crash budget for the next client. */
  userRestart(): void {
    this.policy.reset();
    this.stop();
  }

  /** A setting that is part of the daemon's command line changed: whether to restart it. */
  settingsNeedRestart(): boolean {
    return this.current.kind !== 'untrusted';
  }

  /** The remote token changed: whether to reconnect (it applies to the next connection to a remote daemon). */
  tokenChanged(remote: boolean): boolean {
    return remote && this.current.kind !== 'untrusted';
  }

  private failStart(failure: Failure): StartSettlement {
    this.enter({ kind: 'failed', reason: failure.message });
    return { kind: 'failed', failure };
  }

  /** An automatic restart gets the same initialize time-out as the first start. */
  private watchRestart(launch: LaunchId): void {
    const seconds = this.hooks.initializeTimeoutSeconds();
    this.restartWatch = this.timers.set(() => {
      this.restartWatch = undefined;
      if (this.current.kind !== 'restarting' || this.current.launch !== launch) return;
      const failure: Failure = { message: initializeTimeoutMessage(seconds), remedy: 'restart' };
      this.enter({ kind: 'failed', reason: failure.message });
      this.hooks.restartTimedOut(failure);
    }, seconds * 1000);
  }

  /** Every transition ends a restart's watch; closed() arms a new one after entering `restarting`. */
  private enter(state: LifecycleState): void {
    if (this.restartWatch !== undefined) {
      this.timers.clear(this.restartWatch);
      this.restartWatch = undefined;
    }
    this.current = state;
    this.hooks.changed(this.phase);
  }
}
