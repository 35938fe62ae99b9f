// A multi-GPU target of the daemon (parallelTargets) predicts what `wavecast predict` does
// for the same layout: a pipeline's microbatches are priced from the script traced again at
// one microbatch's batch in both, so editor and terminal show the same iteration.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { after, describe, test } from 'node:test';

import { copySample, startClient, wavecastBin } from './daemon.mjs';

const ready = (uri) => (method, params) =>
  method === 'wavecast/resultsChanged' && params.uri === uri && params.state !== 'analyzing';

describe('multi-GPU targets in the editor', () => {
  const sample = copySample('small_transformer.py');
  let client;
  after(async () => {
    await client?.stop();
    fs.rmSync(sample.dir, { recursive: true, force: true });
  });

  test('a pipeline target prices its microbatches at their own shapes, as the CLI does', async () => {
    client = await startClient({
      initializationOptions: { protocol_version: 2, parallelTargets: ['4x H100-SXM, pp2, mb4'] },
    });
    client.connection.sendNotification('textDocument/didOpen', {
      textDocument: { uri: sample.uri, languageId: 'python', version: 1, text: sample.text },
    });
    client.connection.sendNotification('textDocument/didSave', { textDocument: { uri: sample.uri } });
    const changed = await client.waitFor(ready(sample.uri));
    const results = await client.connection.sendRequest('wavecast/results', { uri: sample.uri });
    assert.equal(changed.state, 'ready', JSON.stringify(results.error));
    const [editor] = results.prediction.parallel;
    assert.equal(editor.microbatches, 4);
    assert.equal(editor.microbatch_pricing, 'traced');
    assert.equal(editor.microbatch_text, 'microbatches of 8 priced at their own shapes');

    const cli = JSON.parse(
      execFileSync(
        wavecastBin,
        ['predict', sample.file, '--gpu', 'H100-SXM', '--dp', '2', '--pp', '2', '--microbatches', '4', '--json'],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
      ),
    );
    const [terminal] = cli.parallel;
    assert.equal(terminal.label, editor.label);
    assert.equal(terminal.microbatch_pricing, 'traced');
    for (const field of ['iteration_ms', 'compute_ms', 'bubble_ms', 'communication_ms']) {
      assert.ok(
        Math.abs(terminal[field] - editor[field]) <= 1e-6 * Math.max(1, terminal[field]),
        `${field}: CLI ${terminal[field]}, editor ${editor[field]}`,
      );
    }
  });
});
