// The adapter tests' shared set-up: a controller whose clients answer like a
// healthy daemon, behind the mocked `vscode`.
import '../mock/register';
import { WavecastController, type ClientSpec } from '../../src/controller';
import { RestartPolicy } from '../../src/logic/restartPolicy';
import { ExtensionMode, FakeMemento, FakeSecretStorage, FakeTextDocument, FakeTextEditor, harness, Uri, window } from '../mock/vscode';
import { GPU_LIST, loadResults } from '../fixtures';
import { FakeClient } from './fakeClient';

export const FILE = '/home/ada/projects/resnet/train_resnet.py';
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
  } = {},
): Setup {
  const clients: FakeClient[] = [];
  const context = {
    subscriptions: [] as { dispose(): void }[],
    extensionUri: Uri.file('/ext/wavecast'),
    extensionMode: ExtensionMode.Production,
    secrets: options.secrets ?? new FakeSecretStorage(),
    globalState: options.globalState ?? new FakeMemento(),
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
