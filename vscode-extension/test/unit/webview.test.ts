import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { contentSecurityPolicy, makeNonce, renderWebviewHtml } from '../../src/logic/webviewHtml';
import { parseFromWebview, restoredUri } from '../../src/logic/webviewMessages';

test('the CSP allows only our resources and a nonce-tagged script', () => {
  const csp = contentSecurityPolicy('vscode-resource:', 'abc123');
  assert.match(csp, /^default-src 'none'/);
  assert.match(csp, /script-src 'nonce-abc123'(;|$)/);
  assert.match(csp, /connect-src 'none'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
});

test('the HTML tags script and stylesheet with the nonce', () => {
  const html = renderWebviewHtml({ cspSource: 'vscode-resource:', scriptUri: 'vscode-resource:/dist/webview.js', styleUri: 'vscode-resource:/media/results.css', nonce: 'n0nce' });
  assert.match(html, /<script nonce="n0nce" src="vscode-resource:\/dist\/webview.js"><\/script>/);
  assert.match(html, /<link rel="stylesheet" nonce="n0nce" href="vscode-resource:\/media\/results.css">/);
  assert.match(html, /http-equiv="Content-Security-Policy"/);
  assert.doesNotMatch(html, /<style|style="/);
});

test('nonces are fresh and alphanumeric', () => {
  const a = makeNonce();
  assert.match(a, /^[A-Za-z0-9]{16,}$/);
  assert.notEqual(a, makeNonce());
});

test('only well-formed messages from the webview are accepted', () => {
  assert.deepEqual(parseFromWebview({ type: 'reveal', file: '/w/t.py', line: 4 }), { type: 'reveal', file: '/w/t.py', line: 4 });
  assert.equal(parseFromWebview({ type: 'reveal', file: '/w/t.py', line: 0 }), null);
  assert.equal(parseFromWebview({ type: 'reveal', file: 3, line: 4 }), null);
  assert.deepEqual(parseFromWebview({ type: 'analyze', extra: 1 }), { type: 'analyze' });
  assert.equal(parseFromWebview({ type: 'runCommand', command: 'rm' }), null);
  assert.equal(parseFromWebview('ready'), null);
});

test('a restored panel shows the document its saved results belong to', () => {
  assert.equal(restoredUri({ results: { uri: 'file:///w/train.py', state: 'ready' } }), 'file:///w/train.py');
  for (const state of [undefined, null, 'x', {}, { results: null }, { results: { uri: 7 } }, { results: { uri: '' } }]) {
    assert.equal(restoredUri(state), undefined, JSON.stringify(state));
  }
});
