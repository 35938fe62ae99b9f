// The controller's commands and results display against the mock: the status
// bar, the GPU picker, Analyze Now and Set Batch Size, and the results
// webview (including after a reload). Decorations mode: decorations.test.ts.
import '../mock/register';
import { strict as assert } from 'node:assert';
import { beforeEach, test } from 'node:test';
import { ConfigurationTarget, FakeTextDocument, FakeTextEditor, FakeWebviewPanel, harness, Uri, window } from '../mock/vscode';
import { loadTracedResults } from '../fixtures';
import { FILE, openEditor, resetHarness, setup, statusItem, tick, URI } from './setup';

beforeEach(resetHarness);

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
      ['Multi-GPU targets', undefined],
      // DDP, FSDP and FSDP recomputing activations over the node of each GPU targeted now.
      ['8× H100-SXM, DDP', false],
      ['8× H100-SXM, FSDP', false],
      ['8× H100-SXM, FSDP, recompute', false],
      ['8× T4, DDP', false],
      ['8× T4, FSDP', false],
      ['8× T4, FSDP, recompute', false],
      // torch.compile's modes, from wavecast.compile's declaration.
      ['What if compiled', undefined],
      ['torch.compile', false],
      ['torch.compile, reduce-overhead', false],
      ['torch.compile, max-autotune', false],
      ['torch.compile, max-autotune-no-cudagraphs', false],
    ],
  );
  assert.equal(offered[1].description, '40 GiB · 312 TFLOP/s BF16 · $1.29/h');
  assert.deepEqual(clients[0].requestsOf('wavecast/setTargets'), [{ gpus: ['A100-SXM4-40GB', 'MI210'] }]);
  assert.deepEqual(harness.configUpdates, [
    { key: 'wavecast.targets', value: ['A100-SXM4-40GB', 'MI210'], target: ConfigurationTarget.Workspace },
    { key: 'wavecast.parallelTargets', value: [], target: ConfigurationTarget.Workspace },
  ]);
  await tick();
  assert.equal(statusItem().text, '$(pulse) wavecast: A100-SXM4-40GB, MI210');
  assert.equal(clients[0].requestsOf('wavecast/setTargets').length, 1, 'the settings echo is not sent again');
  assert.equal(clients.length, 1, 'changing targets does not restart the daemon');
});

test('multi-GPU targets picked beside the GPUs are persisted and reach the daemon', async () => {
  const { controller, clients } = setup();
  await controller.activate();
  harness.quickPick = (items) => items.filter((i: { label: string }) => i.label === 'H100-SXM' || i.label === '8× H100-SXM, FSDP');
  await harness.commands.get('wavecast.pickGpus')!();
  assert.deepEqual(clients[0].requestsOf('wavecast/setTargets'), [{ gpus: ['H100-SXM'] }]);
  assert.deepEqual(harness.configUpdates.at(-1), {
    key: 'wavecast.parallelTargets',
    value: ['8x H100-SXM, FSDP'],
    target: ConfigurationTarget.Workspace,
  });
  // Offered again, the picked target is ticked and listed once.
  let offered: any[] = [];
  harness.quickPick = (items) => {
    offered = items;
    return undefined;
  };
  await harness.commands.get('wavecast.pickGpus')!();
  const targets = offered.filter((i) => i.parallelTarget !== undefined);
  assert.deepEqual(targets.filter((i) => i.picked).map((i) => i.label), ['8× H100-SXM, FSDP']);
  assert.equal(targets.filter((i) => i.label === '8× H100-SXM, FSDP').length, 1);
});

