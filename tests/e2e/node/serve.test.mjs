// `wavecast serve` driven by the vscode-languageserver-protocol client (what the
// VS Code extension uses): inlay hints, the wavecast/* methods, TCP and bad input.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  CodeLensRequest,
  HoverRequest,
  InlayHintRequest,
} from 'vscode-languageserver-protocol/node.js';

import { copySample, spawnDaemon, startClient } from './daemon.mjs';

const forwardLine = 21; // 0-based: `x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)`

describe('wavecast serve over stdio', () => {
  let client;
  let sample;

  before(async () => {
    client = await startClient();
    sample = copySample('small_cnn.py');
    client.connection.sendNotification('textDocument/didOpen', {
      textDocument: { uri: sample.uri, languageId: 'python', version: 1, text: sample.text },
    });
  });
  after(async () => {
    await client?.stop();
    if (sample) fs.rmSync(sample.dir, { recursive: true, force: true });
  });

  test('advertises the wavecast protocol', () => {
    const caps = client.initializeResult.capabilities;
    assert.equal(caps.experimental.wavecast.protocol_version, 2);
    assert.ok(caps.experimental.wavecast.methods.includes('wavecast/analyze'));
    assert.ok(caps.inlayHintProvider);
  });

  test('wavecast/listGpus lists the database and the default targets', async () => {
    const reply = await client.connection.sendRequest('wavecast/listGpus', {});
    assert.equal(reply.targets.length, 3);
    const h100 = reply.gpus.find((gpu) => gpu.id === reply.targets[0]);
    assert.ok(h100, `target ${reply.targets[0]} missing from gpus`);
    assert.match(h100.id, /H100/);
    assert.match(h100.compute_capability, /^9\.0$/);
    assert.ok(h100.sms > 100);
    assert.ok(h100.memory_bandwidth_gbs > 1000);
    assert.ok(h100.peak_tflops.bf16 > h100.peak_tflops.fp32);
    assert.equal(h100.host_link.name, 'PCIe 5.0 x16');
    assert.ok(h100.host_link.host_to_device_gbs > 50 && h100.host_link.device_to_host_gbs > 50);
  });

  test('wavecast/setTargets resolves names and rejects unknown ones with suggestions', async () => {
    await assert.rejects(
      client.connection.sendRequest('wavecast/setTargets', { gpus: ['Voodoo5'] }),
      (error) => error.code === -32602 && /Voodoo5/.test(error.message) && Array.isArray(error.data?.suggestions),
    );
    const reply = await client.connection.sendRequest('wavecast/setTargets', { gpus: ['h100', 'T4'] });
    assert.equal(reply.targets.length, 2);
    assert.match(reply.targets[0], /H100/);
    assert.match(reply.targets[1], /T4/);
  });

  test('saving analyses the file; inlay hints, hover and code lens show per-GPU times', async () => {
    client.connection.sendNotification('textDocument/didSave', { textDocument: { uri: sample.uri } });
    const changed = await client.waitFor(
      (method, params) =>
        method === 'wavecast/resultsChanged' && params.uri === sample.uri && params.state !== 'analyzing',
    );
    const results = await client.connection.sendRequest('wavecast/results', { uri: sample.uri });
    assert.equal(changed.state, 'ready', `analysis failed: ${JSON.stringify(results.error)}`);
    assert.equal(results.state, 'ready');
    assert.equal(results.content_version, 1);
    assert.equal(results.prediction.batch_size, 64);
    assert.deepEqual(results.prediction.gpus.length, 2);
    for (const summary of results.prediction.summaries) assert.ok(summary.iteration_ms > 0);
    const line = results.prediction.lines.find((l) => l.line === forwardLine + 1);
    assert.ok(line, 'no prediction for the first conv line');
    assert.ok(line.ops.length > 0);

    const hints = await client.connection.sendRequest(InlayHintRequest.type, {
      textDocument: { uri: sample.uri },
      range: { start: { line: 0, character: 0 }, end: { line: 60, character: 0 } },
    });
    const hint = hints.find((h) => h.position.line === forwardLine);
    assert.ok(hint, `no inlay hint on line ${forwardLine}: ${JSON.stringify(hints)}`);
    const lineText = sample.text.split('\n')[forwardLine];
    assert.equal(hint.position.character, lineText.length);
    // docs/presentation.md: the line label.
    assert.match(hint.label, /^H100\S* [\d.]+ (µs|ms|s) · T4 [\d.]+ (µs|ms|s) \((<0\.1|\d+|0\.\d)%\)$/);

    const hover = await client.connection.sendRequest(HoverRequest.type, {
      textDocument: { uri: sample.uri },
      position: { line: forwardLine, character: 10 },
    });
    assert.equal(hover.contents.kind, 'markdown');
    assert.match(hover.contents.value, /\| GPU \| forward \| backward \|/);
    assert.match(hover.contents.value, /aten::convolution/);

    const lenses = await client.connection.sendRequest(CodeLensRequest.type, {
      textDocument: { uri: sample.uri },
    });
    const iterationLenses = lenses.filter((lens) => lens.range.start.line === 38);
    assert.equal(iterationLenses.length, 2);
    assert.match(iterationLenses[0].command.title, /\/iter · [\d,]+ samples\/s/);
  });

  test('wavecast/analyze with a batch size answers with the new results', async () => {
    const results = await client.connection.sendRequest('wavecast/analyze', {
      uri: sample.uri,
      batch_size: 8,
    });
    assert.equal(results.state, 'ready', JSON.stringify(results.error));
    assert.equal(results.prediction.batch_size, 8);
  });

  test('invalid params get InvalidParams and the daemon keeps serving', async () => {
    await assert.rejects(
      client.connection.sendRequest('wavecast/setBatchSize', { uri: sample.uri, batch_size: 'many' }),
      (error) => error.code === -32602 && /params.batch_size must be an integer/.test(error.message),
    );
    await assert.rejects(client.connection.sendRequest('wavecast/nope', {}), (error) => error.code === -32601);
    const reply = await client.connection.sendRequest('wavecast/results', { uri: sample.uri });
    assert.equal(reply.state, 'ready');
  });
});

