// The controller (the only code that talks to `vscode`) against the mock.
import '../mock/register';
import { strict as assert } from 'node:assert';
import { beforeEach, test } from 'node:test';
import { RestartPolicy } from '../../src/logic/restartPolicy';
import {
  ConfigurationTarget,
  FakeSecretStorage,
  FakeTextDocument,
  FakeTextEditor,
  FakeWebviewPanel,
  harness,
  Uri,
  window,
} from '../mock/vscode';
import { FILE, openEditor, setup, statusItem, tick, URI } from './setup';

beforeEach(() => {
  harness.reset();
  process.env.PATH = '/usr/local/bin:/usr/bin';
});

test('untrusted workspace: nothing is started and the user is told why', async () => {
  harness.trusted = false;
  const { controller, clients } = setup();
  await controller.activate();
  assert.equal(clients.length, 0);
  assert.equal(controller.currentPhase, 'untrusted');
  assert.match(statusItem().text, /\$\(shield\)/);
  assert.equal(harness.shown.length, 1);
  assert.match(harness.shown[0].message, /off in this workspace because analysing a file runs it/);
  assert.deepEqual(harness.shown[0].actions, ['Manage Workspace Trust']);

  harness.answers.push({ match: 'off in this workspace', action: 'Manage Workspace Trust' });
  await harness.commands.get('wavecast.analyzeNow')!();
  assert.equal(clients.length, 0);
  assert.ok(harness.executed.some((e) => e.id === 'workbench.trust.manage'));

  harness.trusted = true;
  harness.trustGranted.fire();
  await tick();
  assert.equal(clients.length, 1);
  assert.equal(controller.currentPhase, 'running');
});

test('starts `wavecast serve` found on PATH with initialization options from the settings', async () => {
  harness.config.set('targets', ['H100-SXM', 'T4']);
  harness.config.set('batchSize', 32);
  harness.config.set('trigger', 'manual');
  const { controller, clients } = setup();
  await controller.activate();
  const client = clients[0];
  assert.deepEqual(client.spec.transport, { kind: 'stdio', command: '/usr/bin/wavecast', args: ['serve'], env: process.env });
  assert.deepEqual(client.spec.initializationOptions, {
    protocolVersion: 1,
    targets: ['H100-SXM', 'T4'],
    batchSize: 32,
    trigger: 'manual',
    pythonEnv: null,
    debounceMs: 300,
    lineCodeLens: false,
    lineDiagnostics: false,
  });
  assert.equal(client.started, true);
  assert.equal(controller.currentPhase, 'running');
  assert.equal(statusItem().text, '$(pulse) wavecast: H100-SXM, T4');
  assert.equal(statusItem().command, 'wavecast.pickGpus');
  assert.deepEqual(harness.shown, []);
});

test('a missing binary is an error that says how to fix it', async () => {
  const { controller, clients } = setup({ executable: () => false });
  await controller.activate();
  assert.equal(clients.length, 0);
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(harness.shown[0].kind, 'error');
  assert.match(harness.shown[0].message, /not found on PATH.*cmake --install build --prefix ~\/\.local.*set wavecast.serverPath/);
  assert.deepEqual(harness.shown[0].actions, ['Open Settings', 'Restart Server', 'Open Server Log']);
  assert.equal(statusItem().backgroundColor.id, 'statusBarItem.errorBackground');
  assert.ok(harness.outputLines.some((l) => l.includes('Searched: /ext/wavecast/server/bin/wavecast, /usr/local/bin/wavecast, /usr/bin/wavecast')));
});

test('a protocol version mismatch names the side to update and does not offer restarts', async () => {
  const { controller, clients } = setup({
    prepare: (client) => {
      client.experimental = { wavecast: { protocolVersion: 2, methods: [] } };
    },
  });
  await controller.activate();
  assert.equal(clients[0].stopped, true);
  assert.equal(controller.currentPhase, 'failed');
  assert.match(harness.shown[0].message, /daemon speaks version 2, this extension version 1. Update the wavecast VS Code extension/);
  assert.deepEqual(harness.shown[0].actions, ['Open Settings', 'Open Server Log']);
});

