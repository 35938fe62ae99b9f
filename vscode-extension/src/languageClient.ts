// Builds the vscode-languageclient LanguageClient for the daemon. Kept apart
// from the controller so the controller can be tested against a mock
// `vscode` without loading vscode-languageclient.
import { spawn, type ChildProcess } from 'child_process';
import { PassThrough } from 'stream';
import type * as net from 'net';
import type * as vscode from 'vscode';
import {
  CloseAction,
  DidChangeConfigurationNotification,
  ErrorAction,
  InlayHintRequest,
  LanguageClient,
  State,
  type LanguageClientOptions,
  type ServerOptions,
  type StreamInfo,
} from 'vscode-languageclient/node';
import type { ClientLike, ClientSpec } from './client';
import { endProcess } from './logic/process';

/**
 * The LanguageClient, adjusted where it reports failures itself.
 *
 * vscode-languageclient 9 leaves two promises unobserved when the connection
 * closes during initialize (a daemon that exits while starting, or one ended
 * after the initialize time-out): its start promise, which it drops before
 * returning, and `void this.stop()`, which rejects because the client never
 * ran. Both outcomes reach the controller another way (start() and the close
 * handler); observing them here keeps them from surfacing as unhandled
 * rejections in the extension host.
 */
class WavecastLanguageClient extends LanguageClient {
  override start(): Promise<void> {
    const starting = super.start();
    (this as unknown as { _onStart?: Promise<void> })._onStart?.catch(() => undefined);
    return starting;
  }

  // The controller reports each start, crash and restart once, with what to
  // do; the client's own forced notifications would say it a second time.
  override error(message: string, data?: unknown, showNotification?: boolean | 'force'): void {
    super.error(message, data, showNotification === 'force' ? false : showNotification);
  }

  override stop(timeout?: number): Promise<void> {
    return super.stop(timeout).catch((error: unknown) => {
      this.outputChannel.appendLine(`Stopping the client: ${error instanceof Error ? error.message : String(error)}`);
    });
  }
}

export function createLanguageClient(spec: ClientSpec): ClientLike {
  // The client spawns or connects through these functions so that stop()
  // can end the daemon even when it never finished initialize (the
  // LanguageClient only shuts down a running server). It gets streams, not
  // the process: ending the process is stop()'s job.
  let child: ChildProcess | undefined;
  let socket: net.Socket | undefined;
  // The end of the daemon's stderr: why it exited, when it exits while starting.
  let stderrTail = '';
  const transport = spec.transport;
  const serverOptions: ServerOptions =
    transport.kind === 'stdio'
      ? () =>
          new Promise<StreamInfo>((resolve, reject) => {
            const spawned = spawn(transport.command, transport.args, { env: transport.env });
            spawned.once('error', reject);
            spawned.once('spawn', () => {
              spawned.off('error', reject);
              spawned.on('error', (error) => spec.outputChannel.appendLine(`wavecast daemon: ${error.message}`));
              stderrTail = '';
              spawned.stderr.on('data', (chunk) => {
                spec.outputChannel.append(String(chunk));
                stderrTail = (stderrTail + String(chunk)).slice(-4096);
              });
              // Writes to a daemon that already exited fail with EPIPE, and
              // vscode-jsonrpc leaves that rejection unobserved; the exit is
              // reported through the closed stdout instead.
              const writer = new PassThrough();
              writer.pipe(spawned.stdin);
              spawned.stdin.on('error', (error) => spec.outputChannel.appendLine(`wavecast daemon's input: ${error.message}`));
              child = spawned;
              resolve({ reader: spawned.stdout, writer });
            });
          })
      : async (): Promise<StreamInfo> => {
          socket = await transport.connect();
          return { reader: socket, writer: socket };
        };

  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: 'file', language: 'python' }],
    outputChannel: spec.outputChannel,
    initializationOptions: spec.initializationOptions,
    // Each change of the `wavecast` section sends the daemon its settings (see the middleware).
    synchronize: { configurationSection: 'wavecast' },
    errorHandler: {
      error: () => ({ action: ErrorAction.Continue }),
      closed: () => {
        const decision = spec.onClosed();
        return { action: decision.restart ? CloseAction.Restart : CloseAction.DoNotRestart, message: decision.message, handled: true };
      },
    },
    initializationFailedHandler: (error) => {
      spec.onInitializeFailed(error instanceof Error ? error.message : String(error));
      return false;
    },
    middleware: {
      provideInlayHints: (document, viewPort, token, next) => (spec.inlayHintsEnabled() ? next(document, viewPort, token) : []),
      // The daemon gets the checked settings with the worker's environment,
      // not settings.json's raw values (see DaemonSettings).
      workspace: {
        configuration: async (params, token, next) => {
          const values = await next(params, token);
          if (!Array.isArray(values)) return values;
          return values.map((value, i) => (params.items[i]?.section === 'wavecast' ? spec.daemonSettings() : value));
        },
        didChangeConfiguration: () => sendSettings(),
      },
    },
  };

  const client = new WavecastLanguageClient('wavecast', 'wavecast', serverOptions, clientOptions);
  const sendSettings = () => client.sendNotification(DidChangeConfigurationNotification.type, { settings: { wavecast: spec.daemonSettings() } });
  return {
    start: () => client.start(),
    stop: async () => {
      const wasRunning = client.isRunning();
      try {
        if (wasRunning) await client.stop(2000);
      } finally {
        const [process, connection] = [child, socket];
        child = undefined;
        socket = undefined;
        connection?.destroy();
        // After a clean shutdown the daemon exits by itself; one that never
        // got that far is ended now.
        if (process) await endProcess(process, wasRunning ? 2000 : 0);
      }
    },
    sendRequest: (type, params) => client.sendRequest(type, params),
    onNotification: (type, handler) => client.onNotification(type, handler),
    serverExperimentalCapabilities: () => client.initializeResult?.capabilities.experimental,
    lastWords: () => stderrTail.split('\n').map((line) => line.trim()).filter((line) => line !== '').at(-1) ?? null,
    onRunning: (listener) => client.onDidChangeState((event) => event.newState === State.Running && listener()),
    sendSettings: () => {
      sendSettings().catch((error: unknown) =>
        spec.outputChannel.appendLine(`Sending the settings: ${error instanceof Error ? error.message : String(error)}`),
      );
    },
    refreshInlayHints: (document: vscode.TextDocument) => {
      client.getFeature(InlayHintRequest.method).getProvider(document)?.onDidChangeInlayHints.fire();
    },
  };
}
