// The extension's protocol code (initialization options, capability check,
// WavecastApi, picker and chart builders) against the real daemon over
// stdio, through the real vscode-languageserver-protocol connection.
import { strict as assert } from 'node:assert';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import {
  CodeLensRequest,
  createMessageConnection,
  HoverRequest,
  InitializeRequest,
  InlayHintRequest,
  StreamMessageReader,
  StreamMessageWriter,
  type InitializeResult,
  type MarkupContent,
  type MessageConnection,
} from 'vscode-languageserver-protocol/node';
import { WavecastApi } from '../../src/logic/api';
import { buildChartModel } from '../../src/logic/chartData';
import { checkServerCapability } from '../../src/logic/errors';
import { connectRemote, isAuthenticationError } from '../../src/logic/remote';
import { buildGpuPickItems } from '../../src/logic/picker';
import type { ResultsChangedParams, StatusParams } from '../../src/logic/protocol';
import { initializationOptions, readSettings } from '../../src/logic/settings';

const repoRoot = path.join(__dirname, '..', '..', '..', '..');
const binary = process.env.WAVECAST_BINARY ?? path.join(repoRoot, 'build', 'bin', 'wavecast');
const sample = path.join(repoRoot, 'samples', 'small_cnn.py');
const skip = !fs.existsSync(binary)
  ? `wavecast binary not found at ${binary}: build it (ninja -C build wavecast wavecast-worker) or set WAVECAST_BINARY`
  : !fs.existsSync(sample)
    ? `sample ${sample} not found`
    : false;
const ANALYSIS_TIMEOUT_MS = 120_000;

interface Session {
  process: ChildProcess;
  ownsProcess: boolean;
  output: NodeJS.WritableStream;
  /** Rejects, saying how and with what stderr, when the daemon exits. */
  exited: Promise<never>;
  connection: MessageConnection;
  stderr: string[];
  progress: unknown[];
  statuses: StatusParams[];
  changes: ResultsChangedParams[];
}

const sessions: Session[] = [];
const tcpDaemons: ChildProcess[] = [];

function startDaemon(): Session {
  const child = spawn(binary, ['serve'], { stdio: ['pipe', 'pipe', 'pipe'] });
  return attach(child, child.stdout!, child.stdin!, true);
}

/** Runs `wavecast serve --listen 127.0.0.1:0 --token …` and waits for its port. */
async function startTcpDaemon(token: string): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(binary, ['serve', '--listen', '127.0.0.1:0', '--token', token], { stdio: ['ignore', 'ignore', 'pipe'] });
  tcpDaemons.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    let text = '';
    child.stderr!.on('data', (chunk) => {
      text += String(chunk);
      const match = /listening on 127\.0\.0\.1:(\d+)/.exec(text);
      if (match) resolve(Number(match[1]));
    });
    child.once('exit', (code) => reject(new Error(`serve --listen exited with ${code}: ${text}`)));
  });
  return { child, port };
}

/** `ownsProcess`: a stdio session shuts its daemon down; a TCP one only hangs up. */
function attach(child: ChildProcess, input: NodeJS.ReadableStream, output: NodeJS.WritableStream, ownsProcess: boolean): Session {
  const connection = createMessageConnection(new StreamMessageReader(input), new StreamMessageWriter(output));
  const stderr: string[] = [];
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code, signal) =>
      reject(new Error(`\`${binary} serve\` exited (${signal ?? `code ${code}`}); stderr:\n${stderr.join('')}`)),
    ),
  );
  exited.catch(() => undefined); // observed through guard()
  const session: Session = { process: child, ownsProcess, output, exited, connection, stderr, progress: [], statuses: [], changes: [] };
  child.stderr?.on('data', (chunk) => stderr.push(String(chunk)));
  connection.onRequest('window/workDoneProgress/create', () => null);
  connection.onNotification('$/progress', (params) => session.progress.push(params));
  connection.onNotification('window/logMessage', () => undefined);
  connection.onNotification('textDocument/publishDiagnostics', () => undefined);
  connection.listen();
  sessions.push(session);
  return session;
}

function initialize(
  session: Session,
  protocolVersion?: number,
  settings: Record<string, unknown> = {},
  token: string | null = null,
): Promise<InitializeResult> {
  const options = initializationOptions(readSettings({ trigger: 'manual', ...settings }).settings, token);
  return guard(session, session.connection.sendRequest(InitializeRequest.type, {
    processId: process.pid,
    rootUri: null,
    workspaceFolders: null,
    capabilities: {
      textDocument: { inlayHint: {}, hover: { contentFormat: ['markdown', 'plaintext'] }, codeLens: {} },
      window: { workDoneProgress: true },
    },
    initializationOptions: protocolVersion === undefined ? options : { ...options, protocol_version: protocolVersion },
  }));
}

/** A request's answer, or the reason the daemon died while it was pending. */
function guard<T>(session: Session, request: Promise<T>): Promise<T> {
  return Promise.race([request, session.exited]);
}

