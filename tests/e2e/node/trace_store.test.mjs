// The trace store of `wavecast serve` (--trace-store): a daemon started on a script an
// earlier one traced shows that trace's results at once: on opening it, and on its first
// save, which then traces it again.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';

import { copySample, startClient } from './daemon.mjs';

const ready = (uri) => (method, params) =>
  method === 'wavecast/resultsChanged' && params.uri === uri && params.state !== 'analyzing';
const statusMatching = (pattern) => (method, params) =>
  method === 'wavecast/status' && pattern.test(params.message);

describe('the trace store', () => {
  const store = fs.mkdtempSync(path.join(os.tmpdir(), 'wavecast-trace-store-'));
  const sample = copySample('small_cnn.py');
  after(() => {
    fs.rmSync(store, { recursive: true, force: true });
    fs.rmSync(sample.dir, { recursive: true, force: true });
  });

  // Starts a daemon on the store, opens the sample and (unless `save` is false) saves it;
  // returns the client, the first results and how long they took from the save.
  async function firstResults({ save = true } = {}) {
    const client = await startClient({ args: ['--trace-store', store] });
    const saved = performance.now();
    client.connection.sendNotification('textDocument/didOpen', {
      textDocument: { uri: sample.uri, languageId: 'python', version: 1, text: sample.text },
    });
    if (save) client.connection.sendNotification('textDocument/didSave', { textDocument: { uri: sample.uri } });
    const changed = await client.waitFor(ready(sample.uri));
    const ms = performance.now() - saved;
    const results = await client.connection.sendRequest('wavecast/results', { uri: sample.uri });
    assert.equal(changed.state, 'ready', JSON.stringify(results.error));
    return { client, changed, results, ms };
  }

  test('a daemon stores what its worker traced, and the next one starts from it', async () => {
    const first = await firstResults();
    assert.ok(!first.client.notifications.some((n) => statusMatching(/trace stored/)(n.method, n.params)));
    // Written on the store's own thread right after the prediction (a loaded machine may
    // take a while; the daemon's exit would flush it too, but stop() kills a slow exit).
    const storedEntries = () =>
      fs.existsSync(store) ? fs.readdirSync(store).filter((name) => name.endsWith('.json')) : [];
    for (const deadline = Date.now() + 60000; storedEntries().length === 0 && Date.now() < deadline; )
      await new Promise((resolve) => setTimeout(resolve, 50));
    await first.client.stop();
    const stored = storedEntries();
    assert.equal(stored.length, 1, `store holds ${fs.readdirSync(store)}`);
    const entry = JSON.parse(fs.readFileSync(path.join(store, stored[0]), 'utf8'));
    assert.equal(entry.format, 'wavecast-trace-store');
    assert.ok(Object.keys(entry.sources).includes(fs.realpathSync(sample.file)));

    const second = await firstResults();
    await second.client.waitFor(statusMatching(/results ready, traced with .*\(the trace stored \d{4}-\d\d-\d\d \d\d:\d\d; tracing it again\)/));
    assert.deepEqual(second.changed.summaries, first.changed.summaries, 'the same trace predicts the same');
    console.log(`first results: ${first.ms.toFixed(0)} ms traced, ${second.ms.toFixed(0)} ms from the store`);

    // The worker traces it again: results come once more, no longer from the store.
    await second.client.waitFor(statusMatching(/results ready, traced with (?!.*trace stored)/));
    await second.client.stop();
  });

  test('opening the script shows the stored trace without a save', async () => {
    const opened = await firstResults({ save: false });
    await opened.client.waitFor(statusMatching(/\(the trace stored .*; save to trace it again\)/));
    assert.ok(opened.results.prediction.summaries.length > 0);
    await opened.client.stop();
  });

  test('a changed script is traced, not taken from the store', async () => {
    fs.appendFileSync(sample.file, '\n# edited between the runs\n');
    const third = await firstResults();
    assert.ok(
      !third.client.notifications.some((n) => statusMatching(/trace stored/)(n.method, n.params)),
      'no stored trace for the new content',
    );
    await third.client.stop();
  });
});