test('the daemon refusing initialize shows its message verbatim', async () => {
  const { controller } = setup({
    prepare: (client) => {
      client.startError = new Error('Initialize failed');
      client.spec.onInitializeFailed('wavecast protocol version mismatch: the daemon speaks 1, the client 3. Update the wavecast daemon.');
    },
  });
  await controller.activate();
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(harness.shown[0].message, 'wavecast protocol version mismatch: the daemon speaks 1, the client 3. Update the wavecast daemon.');
});

test('crashes restart automatically a few times, then the user is offered a restart', async () => {
  let now = 0;
  const { controller, clients } = setup({ policy: new RestartPolicy(3, 180_000, () => now) });
  await controller.activate();
  const decisions = [1, 2, 3, 4].map(() => {
    now += 1000;
    return clients[0].spec.onClosed();
  });
  assert.deepEqual(
    decisions.map((d) => d.restart),
    [true, true, true, false],
  );
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(harness.shown.filter((s) => s.kind === 'warning' && /restarting it \(attempt \d of 3\)/.test(s.message)).length, 3);
  const last = harness.shown.at(-1)!;
  assert.equal(last.kind, 'error');
  assert.match(last.message, /crashed 4 times in 3 minutes/);
  assert.deepEqual(last.actions, ['Restart Server', 'Open Server Log']);

  await harness.commands.get('wavecast.restartServer')!();
  assert.equal(clients.length, 2);
  assert.equal(controller.currentPhase, 'running');
  assert.equal(clients[1].spec.onClosed().restart, true, 'a manual restart resets the budget');
});

test('after an automatic restart the status returns to running', async () => {
  const { controller, clients } = setup();
  await controller.activate();
  const listGpusCalls = clients[0].requestsOf('wavecast/listGpus').length;
  assert.equal(clients[0].spec.onClosed().restart, true);
  assert.equal(controller.currentPhase, 'starting');
  assert.match(statusItem().text, /loading~spin/);
  clients[0].running();
  await tick();
  assert.equal(controller.currentPhase, 'running');
  assert.equal(clients[0].requestsOf('wavecast/listGpus').length, listGpusCalls + 1);
});

test('status notifications drive the status bar', async () => {
  const { controller, clients } = setup();
  await controller.activate();
  clients[0].notify('wavecast/status', { state: 'analyzing', message: 'tracing train_resnet.py', percentage: 40 });
  assert.equal(statusItem().text, '$(sync~spin) wavecast: H100-SXM, T4 40%');
  assert.match(statusItem().tooltip, /tracing train_resnet.py/);
  clients[0].notify('wavecast/status', { state: 'error', message: 'worker crashed; restarted' });
  assert.equal(statusItem().text, '$(warning) wavecast: H100-SXM, T4');
  assert.equal(statusItem().backgroundColor.id, 'statusBarItem.errorBackground');
  assert.equal(controller.currentPhase, 'running');
});

test('the GPU picker lists the daemon’s GPUs, applies and persists the choice per workspace', async () => {
  const { controller, clients } = setup();
  await controller.activate();
  let offered: any[] = [];
  harness.quickPick = (items, options) => {
    offered = items;
    assert.equal(options.canPickMany, true);
    assert.match(options.placeHolder, /now: H100-SXM, T4/);
    return items.filter((i: { id: string }) => i.id === 'A100-SXM4-40GB' || i.id === 'MI210');
  };
  await harness.commands.get('wavecast.pickGpus')!();
  assert.deepEqual(
    offered.map((i) => [i.label, i.picked]),
    [
      ['H100-SXM', true],
      ['A100-SXM4-40GB', false],
      ['T4', true],
      ['MI210', false],
    ],
  );
  assert.equal(offered[1].description, '40 GiB · 312 TFLOP/s BF16 · $1.29/h');
  assert.deepEqual(clients[0].requestsOf('wavecast/setTargets'), [{ gpus: ['A100-SXM4-40GB', 'MI210'] }]);
  assert.deepEqual(harness.configUpdates, [
    { key: 'wavecast.targets', value: ['A100-SXM4-40GB', 'MI210'], target: ConfigurationTarget.Workspace },
  ]);
  await tick();
  assert.equal(statusItem().text, '$(pulse) wavecast: A100-SXM4-40GB, MI210');
  assert.equal(clients[0].requestsOf('wavecast/setTargets').length, 1, 'the settings echo is not sent again');
  assert.equal(clients.length, 1, 'changing targets does not restart the daemon');
});

