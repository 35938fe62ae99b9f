// Decorations mode against the mock: the daemon's inlay hints, asked for
// through the client, drawn at the end of the lines the daemon put them on;
// redrawn on results, edits and scrolling; stale answers dropped.
import '../mock/register';
import { strict as assert } from 'node:assert';
import { beforeEach, test } from 'node:test';
import type { InlayHintParams } from 'vscode-languageserver-protocol';
import { harness, type FakeTextEditor } from '../mock/vscode';
import { daemonInlayHints, daemonLabel, openEditor, resetHarness, setup, sleep, tick, URI } from './setup';

beforeEach(resetHarness);

/** Longer than the decorator's pause after typing or scrolling. */
const REDRAWN_MS = 300;

const drawn = (editor: FakeTextEditor) => [...editor.decorations.values()][0] ?? [];
/** Each decoration as [0-based line, character, text]. */
const placed = (editor: FakeTextEditor) =>
  drawn(editor).map((o: any) => [o.range.start.line, o.range.start.character, o.renderOptions.after.contentText]);

async function decorationsMode(lines = 60) {
  harness.config.set('display', 'decorations');
  const editor = openEditor(lines);
  const { controller, clients } = setup();
  await controller.activate();
  await tick();
  return { editor, controller, client: clients[0] };
}

test('decorations mode draws the daemon’s inlay hints at the end of their lines, with no hover of its own', async () => {
  const { editor, client } = await decorationsMode();
  assert.equal(client.spec.inlayHintsEnabled(), false, 'VS Code’s own inlay hints stay off');
  assert.deepEqual(client.requestsOf('textDocument/inlayHint'), [
    { textDocument: { uri: URI }, range: { start: { line: 0, character: 0 }, end: { line: 59, character: 0 } } },
  ]);
  assert.deepEqual(client.requestsOf('wavecast/results'), [], 'the labels are the daemon’s, not computed from the results');
  const options = drawn(editor);
  assert.equal(options.length, 10);
  const line27 = options.find((o: any) => o.range.start.line === 26);
  assert.equal(line27.range.start.character, 'line 27'.length);
  assert.equal(line27.renderOptions.after.contentText, daemonLabel(27));
  assert.equal(line27.hoverMessage, undefined, 'the daemon’s hover comes through the language client');

  harness.changeSettings({ display: 'inlayHints' });
  await tick();
  await tick();
  assert.equal(client.spec.inlayHintsEnabled(), true);
  assert.deepEqual(drawn(editor), []);
  assert.equal(client.inlayRefreshes, 1);
});

test('an unsaved edit above a predicted line: the decoration lands on the line it moved to', async () => {
  const { editor, client } = await decorationsMode();
  assert.ok(placed(editor).some(([line, , text]) => line === 26 && text === daemonLabel(27)));

  editor.document.edit(2, 0, ['import os', 'import sys', 'import time']);
  await sleep(REDRAWN_MS);
  assert.equal(client.requestsOf('textDocument/inlayHint').length, 2, 'the edit asked again');
  const moved = placed(editor).find(([, , text]) => text === daemonLabel(27));
  assert.deepEqual(moved, [29, 'line 27'.length, daemonLabel(27)], 'three lines down, at the end of the moved line');
  assert.equal(editor.document.lines[29], 'line 27');
  assert.equal(drawn(editor).length, 10);
});

test('an edit on a predicted line drops its label, as the daemon’s line map does', async () => {
  const { editor } = await decorationsMode();
  editor.document.edit(26, 1, ['x = conv(x)  # edited']);
  await sleep(REDRAWN_MS);
  assert.ok(!placed(editor).some(([, , text]) => text === daemonLabel(27)));
  assert.equal(drawn(editor).length, 9);
});

test('typing redraws once it pauses, not on every keystroke', async () => {
  const { editor, client } = await decorationsMode();
  for (let i = 0; i < 5; i++) {
    editor.document.edit(0, 0, [`# ${i}`]);
    await sleep(20);
  }
  await sleep(REDRAWN_MS);
  assert.equal(client.requestsOf('textDocument/inlayHint').length, 2);
  assert.ok(placed(editor).some(([line, , text]) => line === 31 && text === daemonLabel(27)));
});

test('an older answer arriving after a newer one is dropped', async () => {
  const { editor, client } = await decorationsMode();
  const answers: { params: InlayHintParams; resolve: (hints: unknown) => void }[] = [];
  client.handlers.set('textDocument/inlayHint', (params: InlayHintParams) => new Promise((resolve) => answers.push({ params, resolve })));

  client.notify('wavecast/resultsChanged', { uri: URI, state: 'ready', summaries: [] });
  client.notify('wavecast/resultsChanged', { uri: URI, state: 'ready', summaries: [] });
  await tick();
  assert.equal(answers.length, 2);
  const label = (text: string) => [{ position: { line: 5, character: 6 }, label: text }];
  answers[1].resolve(label('newer'));
  await tick();
  answers[0].resolve(label('older'));
  await tick();
  assert.deepEqual(placed(editor), [[5, 'line 6'.length, 'newer']]);
});

test('an answer to a request sent before an edit is dropped; the edit’s own redraw draws', async () => {
  const { editor, client } = await decorationsMode();
  let release: () => void = () => undefined;
  client.handlers.set('textDocument/inlayHint', async () => {
    await new Promise<void>((resolve) => (release = resolve));
    return [{ position: { line: 26, character: 7 }, label: 'placed for the text before the edit' }];
  });
  client.notify('wavecast/resultsChanged', { uri: URI, state: 'ready', summaries: [] });
  await tick();
  editor.document.edit(0, 0, ['# a', '# b']);
  release();
  await tick();
  assert.ok(!placed(editor).some(([, , text]) => text === 'placed for the text before the edit'));
  client.handlers.set('textDocument/inlayHint', daemonInlayHints);
  await sleep(REDRAWN_MS);
  assert.ok(placed(editor).some(([line, , text]) => line === 28 && text === daemonLabel(27)));
});

test('scrolling asks for what is now on screen, and a screen above and below', async () => {
  const { editor, client } = await decorationsMode(300);
  editor.scrollTo(100, 140);
  await sleep(REDRAWN_MS);
  assert.deepEqual(client.requestsOf('textDocument/inlayHint').at(-1), {
    textDocument: { uri: URI },
    range: { start: { line: 59, character: 0 }, end: { line: 181, character: 0 } },
  });
  assert.deepEqual(drawn(editor), [], 'no predicted line there');
});

test('results of another file redraw nothing here; a stopped daemon leaves no decorations', async () => {
  const { editor, client, controller } = await decorationsMode();
  client.notify('wavecast/resultsChanged', { uri: 'file:///other.py', state: 'ready', summaries: [] });
  await tick();
  assert.equal(client.requestsOf('textDocument/inlayHint').length, 1);
  assert.equal(drawn(editor).length, 10);
  await (controller as any).stopClient();
  await tick();
  assert.deepEqual(drawn(editor), []);
});
