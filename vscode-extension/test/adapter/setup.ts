// The adapter tests' shared set-up: a controller whose clients answer like a
// healthy daemon, behind the mocked `vscode`.
import '../mock/register';
import type { InlayHint, InlayHintParams } from 'vscode-languageserver-protocol';
import fs from 'node:fs';
import path from 'node:path';
import type { ClientSpec } from '../../src/client';
import { WavecastController } from '../../src/controller';
import { RestartPolicy } from '../../src/logic/restartPolicy';
import { ExtensionMode, FakeMemento, FakeSecretStorage, FakeTextDocument, FakeTextEditor, harness, Uri, window } from '../mock/vscode';
import { GPU_LIST, loadResults } from '../fixtures';
import { FakeClient } from './fakeClient';

export const FILE = '/home/ada/projects/resnet/train_resnet.py';
/** The extension's package.json, as VS Code hands it to the extension. */
const MANIFEST = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../../package.json'), 'utf8'));
export const URI = `file://${FILE}`;

export interface Setup {
  controller: WavecastController;
  clients: FakeClient[];
  context: { subscriptions: { dispose(): void }[]; extensionUri: Uri; secrets: FakeSecretStorage; globalState: FakeMemento };
}

/** Builds a controller whose clients answer like a healthy daemon. */
export function setup(
  options: {
    executable?: (file: string) => boolean;
    prepare?: (client: FakeClient) => void;
    policy?: RestartPolicy;
    secrets?: FakeSecretStorage;
    globalState?: FakeMemento;
    /** Where the extension is installed (default /ext/wavecast, holding no daemon). */
    extensionPath?: string;
  } = {},
): Setup {
  const clients: FakeClient[] = [];
  const context = {
    subscriptions: [] as { dispose(): void }[],
    extensionUri: Uri.file(options.extensionPath ?? '/ext/wavecast'),
    extensionMode: ExtensionMode.Production,
    secrets: options.secrets ?? new FakeSecretStorage(),
    globalState: options.globalState ?? new FakeMemento(),
    extension: { packageJSON: MANIFEST },
  };
  const factory = (spec: ClientSpec) => {
    const client = new FakeClient(spec);
    let targets = [...GPU_LIST.targets];
    client.handlers.set('wavecast/listGpus', () => ({ ...GPU_LIST, targets }));
    client.handlers.set('wavecast/setTargets', (p: { gpus: string[] }) => {
      targets = p.gpus;
      return { targets };
    });
    client.handlers.set('wavecast/results', () => loadResults());
    client.handlers.set('wavecast/analyze', () => loadResults());
    client.handlers.set('wavecast/setBatchSize', () => ({}));
    client.handlers.set('textDocument/inlayHint', daemonInlayHints);
    options.prepare?.(client);
    clients.push(client);
    return client;
  };
  const controller = new WavecastController(
    context as never,
    factory,
    options.executable ?? ((file) => file === '/usr/bin/wavecast'),
    options.policy,
  );
  return { controller, clients, context };
}

/** The label the fake daemon renders for analysed (1-based) line `line`. */
export const daemonLabel = (line: number) => `H100-SXM ${line}.0 ms · T4 ${line * 10} ms (daemon)`;

/**
 * Where the daemon shows analysed 0-based `line` of `saved` in `current`: as
 * its line diff does for one edited stretch, unchanged lines above keep their
 * number, those below move by the lines added, edited ones have none.
 */
function mapLine(saved: readonly string[], current: readonly string[], line: number): number | null {
  let prefix = 0;
  while (prefix < saved.length && prefix < current.length && saved[prefix] === current[prefix]) prefix += 1;
  let suffix = 0;
  while (suffix < saved.length - prefix && suffix < current.length - prefix && saved.at(-1 - suffix) === current.at(-1 - suffix)) suffix += 1;
  if (line < prefix) return line;
  if (line >= saved.length - suffix) return line + current.length - saved.length;
  return null;
}

/** textDocument/inlayHint as the daemon answers it: a hint per predicted line of FILE in the range, on its line now. */
export function daemonInlayHints(params: InlayHintParams): InlayHint[] {
  const document = harness.documents.get(FILE);
  if (!document || params.textDocument.uri !== URI) return [];
  const predicted = loadResults().prediction!.lines.filter((l) => l.file === FILE).map((l) => l.line);
  return predicted.flatMap((analysed) => {
    const line = mapLine(document.savedLines, document.lines, analysed - 1);
    if (line === null || line < params.range.start.line || line > params.range.end.line) return [];
    return [{ position: { line, character: document.lines[line].length }, label: daemonLabel(analysed), paddingLeft: true }];
  });
}

export function openEditor(lines = 60): FakeTextEditor {
  const document = new FakeTextDocument(Uri.file(FILE), Array.from({ length: lines }, (_, i) => `line ${i + 1}`));
  harness.documents.set(FILE, document);
  const editor = new FakeTextEditor(document);
  window.visibleTextEditors = [editor];
  harness.activate(editor);
  return editor;
}

export const statusItem = () => harness.statusItems[0];
export const tick = () => new Promise((resolve) => setImmediate(resolve));

/** The per-test reset every adapter test file runs in `beforeEach`. */
export function resetHarness(): void {
  harness.reset();
  process.env.PATH = '/usr/local/bin:/usr/bin';
}

export function secretsWith(token: string): FakeSecretStorage {
  const secrets = new FakeSecretStorage();
  secrets.values.set('wavecast.remoteToken', token);
  return secrets;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
