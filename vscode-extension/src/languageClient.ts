// Builds the vscode-languageclient LanguageClient for the daemon. Kept apart
// from the controller so the controller can be tested against a mock
// `vscode` without loading vscode-languageclient.
import { spawn, type ChildProcess } from 'child_process';
import type * as net from 'net';
import type * as vscode from 'vscode';
import {
  CloseAction,
  ErrorAction,
  InlayHintRequest,
  LanguageClient,
  State,
  type LanguageClientOptions,
  type ServerOptions,
  type StreamInfo,
} from 'vscode-languageclient/node';
import type { ClientLike, ClientSpec } from './controller';
import { endProcess } from './logic/process';

export function createLanguageClient(spec: ClientSpec): ClientLike {
  // The client spawns or connects through these functions so that stop()
  // can end the daemon even when it never finished initialize (the
  // LanguageClient only shuts down a running server).
  let child: ChildProcess | undefined;
  let socket: net.Socket | undefined;
  // The end of the daemon's stderr: why it exited, when it exits while starting.
  let stderrTail = '';
  const transport = spec.transport;
  const serverOptions: ServerOptions =
    transport.kind === 'stdio'
      ? () =>
          new Promise<ChildProcess>((resolve, reject) => {
            const spawned = spawn(transport.command, transport.args, { env: transport.env });
            spawned.once('error', reject);
            spawned.once('spawn', () => {
              spawned.off('error', reject);
              spawned.on('error', (error) => spec.outputChannel.appendLine(`wavecast daemon: ${error.message}`));
              stderrTail = '';
              spawned.stderr?.on('data', (chunk) => (stderrTail = (stderrTail + String(chunk)).slice(-4096)));
              child = spawned;
              resolve(spawned);
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
    // The daemon pulls the `wavecast` section on didChangeConfiguration.
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
    },
  };

  const client = new LanguageClient('wavecast', 'wavecast', serverOptions, clientOptions);
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
    refreshInlayHints: (document: vscode.TextDocument) => {
      client.getFeature(InlayHintRequest.method).getProvider(document)?.onDidChangeInlayHints.fire();
    },
  };
}
