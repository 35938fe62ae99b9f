// Builds the vscode-languageclient LanguageClient for the daemon. Kept apart
// from the controller so the controller can be tested against a mock
// `vscode` without loading vscode-languageclient.
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

export function createLanguageClient(spec: ClientSpec): ClientLike {
  const serverOptions: ServerOptions =
    spec.transport.kind === 'stdio'
      ? { command: spec.transport.command, args: spec.transport.args, options: { env: spec.transport.env } }
      : async (): Promise<StreamInfo> => {
          const socket = await (spec.transport as Extract<ClientSpec['transport'], { kind: 'tcp' }>).connect();
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
    stop: () => client.stop(2000),
    sendRequest: (type, params) => client.sendRequest(type, params),
    onNotification: (type, handler) => client.onNotification(type, handler),
    serverExperimentalCapabilities: () => client.initializeResult?.capabilities.experimental,
    onRunning: (listener) => client.onDidChangeState((event) => event.newState === State.Running && listener()),
    refreshInlayHints: (document: vscode.TextDocument) => {
      client.getFeature(InlayHintRequest.method).getProvider(document)?.onDidChangeInlayHints.fire();
    },
  };
}