test('an empty pick keeps the selection', async () => {
  const { controller, clients } = setup();
  await controller.activate();
  harness.quickPick = () => [];
  await harness.commands.get('wavecast.pickGpus')!();
  assert.deepEqual(clients[0].requestsOf('wavecast/setTargets'), []);
  assert.match(harness.shown.at(-1)!.message, /at least one target GPU/);
});

test('Analyze now sends the active file and reports the iteration times', async () => {
  const { controller, clients } = setup();
  await controller.activate();
  openEditor();
  await harness.commands.get('wavecast.analyzeNow')!();
  assert.deepEqual(clients[0].requestsOf('wavecast/analyze'), [{ uri: URI }]);
  assert.ok(harness.executed.some((e) => e.id === 'withProgress'));
  const info = harness.shown.at(-1)!;
  assert.equal(info.message, 'wavecast: train_resnet.py, batch 192: H100-SXM 359 ms · A100-SXM4-40GB 617 ms · L4 1.47 s · T4 3.19 s per iteration.');
  assert.deepEqual(info.actions, ['Show Results']);
});

test('an analysis error is shown with the line and hint', async () => {
  const { controller } = setup({
    prepare: (client) =>
      client.handlers.set('wavecast/analyze', () => ({
        uri: URI,
        state: 'error',
        contentVersion: 2,
        prediction: null,
        error: { kind: 'ProviderError', message: 'wavecast_model() is missing.', file: FILE, line: 1, hint: 'Define wavecast_model().' },
      })),
  });
  await controller.activate();
  openEditor();
  await harness.commands.get('wavecast.analyzeNow')!();
  const shown = harness.shown.at(-1)!;
  assert.equal(shown.kind, 'error');
  assert.equal(shown.message, 'wavecast: train_resnet.py (line 1): wavecast_model() is missing. Define wavecast_model().');
});

test('Set batch size validates input and re-analyses with the new size', async () => {
  const { controller, clients } = setup();
  await controller.activate();
  openEditor();
  let validation: (text: string) => string | null = () => null;
  harness.inputBox = (options) => {
    assert.equal(options.value, '192');
    validation = options.validateInput;
    return '48';
  };
  await harness.commands.get('wavecast.setBatchSize')!();
  assert.match(validation('abc')!, /not a whole number/);
  assert.equal(validation(''), null);
  assert.equal(validation('64'), null);
  assert.deepEqual(clients[0].requestsOf('wavecast/analyze'), [{ uri: URI, batchSize: 48 }]);
  assert.deepEqual(clients[0].requestsOf('wavecast/setBatchSize'), []);

  // Empty clears the override; the code lens passes the document's URI.
  window.activeTextEditor = undefined;
  harness.inputBox = () => '';
  await harness.commands.get('wavecast.setBatchSize')!(URI);
  assert.deepEqual(clients[0].requestsOf('wavecast/setBatchSize'), [{ uri: URI, batchSize: null }]);
  assert.deepEqual(clients[0].requestsOf('wavecast/analyze')[1], { uri: URI });
});

