// The extension as VS Code runs it: src/extension.ts activates the controller,
// which starts the real daemon through src/languageClient.ts and the real
// vscode-languageclient. Only `vscode` itself is the mock (test/mock).
import '../mock/register';
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';
import { activate, deactivate } from '../../src/extension';
import { installFolders } from '../../src/logic/serverLocator';
import { FakePythonExtension, globalInterpreter, venvEnvironment } from '../mock/pythonExtension';
import {
  CancellationTokenSource,
  ExtensionMode,
  FakeMemento,
  FakeSecretStorage,
  FakeTextDocument,
  FakeTextEditor,
  harness,
  Position,
  Range,
  Uri,
  window,
  workspace,
} from '../mock/vscode';

const extensionRoot = path.join(__dirname, '..', '..', '..');
const repoRoot = path.join(extensionRoot, '..');
const binary = path.resolve(process.env.WAVECAST_BINARY ?? path.join(repoRoot, 'build', 'bin', 'wavecast'));
const sample = path.join(repoRoot, 'samples', 'small_cnn.py');
const skip = !fs.existsSync(binary)
  ? `wavecast binary not found at ${binary}: build it (ninja -C build wavecast wavecast-worker) or set WAVECAST_BINARY`
  : false;
const ANALYSIS_TIMEOUT_MS = 180_000;
/** small_cnn.py's `x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)`, 0-based. */
const CONV1_LINE = 21;

let folder = '';

beforeEach(() => {
  harness.reset();
  folder = fs.mkdtempSync(path.join(os.tmpdir(), 'wavecast-wiring-'));
  fs.copyFileSync(sample, path.join(folder, 'small_cnn.py'));
  workspace.workspaceFolders = [{ uri: Uri.file(folder), name: 'wiring', index: 0 }];
});

afterEach(async () => {
  await deactivate();
  fs.rmSync(folder, { recursive: true, force: true });
});

function extensionContext() {
  return {
    subscriptions: [] as { dispose(): void }[],
    extensionUri: Uri.file(extensionRoot),
    extensionMode: ExtensionMode.Production,
    secrets: new FakeSecretStorage(),
    globalState: new FakeMemento(),
  };
}

/** Opens the copied sample in a visible, active editor. */
function openSample(): { document: FakeTextDocument; editor: FakeTextEditor } {
  const file = path.join(folder, 'small_cnn.py');
  const document = new FakeTextDocument(Uri.file(file), fs.readFileSync(file, 'utf8').split('\n'));
  harness.documents.set(file, document);
  harness.openDocument(document);
  const editor = new FakeTextEditor(document);
  window.visibleTextEditors = [editor];
  harness.activate(editor);
  return { document, editor };
}

/** Processes this test started whose executable is `executable`: the daemons it runs. */
function childrenRunning(executable: string): number[] {
  const pids: number[] = [];
  for (const task of fs.readdirSync(`/proc/${process.pid}/task`)) {
    const children = fs.readFileSync(`/proc/${process.pid}/task/${task}/children`, 'utf8').trim();
    for (const pid of children === '' ? [] : children.split(/\s+/).map(Number)) {
      try {
        if (fs.realpathSync(`/proc/${pid}/exe`) === fs.realpathSync(executable)) pids.push(pid);
      } catch {
        // exited meanwhile
      }
    }
  }
  return pids;
}

async function waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}; shown: ${JSON.stringify(harness.shown)}\nlog:\n${harness.outputLines.slice(-30).join('\n')}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const statusText = () => harness.statusItems[0]?.text as string;
const errors = () => harness.shown.filter((s) => s.kind === 'error');