function running(session: Session): boolean {
  return session.process.exitCode === null && session.process.signalCode === null;
}

async function stopDaemon(session: Session): Promise<void> {
  if (!session.ownsProcess) {
    session.connection.dispose();
    (session.output as NodeJS.WritableStream & { destroy(): void }).destroy();
    return;
  }
  if (running(session)) {
    try {
      await Promise.race([session.connection.sendRequest('shutdown'), new Promise((resolve) => setTimeout(resolve, 2000))]);
      await session.connection.sendNotification('exit');
    } catch {
      // It went away meanwhile; killed below.
    }
  }
  session.connection.dispose();
  if (running(session)) session.process.kill('SIGKILL');
}

let session: Session;
let api: WavecastApi;
let workDir: string;
let sampleUri: string;

before(async () => {
  if (skip) return;
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wavecast-ext-'));
  const copy = path.join(workDir, 'small_cnn.py');
  fs.copyFileSync(sample, copy);
  sampleUri = pathToFileURL(copy).href;
  session = startDaemon();
  api = new WavecastApi(session.connection);
  api.onStatus((status) => session.statuses.push(status));
  api.onResultsChanged((change) => session.changes.push(change));
});

after(async () => {
  await Promise.all(sessions.map(stopDaemon));
  for (const child of tcpDaemons) child.kill('SIGKILL');
  if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
});

test('initialize: the daemon advertises the wavecast methods this client needs', { skip }, async () => {
  const result = await initialize(session);
  const check = checkServerCapability(result.capabilities.experimental);
  assert.equal(check.ok, true, check.message);
  assert.ok(result.capabilities.inlayHintProvider);
  assert.ok(result.capabilities.hoverProvider);
  assert.ok(result.capabilities.codeLensProvider);
  session.connection.sendNotification('initialized', {});
});

test('listGpus feeds the picker; setTargets changes the targets', { skip }, async () => {
  const list = await guard(session, api.listGpus());
  assert.ok(list.gpus.length >= 2, `expected several GPUs, got ${list.gpus.length}`);
  assert.ok(list.targets.length >= 1);
  for (const gpu of list.gpus) {
    assert.ok(gpu.id && gpu.name, JSON.stringify(gpu));
    assert.ok(gpu.memory_gib > 0 && gpu.sms > 0 && gpu.peak_tflops.fp32 > 0, JSON.stringify(gpu));
  }
  const items = buildGpuPickItems(list);
  assert.equal(items.length, list.gpus.length);
  assert.deepEqual(
    items.filter((i) => i.picked).map((i) => i.id),
    list.gpus.filter((g) => list.targets.includes(g.id)).map((g) => g.id),
  );
  assert.match(items[0].description, / GiB · .*TFLOP\/s/);

  const wanted = list.gpus.slice(0, 2).map((g) => g.id);
  assert.deepEqual(await api.setTargets(wanted), wanted);
  assert.deepEqual((await api.listGpus()).targets, wanted);
  await assert.rejects(api.setTargets(['NoSuchGPU-9000']), /NoSuchGPU-9000/);
});

