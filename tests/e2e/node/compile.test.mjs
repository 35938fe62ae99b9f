// The `compile` setting of `wavecast serve` end to end: the real worker traces the script as
// if compiled, the prediction says what compiling changes, and a settings change back to
// null analyses it as written.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, describe, test } from 'node:test';

import { copySample, startClient } from './daemon.mjs';

const settled = (uri) => (method, params) =>
  method === 'wavecast/resultsChanged' && params.uri === uri && params.state !== 'analyzing';

describe('the compile setting', () => {
  const sample = copySample('small_cnn.py');
  after(() => fs.rmSync(sample.dir, { recursive: true, force: true }));

  test('a what-if compile is traced, priced compiled and compared with eager; null goes back', async () => {
    const client = await startClient({
      initializationOptions: { protocol_version: 2, targets: ['H100'], compile: 'default' },
    });
    try {
      client.connection.sendNotification('textDocument/didOpen', {
        textDocument: { uri: sample.uri, languageId: 'python', version: 1, text: sample.text },
      });
      client.connection.sendNotification('textDocument/didSave', { textDocument: { uri: sample.uri } });
      const first = await client.waitFor(settled(sample.uri));
      const compiled = await client.connection.sendRequest('wavecast/results', { uri: sample.uri, ops: false });
      assert.equal(first.state, 'ready', JSON.stringify(compiled.error));
      const against = compiled.prediction.advisories.filter((a) => a.kind === 'compiled_against_eager');
      assert.equal(against.length, 1, JSON.stringify(compiled.prediction.advisories));
      assert.match(against[0].gpu, /H100/);
      assert.equal(against[0].compiled_ms, compiled.prediction.summaries[0].iteration_ms);
      assert.match(against[0].message, /with torch\.compile, .* the same ops eagerly/);
      // The warning of a what-if is the script's, at no line.
      assert.ok(compiled.prediction.trace_warnings.some((w) => w.kind === 'torch_compile' && !w.line));

      const count = client.notifications.filter((n) => settled(sample.uri)(n.method, n.params)).length;
      client.connection.sendNotification('workspace/didChangeConfiguration', {
        settings: { wavecast: { compile: null } },
      });
      for (const deadline = Date.now() + 120000; Date.now() < deadline; ) {
        if (client.notifications.filter((n) => settled(sample.uri)(n.method, n.params)).length > count) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const eager = await client.connection.sendRequest('wavecast/results', { uri: sample.uri, ops: false });
      assert.equal(eager.state, 'ready', JSON.stringify(eager.error));
      assert.ok(!eager.prediction.advisories.some((a) => a.kind === 'compiled_against_eager'));
      assert.ok(!(eager.prediction.trace_warnings ?? []).some((w) => w.kind === 'torch_compile'));
      // What the comparison called eager is what the script as written predicts.
      assert.equal(eager.prediction.summaries[0].iteration_ms, against[0].eager_ms);
    } finally {
      await client.stop();
    }
  });
});