test(
  'activation starts the daemon; a save is analysed and shown as decorations, inlay hints, hover and in the panel; restarts replace the daemon',
  { skip, timeout: 2 * ANALYSIS_TIMEOUT_MS },
  async () => {
    harness.config.set('serverPath', binary);
    harness.config.set('display', 'decorations');
    harness.config.set('trace.server', 'messages');
    const { document, editor } = openSample();
    await activate(extensionContext() as never);

    assert.match(statusText(), /^\$\(pulse\) wavecast: /, `status: ${statusText()}; shown: ${JSON.stringify(harness.shown)}`);
    assert.deepEqual(errors(), []);
    const [daemon] = childrenRunning(binary);
    assert.ok(daemon, 'the daemon runs as a child of the extension host');
    assert.ok(harness.outputLines.some((l) => /Sending request 'initialize/.test(l)), 'wavecast.trace.server reaches the client');
    assert.ok(harness.outputLines.some((l) => l.includes(`Starting ${binary} serve (found via setting)`)));

    // The save goes to the daemon as didSave; its resultsChanged brings the decorations.
    harness.documentSaved.fire(document);
    const decorations = await waitFor(
      'decorations after the save',
      () => [...editor.decorations.values()].find((options) => options.length > 0),
      ANALYSIS_TIMEOUT_MS,
    );
    const conv1 = decorations.find((d: any) => d.range.start.line === CONV1_LINE);
    assert.ok(conv1, `no decoration on line ${CONV1_LINE + 1}: ${decorations.map((d: any) => d.range.start.line + 1).join(', ')}`);
    assert.equal(conv1.range.start.character, document.lines[CONV1_LINE].length);
    assert.match(conv1.renderOptions.after.contentText, /^H100\S* [\d.]+ (µs|ms|s) · .*T4 [\d.]+ (µs|ms|s) \((<0\.1|\d+|0\.\d)%\)$/);

    const range = new Range(0, 0, document.lineCount - 1, 0);
    const inlayProvider = harness.providers.get('inlayHints')![0];
    const token = new CancellationTokenSource().token;
    assert.deepEqual(await inlayProvider.provideInlayHints(document, range, token), [], 'decorations mode: no inlay hints as well');

    harness.changeSettings({ display: 'inlayHints' });
    await waitFor('decorations cleared', () => [...editor.decorations.values()].every((options) => options.length === 0));
    const hints = await inlayProvider.provideInlayHints(document, range, token);
    const conv1Hint = hints.find((h: any) => h.position.line === CONV1_LINE);
    assert.ok(conv1Hint, `no inlay hint on line ${CONV1_LINE + 1}`);
    const label = typeof conv1Hint.label === 'string' ? conv1Hint.label : conv1Hint.label.map((p: any) => p.value).join('');
    assert.match(label, /H100\S* [\d.]+ ?(µs|ms)/);

    const hover = await harness.providers.get('hover')![0].provideHover(document, new Position(CONV1_LINE, 10), token);
    const hoverText = (Array.isArray(hover.contents) ? hover.contents : [hover.contents]).map((c: any) => c.value).join('\n');
    assert.match(hoverText, /T4/);

    await harness.commands.get('wavecast.showResults')!();
    const posted = harness.panels[0].webview.posted.at(-1);
    assert.equal(posted.results.uri, document.uri.toString());
    assert.equal(posted.results.state, 'ready');
    assert.equal(posted.results.prediction.batch_size, 64);

    // Restart Server: the old daemon goes, a new one answers.
    await harness.commands.get('wavecast.restartServer')!();
    assert.match(statusText(), /^\$\(pulse\) wavecast: /);
    const [restarted] = childrenRunning(binary);
    assert.ok(restarted && restarted !== daemon, `daemons now: ${childrenRunning(binary)}`);
    await waitFor('the first daemon to exit', () => !childrenRunning(binary).includes(daemon));

    // A crash is restarted automatically, once reported as a warning.
    process.kill(restarted, 'SIGKILL');
    await waitFor('the automatic restart', () => childrenRunning(binary).some((pid) => pid !== restarted) && /^\$\(pulse\)/.test(statusText()));
    assert.equal(harness.shown.filter((s) => /restarting it \(attempt 1 of 3\)/.test(s.message)).length, 1);
    assert.deepEqual(errors(), []);
    await harness.commands.get('wavecast.analyzeNow')!();
    assert.match(harness.shown.at(-1)!.message, /^wavecast: small_cnn.py, batch 64: H100\S* [\d.]+ (µs|ms)/);
  },
);

test('decorations follow an unsaved edit to the line the daemon maps it to', { skip, timeout: 2 * ANALYSIS_TIMEOUT_MS }, async () => {
  harness.config.set('serverPath', binary);
  harness.config.set('display', 'decorations');
  const { document, editor } = openSample();
  await activate(extensionContext() as never);
  await harness.commands.get('wavecast.analyzeNow')!();
  const decorationOn = (line: number) => [...editor.decorations.values()].flat().find((d: any) => d.range.start.line === line);
  const labelOn = (line: number): string | undefined => decorationOn(line)?.renderOptions.after.contentText;
  const label = await waitFor('the conv1 decoration', () => labelOn(CONV1_LINE), ANALYSIS_TIMEOUT_MS);

  // Two lines typed at the top, unsaved: the language client sends them, the daemon maps its lines.
  document.edit(0, 0, ['import os', 'import sys']);
  await waitFor('the decoration two lines down', () => labelOn(CONV1_LINE + 2) === label);
  assert.equal(decorationOn(CONV1_LINE + 2).range.start.character, document.lines[CONV1_LINE + 2].length);
  assert.notEqual(labelOn(CONV1_LINE), label, 'nothing left on the line it was analysed at');
});

test('a daemon that exits while starting is one error with its reason, not a restart', { skip, timeout: 60_000 }, async () => {
  harness.config.set('serverPath', binary);
  harness.config.set('gpuFile', 'missing-gpus.json');
  openSample();
  await activate(extensionContext() as never);
  assert.deepEqual(
    harness.shown.map((s) => [s.kind, s.message]),
    [['error', `The wavecast daemon did not start: it exited while starting: wavecast: error: GPU file '${folder}/missing-gpus.json' does not exist`]],
  );
  assert.deepEqual(harness.shown[0].actions, ['Open Settings', 'Restart Server', 'Open Server Log']);
  assert.match(statusText(), /^\$\(error\) wavecast: /);
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.deepEqual(childrenRunning(binary), [], 'nothing restarted behind the report');
  assert.equal(harness.shown.length, 1);

  // Fixing the setting restarts it.
  harness.changeSettings({ gpuFile: '' });
  await waitFor('the restart after the fix', () => /^\$\(pulse\)/.test(statusText()));
  assert.equal(childrenRunning(binary).length, 1);
});

test('a daemon that never answers initialize is stopped after wavecast.initializeTimeout', { timeout: 30_000 }, async () => {
  // Stands in for a hung daemon: reads nothing, answers nothing.
  const silent = path.join(folder, 'silent-daemon');
  fs.writeFileSync(silent, '#!/bin/sh\nexec sleep 60\n', { mode: 0o755 });
  harness.config.set('serverPath', silent);
  harness.config.set('initializeTimeout', 1);
  openSample();
  const started = Date.now();
  await activate(extensionContext() as never);
  assert.ok(Date.now() - started >= 900, 'waited for the time-out');
  assert.equal(harness.shown.length, 1, JSON.stringify(harness.shown));
  assert.match(harness.shown[0].message, /did not answer initialize within 1 s and was stopped/);
  assert.match(statusText(), /^\$\(error\) wavecast: /);
  await waitFor('the silent daemon to be ended', () => childrenRunning('/bin/sleep').length === 0, 5000);
});

test("the Python extension's interpreter reaches the daemon's worker; selecting another applies without a restart", {
  skip,
  timeout: 2 * ANALYSIS_TIMEOUT_MS,
}, async () => {
  const missing = path.join(folder, 'no-such-venv', 'bin', 'python');
  const extension = new FakePythonExtension(globalInterpreter(missing));
  harness.pythonExtension = extension;
  harness.config.set('serverPath', binary);
  openSample();
  await activate(extensionContext() as never);
  const [daemon] = childrenRunning(binary);
  assert.ok(daemon, `not running; shown: ${JSON.stringify(harness.shown)}`);

  await harness.commands.get('wavecast.analyzeNow')!();
  assert.equal(errors().length, 1);
  assert.match(errors()[0].message, new RegExp(`^wavecast: small_cnn.py: the Python environment ${missing} does not exist`));

  // The build's venv, named by its bin/python (a link to the system interpreter), else the system's own.
  const venv = path.join(repoRoot, 'build', 'python-env');
  const selected = fs.existsSync(path.join(venv, 'bin', 'python')) ? venvEnvironment(venv) : globalInterpreter('/usr/bin/python3');
  extension.environments.select(selected);
  await waitFor('the new interpreter', () => harness.outputLines.some((l) => l.includes(`interpreter, Python 3.11.2`) && l.includes(selected.path)));
  await harness.commands.get('wavecast.analyzeNow')!();
  assert.match(harness.shown.at(-1)!.message, /^wavecast: small_cnn.py, batch 64: H100\S* [\d.]+ (µs|ms)/, JSON.stringify(harness.shown));
  assert.deepEqual(childrenRunning(binary), [daemon], 'the same daemon');
});

const installed = installFolders(os.homedir())
  .map((dir) => path.join(dir, 'wavecast'))
  .find((file) => fs.existsSync(file));

test('without a daemon anywhere the error names the setting and the install command', {
  timeout: 10_000,
  skip: installed ? `${installed} is installed, so a daemon is found` : false,
}, async () => {
  const saved = process.env.PATH;
  process.env.PATH = folder;
  try {
    openSample();
    const context = extensionContext();
    // An installed extension's folder holds no daemon; home has none either.
    await activate({ ...context, extensionUri: Uri.file(folder) } as never);
  } finally {
    process.env.PATH = saved;
  }
  const shown = errors();
  assert.equal(shown.length, 1);
  assert.match(shown[0].message, /not found on PATH or in ~\/\.local\/bin.*cmake --install build --prefix ~\/\.local.*wavecast.serverPath/);
});