test('a torch.compile mode picked beside the GPUs is persisted; two at once keep the setting', async () => {
  const { controller } = setup();
  await controller.activate();
  harness.quickPick = (items) => items.filter((i: { label: string }) => i.label === 'H100-SXM' || i.label === 'torch.compile, max-autotune');
  await harness.commands.get('wavecast.pickGpus')!();
  assert.deepEqual(harness.configUpdates.at(-1), { key: 'wavecast.compile', value: 'max-autotune', target: ConfigurationTarget.Workspace });
  await tick();
  assert.equal(statusItem().text, '$(pulse) wavecast: H100-SXM · torch.compile, max-autotune');
  let offered: any[] = [];
  harness.quickPick = (items) => {
    offered = items;
    return items.filter((i: { label: string }) => i.label === 'H100-SXM' || i.label.startsWith('torch.compile'));
  };
  const updates = harness.configUpdates.length;
  await harness.commands.get('wavecast.pickGpus')!();
  assert.deepEqual(offered.filter((i) => i.compileMode !== undefined && i.picked).map((i) => i.label), ['torch.compile, max-autotune']);
  assert.match(harness.shown.at(-1)!.message, /one torch.compile mode at a time; keeping torch.compile, max-autotune/);
  assert.ok(!harness.configUpdates.slice(updates).some((u) => u.key === 'wavecast.compile'));
  // None picked: back to each script as written.
  harness.quickPick = (items) => items.filter((i: { label: string }) => i.label === 'H100-SXM');
  await harness.commands.get('wavecast.pickGpus')!();
  assert.deepEqual(harness.configUpdates.at(-1), { key: 'wavecast.compile', value: 'script', target: ConfigurationTarget.Workspace });
  await tick();
  assert.equal(statusItem().text, '$(pulse) wavecast: H100-SXM');
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
        content_version: 2,
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
  assert.deepEqual(clients[0].requestsOf('wavecast/analyze'), [{ uri: URI, batch_size: 48 }]);
  assert.deepEqual(clients[0].requestsOf('wavecast/setBatchSize'), []);

  // Empty clears the override; the code lens passes the document's URI.
  window.activeTextEditor = undefined;
  harness.inputBox = () => '';
  await harness.commands.get('wavecast.setBatchSize')!(URI);
  assert.deepEqual(clients[0].requestsOf('wavecast/setBatchSize'), [{ uri: URI, batch_size: null }]);
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

test('the status bar tooltip names the torch that traced the active file, fetching its results once', async () => {
  const { controller, clients } = setup({ prepare: (client) => client.handlers.set('wavecast/results', () => ({ ...loadTracedResults(), uri: URI })) });
  await controller.activate();
  openEditor();
  await harness.commands.get('wavecast.showResults')!();
  const fetched = clients[0].requestsOf('wavecast/results').length;
  assert.doesNotMatch(statusItem().tooltip, /traced with/);

  clients[0].notify('wavecast/resultsChanged', { uri: URI, state: 'ready', summaries: [] });
  await tick();
  await tick();
  assert.equal(statusItem().tooltip, 'wavecast: idle\n\ntraced with torch 2.11.0+cu130\n\nClick to pick target GPUs.');
  assert.equal(clients[0].requestsOf('wavecast/results').length, fetched + 1, 'one fetch serves the panel and the status bar');
  assert.equal(harness.panels[0].webview.posted.at(-1).results.prediction.torch_version, '2.11.0+cu130');

  // Another file's analysis, not shown anywhere, is not fetched.
  clients[0].notify('wavecast/resultsChanged', { uri: 'file:///home/ada/other.py', state: 'ready', summaries: [] });
  await tick();
  assert.equal(clients[0].requestsOf('wavecast/results').length, fetched + 1);
});

test('Analyze now names what traced in the status bar tooltip', async () => {
  const { controller } = setup({ prepare: (client) => client.handlers.set('wavecast/analyze', () => ({ ...loadTracedResults(), uri: URI })) });
  await controller.activate();
  openEditor();
  await harness.commands.get('wavecast.analyzeNow')!();
  assert.match(statusItem().tooltip, /\n\ntraced with torch 2\.11\.0\+cu130\n\n/);
});

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
  assert.deepEqual(clients[0].requestsOf('wavecast/results'), [{ uri: URI, ops: false }], 'lines and summaries, not the per-op detail');
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
      client.handlers.set('wavecast/results', () => ({ uri: URI, state: 'none', content_version: null, prediction: null, error: null })),
  });
  await controller.activate();
  const restored = new FakeWebviewPanel('wavecast.results', 'old', {});
  await harness.serializers.get('wavecast.results')!.deserializeWebviewPanel(restored, { results: { uri: URI } });
  assert.deepEqual(clients[0].requestsOf('wavecast/results'), [{ uri: URI, ops: false }], 'lines and summaries, not the per-op detail');
  assert.deepEqual(restored.webview.posted, []);
});
