// How the extension reaches the daemon: a remote one (`wavecast serve
// --listen`) with the token from the secret storage, or a local
// `wavecast serve` found by the server locator and started over stdio.
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as vscode from 'vscode';
import { missingBundledLibraries, missingLibrariesMessage } from './logic/bundledServer';
import type { FailureRemedy } from './logic/daemonLifecycle';
import { connectRemote } from './logic/remote';
import { missingTokenMessage } from './logic/remoteToken';
import { locateServer } from './logic/serverLocator';
import { resolveUserPath, serveArguments, type WavecastSettings } from './logic/settings';
import type { RemoteTokenStore } from './remoteTokenStore';

export type Transport =
  | { kind: 'stdio'; command: string; args: string[]; env: NodeJS.ProcessEnv }
  | { kind: 'tcp'; connect: () => Promise<net.Socket> };

export interface Connection {
  transport: Transport;
  /** Sent in initializationOptions to a remote daemon. */
  token: string | null;
}

/** Why no connection could be made, and what fixes it. */
export type ConnectionFailure = { error: string; remedy: FailureRemedy };

export interface ConnectionContext {
  context: vscode.ExtensionContext;
  tokens: RemoteTokenStore;
  isExecutable: (file: string) => boolean;
  log: (message: string) => void;
}

export function isExecutableFile(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

export async function daemonConnection(settings: WavecastSettings, from: ConnectionContext): Promise<Connection | ConnectionFailure> {
  if (settings.remote) {
    const remote = settings.remote;
    const token = await from.tokens.token(settings.settingsToken);
    if (!token) return { error: missingTokenMessage(), remedy: 'remoteToken' };
    from.log(`Connecting to the daemon at ${remote.host}:${remote.port}.`);
    return { transport: { kind: 'tcp', connect: () => connectRemote(remote) }, token };
  }
  const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
  const located = locateServer({
    serverPath: settings.serverPath,
    pathEnv: process.env.PATH,
    homeDir: os.homedir(),
    workspaceFolders: folders,
    workspaceTrusted: vscode.workspace.isTrusted,
    extensionPath: from.context.extensionUri.fsPath,
    developing: from.context.extensionMode === vscode.ExtensionMode.Development,
    isExecutable: from.isExecutable,
    platform: process.platform,
    arch: process.arch,
  });
  if ('error' in located) {
    from.log(`Searched: ${located.searched.join(', ')}`);
    return { error: located.error, remedy: located.kind === 'noPackageForPlatform' ? 'install' : 'restart' };
  }
  // Built on Debian 12: a machine without its libraries (Python 3.11's first) gets one message saying what to install.
  if (located.source === 'extension') {
    const missing = await missingBundledLibraries(located.path);
    if (missing.length > 0) return { error: missingLibrariesMessage(missing), remedy: 'restart' };
  }
  const args = serveArguments(settings, (text) => resolveUserPath(text, os.homedir(), folders[0]));
  from.log(`Starting ${located.path} ${args.join(' ')} (found via ${located.source}).`);
  return { transport: { kind: 'stdio', command: located.path, args, env: process.env }, token: null };
}