describe('protocol version negotiation', () => {
  test('a newer client is told to update the daemon', async () => {
    await assert.rejects(startClient({ initializationOptions: { protocol_version: 99 } }), (error) => {
      assert.match(error.message, /update the wavecast daemon/);
      return true;
    });
  });
  test('a version-1 client (camelCase protocolVersion) is told to update itself', async () => {
    await assert.rejects(startClient({ initializationOptions: { protocolVersion: 1 } }), (error) => {
      assert.match(error.message, /client speaks version 1, the daemon speaks version 2; update the editor extension/);
      assert.deepEqual(error.data, { retry: false, client_protocol_version: 1, server_protocol_version: 2, update: 'client' });
      return true;
    });
  });
});

// Raw bytes in, parsed frames out: for input no well-behaved client sends.
function rawSession(child) {
  let buffer = Buffer.alloc(0);
  const messages = [];
  child.stdout.on('data', (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/Content-Length: (\d+)/i.exec(buffer.subarray(0, end).toString())[1]);
      if (buffer.length < end + 4 + length) return;
      messages.push(JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString()));
      buffer = buffer.subarray(end + 4 + length);
    }
  });
  const frame = (body) => `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  const reply = async (id) => {
    for (let i = 0; i < 3000; i++) {
      const found = messages.find((m) => m.id === id && !('method' in m));
      if (found) return found;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`no reply to ${id}; stderr: ${child.stderrText}`);
  };
  return { messages, frame, reply };
}

describe('bad input on stdio', () => {
  test('malformed JSON, bad framing, huge lengths and early requests get JSON-RPC errors', async () => {
    const child = spawnDaemon();
    try {
      const session = rawSession(child);
      child.stdin.write(session.frame(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'textDocument/hover', params: {} })));
      assert.equal((await session.reply(1)).error.code, -32002);
      child.stdin.write(session.frame('{"jsonrpc":"2.0","id":2,'));
      child.stdin.write('Content-Type: nothing\r\n\r\n');
      child.stdin.write('Content-Length: 999999999999\r\n\r\n');
      child.stdin.write('x'.repeat(1000));
      // Poll rather than sleep: a loaded CI machine can take a while.
      const nullIdErrors = () => session.messages.filter((m) => m.id === null);
      for (let i = 0; i < 3000 && nullIdErrors().length < 3; i++) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 100)); // a fourth, unexpected error would show here
      const errors = nullIdErrors().map((m) => m.error.code);
      assert.deepEqual(errors, [-32700, -32700, -32700]);
      // The refused body is still being skipped; the daemon has not died.
      assert.equal(child.exitCode, null);
    } finally {
      child.kill();
    }
  });
});

describe('wavecast serve --listen', () => {
  let child;
  let dir;
  let tokenFile;

  before(async () => {
    dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'wavecast-token-'));
    tokenFile = path.join(dir, 'token');
    child = spawnDaemon(['--listen', '127.0.0.1:0', '--token-file', tokenFile]);
    // The whole announcement, port and all: stderr may arrive in pieces.
    for (let i = 0; i < 3000 && !/listening on \S+:\d+;/.test(child.stderrText); i++)
      await new Promise((r) => setTimeout(r, 10));
  });
  after(() => {
    child?.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const connect = (port) =>
    new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => resolve(socket));
      socket.on('error', reject);
    });

  test('writes a private token and refuses clients without it', async () => {
    const port = Number(/listening on 127\.0\.0\.1:(\d+)/.exec(child.stderrText)[1]);
    assert.equal(fs.statSync(tokenFile).mode & 0o777, 0o600);
    const token = fs.readFileSync(tokenFile, 'utf8').trim();
    assert.equal(token.length, 64);

    const initialize = (id, options) =>
      JSON.stringify({ jsonrpc: '2.0', id, method: 'initialize', params: { capabilities: {}, initializationOptions: options } });

    const intruder = await connect(port);
    const intruderSession = rawSession({ stdout: intruder, stderrText: child.stderrText });
    intruder.write(intruderSession.frame(initialize(1, { token: 'guess' })));
    const denied = await intruderSession.reply(1);
    assert.match(denied.error.message, /authentication failed/);
    if (!intruder.closed) await new Promise((resolve) => intruder.once('close', resolve));

    const friend = await connect(port);
    const friendSession = rawSession({ stdout: friend, stderrText: child.stderrText });
    friend.write(friendSession.frame(initialize(1, { token, protocol_version: 2 })));
    const accepted = await friendSession.reply(1);
    assert.equal(accepted.result.serverInfo.name, 'wavecast');
    friend.write(friendSession.frame(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'wavecast/listGpus' })));
    assert.ok((await friendSession.reply(2)).result.gpus.length > 3);
    friend.destroy();
  });

  test('refuses a non-loopback address without --allow-remote', async () => {
    const refused = spawnDaemon(['--listen', '0.0.0.0:0']);
    const code = await new Promise((resolve) => refused.once('exit', resolve));
    assert.equal(code, 2);
    assert.match(refused.stderrText, /--allow-remote/);
  });
});