test('Show results opens a CSP-locked webview, feeds it and follows line clicks', async () => {
  const { controller } = setup();
  await controller.activate();
  openEditor();
  await harness.commands.get('wavecast.showResults')!();
  assert.equal(harness.panels.length, 1);
  const panel = harness.panels[0];
  assert.equal(panel.title, 'wavecast: train_resnet.py');
  assert.equal(panel.options.enableScripts, true);
  assert.deepEqual(
    panel.options.localResourceRoots.map((u: Uri) => u.fsPath),
    ['/ext/wavecast/dist', '/ext/wavecast/media'],
  );
  const nonce = /script-src 'nonce-([A-Za-z0-9]+)'/.exec(panel.webview.html)![1];
  assert.match(panel.webview.html, new RegExp(`<script nonce="${nonce}" src="vscode-resource:///ext/wavecast/dist/webview.js">`));
  assert.equal(panel.webview.posted.length, 1);
  assert.equal(panel.webview.posted[0].type, 'results');
  assert.equal(panel.webview.posted[0].results.prediction.batch_size, 192);

  panel.webview.received.fire({ type: 'ready' });
  assert.equal(panel.webview.posted.length, 2, 'a reloaded webview gets the latest results again');

  panel.webview.received.fire({ type: 'reveal', file: FILE, line: 27 });
  await tick();
  await tick();
  const shown = harness.shownDocuments.at(-1)!;
  assert.equal(shown.document.uri.fsPath, FILE);
  assert.equal(shown.options.selection.start.line, 26);
  assert.equal(shown.editor.revealed[0].start.line, 26);

  panel.webview.received.fire({ type: 'runCommand', command: 'workbench.action.terminal.new' });
  assert.equal(harness.shownDocuments.length, 1, 'unknown webview messages are ignored');
});

test('results change notifications refresh the open panel', async () => {
  const { controller, clients } = setup();
  await controller.activate();
  openEditor();
  await harness.commands.get('wavecast.showResults')!();
  const before = clients[0].requestsOf('wavecast/results').length;
  clients[0].notify('wavecast/resultsChanged', { uri: URI, state: 'ready', summaries: [] });
  await tick();
  await tick();
  assert.equal(clients[0].requestsOf('wavecast/results').length, before + 1);
  assert.equal(harness.panels[0].webview.posted.length, 2);
  clients[0].notify('wavecast/resultsChanged', { uri: 'file:///other.py', state: 'ready', summaries: [] });
  await tick();
  assert.equal(clients[0].requestsOf('wavecast/results').length, before + 1, 'other files are not fetched');
});

test('decorations mode draws per-line times at the end of predicted lines', async () => {
  harness.config.set('display', 'decorations');
  const editor = openEditor(50);
  const { controller, clients } = setup();
  await controller.activate();
  await tick();
  assert.equal(clients[0].spec.inlayHintsEnabled(), false);
  const options = [...editor.decorations.values()][0];
  assert.equal(options.length, 10);
  const line27 = options.find((o: any) => o.range.start.line === 26);
  assert.equal(line27.range.start.character, 'line 27'.length);
  assert.equal(line27.renderOptions.after.contentText, 'H100-SXM 124 ms · A100-SXM4-40GB 214 ms · L4 509 ms · T4 1.11 s (35%)');
  assert.match(line27.hoverMessage.value, /\| H100-SXM \| 41.4 ms \| 82.8 ms \|/);

  harness.changeSettings({ display: 'inlayHints' });
  await tick();
  await tick();
  assert.equal(clients[0].spec.inlayHintsEnabled(), true);
  assert.deepEqual([...editor.decorations.values()][0], []);
  assert.equal(clients[0].inlayRefreshes, 1);
  assert.equal(clients.length, 1);
});

test('analysis settings go to the running daemon; a new server path restarts it', async () => {
  const { controller, clients } = setup({ executable: (f) => f === '/usr/bin/wavecast' || f === '/opt/wavecast' });
  await controller.activate();
  harness.changeSettings({ trigger: 'manual', batchSize: 16 });
  await tick();
  assert.equal(clients.length, 1, 'the language client forwards these through didChangeConfiguration');

  harness.changeSettings({ serverPath: '/opt/wavecast', batchSize: -4 });
  await tick();
  await tick();
  assert.equal(clients.length, 2);
  assert.equal(clients[0].stopped, true);
  assert.deepEqual(clients[1].spec.transport, { kind: 'stdio', command: '/opt/wavecast', args: ['serve'], env: process.env });
  assert.equal(clients[1].spec.initializationOptions.trigger, 'manual');
  assert.equal(clients[1].spec.initializationOptions.batchSize, null);
  assert.match(harness.shown.at(-1)!.message, /wavecast.batchSize/);
  assert.equal(controller.currentPhase, 'running');
});

