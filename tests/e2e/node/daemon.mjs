// Starts `wavecast serve` and connects the vscode-languageserver-protocol client to it.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  createMessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
} from 'vscode-languageserver-protocol/node.js';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '../../..');
export const wavecastBin =
  process.env.WAVECAST_BIN ?? path.join(repoRoot, 'build', 'bin', 'wavecast');

// A private copy of a sample, so saving it never touches the repository.
export function copySample(name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wavecast-e2e-'));
  const file = path.join(dir, name);
  fs.copyFileSync(path.join(repoRoot, 'samples', name), file);
  return { dir, file, uri: pathToFileURL(file).href, text: fs.readFileSync(file, 'utf8') };
}

export function spawnDaemon(args = []) {
  const child = spawn(wavecastBin, ['serve', '--gpu', 'H100,A100,T4', '--debounce-ms', '50', ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stderrText = '';
  child.stderr.on('data', (chunk) => {
    child.stderrText += chunk;
  });
  return child;
}

// A started daemon with an initialized client; records notifications by method.
export async function startClient({ initializationOptions = { protocol_version: 2 }, args = [] } = {}) {
  const child = spawnDaemon(args);
  const connection = createMessageConnection(
    new StreamMessageReader(child.stdout),
    new StreamMessageWriter(child.stdin),
  );
  const notifications = [];
  const waiters = [];
  connection.onNotification((method, params) => {
    notifications.push({ method, params });
    for (const waiter of [...waiters]) {
      if (waiter.match(method, params)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(params);
      }
    }
  });
  connection.onRequest('window/workDoneProgress/create', () => null);
  connection.onRequest('workspace/configuration', (params) => params.items.map(() => ({})));
  connection.onRequest('workspace/inlayHint/refresh', () => null);
  connection.onRequest('workspace/codeLens/refresh', () => null);
  connection.listen();

  const waitFor = (match, timeoutMs = 120000) =>
    new Promise((resolve, reject) => {
      const found = notifications.find((n) => match(n.method, n.params));
      if (found) return resolve(found.params);
      const timer = setTimeout(
        () => reject(new Error(`no matching notification after ${timeoutMs} ms; daemon stderr:\n${child.stderrText}`)),
        timeoutMs,
      );
      waiters.push({
        match,
        resolve: (params) => {
          clearTimeout(timer);
          resolve(params);
        },
      });
    });

  let initializeResult;
  try {
    initializeResult = await connection.sendRequest('initialize', {
      processId: process.pid,
      rootUri: null,
      capabilities: {
        window: { workDoneProgress: true },
        workspace: { configuration: true, inlayHint: { refreshSupport: true } },
        textDocument: { inlayHint: {}, hover: { contentFormat: ['markdown'] } },
      },
      initializationOptions,
    });
  } catch (error) {
    connection.dispose();
    child.kill();
    throw error;
  }
  connection.sendNotification('initialized', {});

  const stop = async () => {
    try {
      await Promise.race([connection.sendRequest('shutdown'), new Promise((r) => setTimeout(r, 2000))]);
      connection.sendNotification('exit');
    } catch {
      // the daemon may already be gone
    }
    connection.dispose();
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const killer = setTimeout(() => child.kill('SIGKILL'), 3000);
    if (child.exitCode === null && child.signalCode === null) await exited;
    clearTimeout(killer);
  };
  return { child, connection, notifications, waitFor, initializeResult, stop };
}
