// The results panel's HTML shell: a strict content security policy that
// allows only our own bundled script (by nonce) and stylesheet, no network.
import { randomBytes } from 'crypto';

export interface WebviewHtmlInput {
  /** `webview.cspSource`: the origin our bundled resources are served from. */
  cspSource: string;
  scriptUri: string;
  styleUri: string;
  nonce?: string;
  title?: string;
}

export function makeNonce(): string {
  return randomBytes(18).toString('base64').replace(/[^A-Za-z0-9]/g, '');
}

export function contentSecurityPolicy(cspSource: string, nonce: string): string {
  return [
    "default-src 'none'",
    `style-src ${cspSource} 'nonce-${nonce}'`,
    `script-src 'nonce-${nonce}'`,
    `img-src ${cspSource} data:`,
    `font-src ${cspSource}`,
    "connect-src 'none'",
    "form-action 'none'",
    "base-uri 'none'",
  ].join('; ');
}

function escapeAttribute(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
}

export function renderWebviewHtml(input: WebviewHtmlInput): string {
  const nonce = input.nonce ?? makeNonce();
  const title = escapeAttribute(input.title ?? 'wavecast results');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${escapeAttribute(contentSecurityPolicy(input.cspSource, nonce))}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" nonce="${nonce}" href="${escapeAttribute(input.styleUri)}">
<title>${title}</title>
</head>
<body>
<main id="app" aria-live="polite"><p class="placeholder">Waiting for results…</p></main>
<script nonce="${nonce}" src="${escapeAttribute(input.scriptUri)}"></script>
</body>
</html>
`;
}