function secretsWith(token: string): FakeSecretStorage {
  const secrets = new FakeSecretStorage();
  secrets.values.set('wavecast.remoteToken', token);
  return secrets;
}

test('a refused token points at the Set Remote Token command', async () => {
  harness.config.set('remoteAddress', '127.0.0.1:7325');
  const { controller, clients } = setup({
    secrets: secretsWith('wrong'),
    prepare: (client) => {
      client.startError = new Error('Initialize failed');
      client.spec.onInitializeFailed("authentication failed: initializationOptions.token must be the daemon's token (see --token-file)");
    },
  });
  await controller.activate();
  assert.equal(clients[0].spec.initializationOptions.token, 'wrong');
  assert.equal(controller.currentPhase, 'failed');
  assert.match(harness.shown[0].message, /refused the connection: authentication failed.*"wavecast: Set Remote Token"/);
});

test('a remote address connects over TCP instead of spawning', async () => {
  harness.config.set('remoteAddress', '127.0.0.1:7325');
  const { controller, clients } = setup({ executable: () => false, secrets: secretsWith('tok') });
  await controller.activate();
  assert.equal(clients[0].spec.transport.kind, 'tcp');
  assert.equal(controller.currentPhase, 'running');
});

test('commands while the daemon is down offer a restart instead of failing silently', async () => {
  const { controller } = setup({ executable: () => false });
  await controller.activate();
  openEditor();
  await harness.commands.get('wavecast.showResults')!();
  assert.match(harness.shown.at(-1)!.message, /daemon is not running/);
  assert.deepEqual(harness.shown.at(-1)!.actions, ['Restart Server', 'Open Server Log']);
  await harness.commands.get('wavecast.openServerLog')!();
  assert.ok(harness.executed.some((e) => e.id === 'output.show'));
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('Analyze now in the results panel: a failed request is shown with what failed and what to do', async () => {
  const { controller, clients } = setup();
  await controller.activate();
  openEditor();
  await harness.commands.get('wavecast.showResults')!();
  clients[0].handlers.set('wavecast/analyze', () => {
    throw new Error('Request wavecast/analyze failed with message: worker died');
  });
  harness.panels[0].webview.received.fire({ type: 'analyze' });
  await tick();
  await tick();
  const shown = harness.shown.at(-1)!;
  assert.equal(shown.kind, 'error');
  assert.match(shown.message, /^wavecast: analysing train_resnet.py failed: Request wavecast\/analyze failed with message: worker died\./);
  assert.match(shown.message, /Open the server log for details; restart the server if it keeps failing/);
  assert.deepEqual(shown.actions, ['Open Server Log', 'Restart Server']);
  assert.ok(harness.outputLines.some((l) => l.includes('analysing train_resnet.py failed')));
});

test('the panel’s buttons while the daemon is down say so instead of doing nothing', async () => {
  const { controller } = setup();
  await controller.activate();
  openEditor();
  await harness.commands.get('wavecast.showResults')!();
  await (controller as any).stopClient();
  harness.panels[0].webview.received.fire({ type: 'analyze' });
  await tick();
  assert.match(harness.shown.at(-1)!.message, /The wavecast daemon is not running. Restart it/);
  assert.deepEqual(harness.shown.at(-1)!.actions, ['Restart Server', 'Open Server Log']);
});

test('Pick GPUs after a failed restart shows the start error and offers a restart', async () => {
  let failNext = false;
  const { controller, clients } = setup({
    prepare: (client) => {
      if (failNext) client.startError = new Error('spawn /usr/bin/wavecast EACCES');
    },
  });
  await controller.activate();
  openEditor();
  await harness.commands.get('wavecast.showResults')!();
  failNext = true;
  await harness.commands.get('wavecast.restartServer')!();
  assert.equal(controller.currentPhase, 'failed');
  assert.match(statusItem().tooltip, /did not start: spawn \/usr\/bin\/wavecast EACCES/);
  failNext = false;

  // From the panel's button (this threw a TypeError on a null API) …
  harness.panels[0].webview.received.fire({ type: 'pickGpus' });
  await tick();
  let shown = harness.shown.at(-1)!;
  assert.equal(shown.kind, 'error');
  assert.equal(shown.message, 'The wavecast daemon is not running: The wavecast daemon did not start: spawn /usr/bin/wavecast EACCES');
  assert.deepEqual(shown.actions, ['Restart Server', 'Open Server Log']);

  // … and from the status bar; choosing Restart Server brings it back.
  harness.answers.push({ match: 'is not running', action: 'Restart Server' });
  await harness.commands.get('wavecast.pickGpus')!();
  shown = harness.shown.at(-1)!;
  assert.match(shown.message, /is not running: The wavecast daemon did not start/);
  assert.equal(clients.length, 3);
  assert.equal(controller.currentPhase, 'running');
});

test('a daemon that never answers initialize fails after wavecast.initializeTimeout with the log and restart offered', { timeout: 10_000 }, async () => {
  harness.config.set('initializeTimeout', 1);
  const { controller, clients } = setup({
    prepare: (client) => {
      client.startHook = () => new Promise<void>(() => undefined);
    },
  });
  const started = Date.now();
  await controller.activate();
  assert.ok(Date.now() - started >= 900);
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(clients[0].stopped, true, 'the silent daemon is stopped');
  assert.equal(harness.shown.length, 1);
  assert.equal(harness.shown[0].kind, 'error');
  assert.match(harness.shown[0].message, /did not answer initialize within 1 s and was stopped/);
  assert.deepEqual(harness.shown[0].actions, ['Open Settings', 'Restart Server', 'Open Server Log']);
  assert.match(statusItem().text, /\$\(error\)/);
  assert.match(statusItem().tooltip, /did not answer initialize within 1 s/);
  // A close the stopped client reports afterwards is not a crash.
  assert.equal(clients[0].spec.onClosed().restart, false);
  assert.equal(harness.shown.length, 1);
});

test('a crash during the first start is one failed start: not restarted as well', async () => {
  const { controller, clients } = setup({
    prepare: (client) => {
      client.startHook = async () => {
        const decision = client.spec.onClosed();
        assert.equal(decision.restart, false, 'the client must not restart it');
        throw new Error('Connection got disposed.');
      };
    },
  });
  await controller.activate();
  assert.equal(clients.length, 1);
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(clients[0].stopped, true);
  assert.equal(harness.shown.length, 1, `one outcome, got ${JSON.stringify(harness.shown)}`);
  assert.equal(harness.shown[0].kind, 'error');
  assert.match(harness.shown[0].message, /did not start: it exited while starting \(Connection got disposed.\)/);
  assert.ok(!harness.shown.some((s) => /restarting it/.test(s.message)));
});

test('a crash during the first start fails it even if start() resolved', async () => {
  const { controller, clients } = setup({
    prepare: (client) => {
      client.startHook = async () => {
        client.spec.onClosed();
      };
    },
  });
  await controller.activate();
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(clients[0].stopped, true);
  assert.equal(harness.shown.length, 1);
  assert.match(harness.shown[0].message, /did not start: it exited while starting/);
});

test('an automatic restart that never comes back fails after the initialize time-out', { timeout: 10_000 }, async () => {
  harness.config.set('initializeTimeout', 1);
  const { controller, clients } = setup();
  await controller.activate();
  assert.equal(clients[0].spec.onClosed().restart, true);
  assert.equal(controller.currentPhase, 'starting');
  await sleep(1200);
  assert.equal(controller.currentPhase, 'failed');
  assert.equal(clients[0].stopped, true);
  const last = harness.shown.at(-1)!;
  assert.match(last.message, /did not answer initialize within 1 s/);
  assert.deepEqual(last.actions, ['Open Settings', 'Restart Server', 'Open Server Log']);
});

test('an automatic restart that comes back in time stays running', { timeout: 10_000 }, async () => {
  harness.config.set('initializeTimeout', 1);
  const { controller, clients } = setup();
  await controller.activate();
  clients[0].spec.onClosed();
  clients[0].running();
  await sleep(1200);
  assert.equal(controller.currentPhase, 'running');
  assert.equal(harness.shown.filter((s) => s.kind === 'error').length, 0);
});

test('a token in settings.json moves to the secret storage once, and the user is told to remove it', async () => {
  harness.config.set('remoteAddress', '127.0.0.1:7325');
  harness.config.set('remoteToken', 'legacy');
  const first = setup();
  await first.controller.activate();
  assert.equal(first.clients[0].spec.initializationOptions.token, 'legacy');
  assert.equal(first.context.secrets.values.get('wavecast.remoteToken'), 'legacy');
  assert.equal(first.context.globalState.get('wavecast.remoteTokenMigrated'), true);
  const notice = harness.shown.find((s) => /moved the remote token/.test(s.message))!;
  assert.equal(notice.kind, 'information');
  assert.match(notice.message, /Remove "wavecast.remoteToken" from your settings.json/);
  assert.deepEqual(notice.actions, ['Open Settings']);
  await first.controller.shutdown();

  // Cleared on purpose afterwards: the old settings value does not come back.
  harness.shown = [];
  await first.context.secrets.delete('wavecast.remoteToken');
  const second = setup({ secrets: first.context.secrets, globalState: first.context.globalState });
  await second.controller.activate();
  assert.equal(second.clients.length, 0);
  assert.equal(second.controller.currentPhase, 'failed');
  assert.equal(harness.shown.length, 1);
  assert.match(harness.shown[0].message, /no token is stored: run "wavecast: Set Remote Token"/);
  assert.ok(harness.outputLines.some((l) => /wavecast.remoteToken in the settings is ignored/.test(l)));
});

test('Set Remote Token stores a password-style input and reconnects; Clear Remote Token forgets it', async () => {
  harness.config.set('remoteAddress', '127.0.0.1:7325');
  const { controller, clients, context } = setup({ secrets: secretsWith('old') });
  await controller.activate();
  assert.equal(clients[0].spec.initializationOptions.token, 'old');
  harness.inputBox = (options) => {
    assert.equal(options.password, true);
    return ' new-token ';
  };
  await harness.commands.get('wavecast.setRemoteToken')!();
  await tick();
  await tick();
  assert.equal(context.secrets.values.get('wavecast.remoteToken'), 'new-token');
  assert.equal(clients.length, 2);
  assert.equal(clients[0].stopped, true);
  assert.equal(clients[1].spec.initializationOptions.token, 'new-token');
  assert.equal(controller.currentPhase, 'running');

  await harness.commands.get('wavecast.clearRemoteToken')!();
  await tick();
  await tick();
  assert.equal(context.secrets.values.has('wavecast.remoteToken'), false);
  assert.equal(clients.length, 2);
  assert.equal(controller.currentPhase, 'failed');
  assert.match(harness.shown.at(-1)!.message, /no token is stored/);
});

test('TF32, the analysis time-out and the GPU file go on the daemon’s command line; changing one restarts it', async () => {
  harness.config.set('tf32Matmul', 'on');
  harness.config.set('tf32Conv', 'off');
  harness.config.set('analysisTimeout', 300);
  harness.config.set('gpuFile', 'gpus/lab.json');
  const { controller, clients } = setup();
  await controller.activate();
  assert.deepEqual(clients[0].spec.transport, {
    kind: 'stdio',
    command: '/usr/bin/wavecast',
    args: ['serve', '--tf32-matmul', 'on', '--tf32-conv', 'off', '--timeout', '300', '--gpu-file', '/home/ada/projects/resnet/gpus/lab.json'],
    env: process.env,
  });

  harness.changeSettings({ debounceMs: 1000, lineCodeLens: true });
  await tick();
  assert.equal(clients.length, 1, 'debounce and code lenses reach the running daemon as settings');

  harness.changeSettings({ tf32Matmul: 'script' });
  await tick();
  await tick();
  assert.equal(clients.length, 2);
  assert.equal(clients[0].stopped, true);
  const restarted = clients[1].spec;
  assert.deepEqual(restarted.transport.kind === 'stdio' && restarted.transport.args.slice(0, 3), ['serve', '--tf32-conv', 'off']);
  assert.equal(restarted.initializationOptions.debounceMs, 1000);
  assert.equal(restarted.initializationOptions.lineCodeLens, true);
  assert.equal(controller.currentPhase, 'running');
});

test('a daemon that exits while starting is reported once, with its last words', async () => {
  const { controller } = setup({
    prepare: (client) => {
      client.exitLine = "wavecast: error: GPU file '/nope.json' does not exist";
      client.startHook = async () => {
        client.spec.onClosed();
        throw new Error('Connection got disposed.');
      };
    },
  });
  await controller.activate();
  assert.equal(harness.shown.length, 1);
  assert.equal(harness.shown[0].message, "The wavecast daemon did not start: it exited while starting: wavecast: error: GPU file '/nope.json' does not exist");
});

test('the status bar item shows only while a Python editor is active', async () => {
  const { controller } = setup();
  await controller.activate();
  assert.equal(statusItem().visible, false, 'no editor');
  const python = openEditor();
  assert.equal(statusItem().visible, true);
  assert.equal(statusItem().name, 'wavecast');
  assert.match(statusItem().text, /wavecast: H100-SXM, T4/);
  harness.activate(new FakeTextEditor(new FakeTextDocument(Uri.file('/home/ada/notes.md'), ['# notes'], 'markdown')));
  assert.equal(statusItem().visible, false);
  harness.activate(python);
  assert.equal(statusItem().visible, true);
  harness.activate(undefined);
  assert.equal(statusItem().visible, false);
});

test('the results panel is restored after a reload and refilled once the daemon runs', async () => {
  const { controller, clients } = setup();
  const serializer = () => harness.serializers.get('wavecast.results')!;
  const restorePromise = controller.activate();
  // VS Code may restore the panel before the daemon is up.
  const restored = new FakeWebviewPanel('wavecast.results', 'old title', {});
  await serializer().deserializeWebviewPanel(restored, { results: { uri: URI, state: 'ready' } });
  await restorePromise;
  await tick();
  assert.equal(restored.title, 'wavecast: train_resnet.py');
  assert.match(restored.webview.html, /dist\/webview.js/);
  assert.deepEqual(clients[0].requestsOf('wavecast/results'), [{ uri: URI }]);
  assert.equal(restored.webview.posted.length, 1);
  assert.equal(restored.webview.posted[0].results.prediction.batch_size, 192);

  // The restored panel is the panel: result changes and its buttons work.
  clients[0].notify('wavecast/resultsChanged', { uri: URI, state: 'ready', summaries: [] });
  await tick();
  await tick();
  assert.equal(restored.webview.posted.length, 2);
  restored.webview.received.fire({ type: 'analyze' });
  await tick();
  assert.deepEqual(clients[0].requestsOf('wavecast/analyze'), [{ uri: URI }]);

  const unknown = new FakeWebviewPanel('wavecast.results', 'x', {});
  let disposed = false;
  unknown.onDidDispose(() => (disposed = true));
  await serializer().deserializeWebviewPanel(unknown, undefined);
  assert.equal(disposed, true, 'a panel without saved results is closed');
});

test('a restored panel keeps its saved view while the fresh daemon knows nothing of the file', async () => {
  const { controller, clients } = setup({
    prepare: (client) =>
      client.handlers.set('wavecast/results', () => ({ uri: URI, state: 'none', contentVersion: null, prediction: null, error: null })),
  });
  await controller.activate();
  const restored = new FakeWebviewPanel('wavecast.results', 'old', {});
  await harness.serializers.get('wavecast.results')!.deserializeWebviewPanel(restored, { results: { uri: URI } });
  assert.deepEqual(clients[0].requestsOf('wavecast/results'), [{ uri: URI }]);
  assert.deepEqual(restored.webview.posted, []);
});