test('analyze returns a per-line prediction for the sample that charts and hints can use', { skip, timeout: ANALYSIS_TIMEOUT_MS }, async () => {
  const text = fs.readFileSync(path.join(workDir, 'small_cnn.py'), 'utf8');
  session.connection.sendNotification('textDocument/didOpen', { textDocument: { uri: sampleUri, languageId: 'python', version: 1, text } });
  const results = await guard(session, api.analyze(sampleUri, 8));
  assert.equal(results.state, 'ready', JSON.stringify(results.error));
  const prediction = results.prediction!;
  assert.equal(prediction.batch_size, 8);
  assert.equal(prediction.summaries.length, 2);
  for (const summary of prediction.summaries) {
    assert.ok(summary.iteration_ms > 0 && summary.samples_per_second > 0, JSON.stringify(summary));
    assert.ok(summary.memory.peak_bytes > 0 && summary.memory_capacity_bytes > summary.memory.peak_bytes);
    // The host model: the iteration is wall time, the GPU busy for part of it. Each time is
    // written to the nanosecond, so a sum of three may be off by 1.5 ns.
    const ns = 1e-6;
    assert.ok(summary.gpu_ms! > 0 && summary.host_ms! > 0 && summary.gpu_ms! <= summary.iteration_ms + ns, JSON.stringify(summary));
    assert.ok(Math.abs(summary.iteration_ms - summary.gpu_ms! - summary.gpu_idle_ms!) <= 1.5 * ns + 1e-12, JSON.stringify(summary));
    assert.equal(summary.host_bound, summary.gpu_idle_ms! > summary.iteration_ms / 2);
  }
  // The conv1 line of forward() (line 22 of the sample) carries ops.
  const forwardLine = text.split('\n').findIndex((l) => l.includes('self.conv1(x)')) + 1;
  const line = prediction.lines.find((l) => l.line === forwardLine);
  assert.ok(line, `no prediction for line ${forwardLine}: ${prediction.lines.map((l) => l.line)}`);
  assert.ok(line.ops.includes('conv2d') || line.ops.some((op) => op.includes('conv')), line.ops.join(','));

  const model = buildChartModel(results);
  assert.equal(model.charts[0].bars.length, 2);
  assert.ok(model.charts[0].bars.every((bar) => bar.detail?.startsWith('GPU busy ')));
  assert.deepEqual(
    model.charts[0].bars.map((bar) => bar.hostBound !== null),
    prediction.summaries.map((summary) => summary.host_bound),
  );
  assert.ok(model.rows.length >= 5);

  const hints = await session.connection.sendRequest(InlayHintRequest.type, {
    textDocument: { uri: sampleUri },
    range: { start: { line: 0, character: 0 }, end: { line: text.split('\n').length, character: 0 } },
  });
  assert.ok(hints && hints.some((h) => h.position.line === forwardLine - 1), 'an inlay hint on the conv1 line');
  const hover = await session.connection.sendRequest(HoverRequest.type, {
    textDocument: { uri: sampleUri },
    position: { line: forwardLine - 1, character: 8 },
  });
  assert.ok(hover, 'hover on a predicted line');
  // What decorations mode draws: one label per predicted line, at its end, read as docs/presentation.md says.
  assert.deepEqual(
    hints.map((h) => h.position.line + 1).sort((a, b) => a - b),
    prediction.lines.filter((l) => l.file === line.file && l.line >= 1).map((l) => l.line).sort((a, b) => a - b),
  );
  const lines = text.split('\n');
  for (const hint of hints) {
    assert.equal(hint.position.character, lines[hint.position.line].length);
    assert.match(String(hint.label), /^\S+ [\d.]+ (µs|ms|s) · \S+ [\d.]+ (µs|ms|s) \((<0\.1|\d+|\d\.\d)%\)$/);
  }
  assert.match((hover.contents as MarkupContent).value, /^\*\*wavecast\*\* — predicted time of this line per training iteration \(batch 8\)\n/);
  const lenses = await session.connection.sendRequest(CodeLensRequest.type, { textDocument: { uri: sampleUri } });
  assert.ok(lenses && lenses.some((l) => l.command?.command === 'wavecast.showResults'), 'a code lens opening the results');

  const again = await api.results(sampleUri);
  assert.equal(again.state, 'ready');
  assert.equal(again.prediction!.batch_size, 8);
  assert.ok(session.changes.some((c) => c.uri === sampleUri), 'wavecast/resultsChanged was sent');
  assert.ok(session.statuses.some((st) => st.state === 'analyzing'), 'wavecast/status reported the analysis');
  const kinds = session.progress.map((p) => (p as { value?: { kind?: string } }).value?.kind);
  assert.ok(kinds.includes('begin') && kinds.includes('end'), `$/progress begin and end, got ${kinds}`);
});

test('a script without providers comes back as an error with a line and a hint', { skip, timeout: ANALYSIS_TIMEOUT_MS }, async () => {
  const broken = path.join(workDir, 'no_providers.py');
  fs.writeFileSync(broken, 'import torch\n\nmodel = torch.nn.Linear(4, 4)\n');
  const uri = pathToFileURL(broken).href;
  session.connection.sendNotification('textDocument/didOpen', {
    textDocument: { uri, languageId: 'python', version: 1, text: fs.readFileSync(broken, 'utf8') },
  });
  const results = await guard(session, api.analyze(uri));
  assert.equal(results.state, 'error');
  assert.ok(results.error && results.error.message.length > 0);
  assert.match(`${results.error.message} ${results.error.hint ?? ''}`, /wavecast_model|provider/);
  const model = buildChartModel(results);
  assert.ok(model.errorText);
  assert.equal(model.charts.length, 0);
});

test('a client speaking another protocol version is refused with which side to update', { skip }, async () => {
  const other = startDaemon();
  await assert.rejects(initialize(other, 99), (error: Error) => {
    assert.match(error.message, /update/i);
    assert.match(error.message, /99|version/);
    return true;
  });
});

test('over TCP: the stored token authenticates; a wrong one is refused', { skip }, async () => {
  const { child, port } = await startTcpDaemon('s3cret-token-0123456789');
  const remoteAddress = `127.0.0.1:${port}`;

  const socket = await connectRemote({ host: '127.0.0.1', port });
  const good = attach(child, socket, socket, false);
  const result = await initialize(good, undefined, { remoteAddress }, 's3cret-token-0123456789');
  assert.equal(checkServerCapability(result.capabilities.experimental).ok, true);
  assert.ok((await new WavecastApi(good.connection).listGpus()).gpus.length > 0);

  const badSocket = await connectRemote({ host: '127.0.0.1', port });
  const bad = attach(child, badSocket, badSocket, false);
  await assert.rejects(initialize(bad, undefined, { remoteAddress }, 'wrong'), (error: Error) => {
    assert.ok(isAuthenticationError(error.message), error.message);
    return true;
  });
});
