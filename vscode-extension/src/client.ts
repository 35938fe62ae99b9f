// What the controller needs of a language client: languageClient.ts makes the real one,
// the adapter tests a fake.
import type * as vscode from 'vscode';
import type { Transport } from './daemonConnection';
import type { RpcEndpoint } from './logic/api';
import type { InitializationOptions } from './logic/protocol';
import type { RestartDecision } from './logic/restartPolicy';
import type { DaemonSettings } from './logic/settings';

export interface ClientSpec {
  transport: Transport;
  initializationOptions: InitializationOptions;
  outputChannel: vscode.OutputChannel;
  /** The connection closed unexpectedly; returns whether to restart. */
  onClosed: () => RestartDecision;
  onInitializeFailed: (message: string) => void;
  inlayHintsEnabled: () => boolean;
  /** The `wavecast` section as the daemon gets it, read when it asks (see DaemonSettings). */
  daemonSettings: () => DaemonSettings;
}

export interface ClientLike extends RpcEndpoint {
  start(): Promise<void>;
  stop(): Promise<void>;
  serverExperimentalCapabilities(): unknown;
  /** The daemon's last line on stderr (a local daemon's), if any: why it exited. */
  lastWords(): string | null;
  refreshInlayHints(document: vscode.TextDocument): void;
  /** Fires each time the client reaches the running state, restarts included. */
  onRunning(listener: () => void): vscode.Disposable;
  /** Sends the daemon spec.daemonSettings() (workspace/didChangeConfiguration). */
  sendSettings(): void;
}

export type ClientFactory = (spec: ClientSpec) => ClientLike;
