// Renders the results panel from recorded results in headless Chromium
// (Debian's, driven by playwright-core) and checks what the user would see.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { renderWebviewHtml } from '../../src/logic/webviewHtml';
import { loadHostBoundResults, loadResults, loadTracedResults } from '../fixtures';

const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const root = path.join(__dirname, '..', '..', '..');
const artifactsDir = process.env.WAVECAST_ARTIFACTS_DIR ?? path.join(root, 'out', 'artifacts');
const skip = fs.existsSync(chromiumPath) ? false : `Chromium not found at ${chromiumPath}: apt-get install chromium (or set CHROMIUM_PATH)`;

// VS Code sets the theme's colours as CSS variables on <html>; these are the
// Dark Modern values, applied through the CSSOM as VS Code does.
const DARK_MODERN: Record<string, string> = {
  '--vscode-font-family': 'system-ui, "Ubuntu", "Droid Sans", sans-serif',
  '--vscode-font-size': '13px',
  '--vscode-editor-font-family': '"DejaVu Sans Mono", monospace',
  '--vscode-editor-foreground': '#cccccc',
  '--vscode-editor-background': '#1f1f1f',
  '--vscode-editorWidget-background': '#202020',
  '--vscode-editorWidget-border': '#313131',
  '--vscode-panel-border': '#2b2b2b',
  '--vscode-descriptionForeground': '#9d9d9d',
  '--vscode-list-hoverBackground': '#2a2d2e',
  '--vscode-focusBorder': '#0078d4',
  '--vscode-textLink-foreground': '#4daafc',
  '--vscode-charts-blue': '#3794ff',
  '--vscode-charts-green': '#89d185',
  '--vscode-charts-orange': '#d18616',
  '--vscode-charts-purple': '#b180d7',
  '--vscode-charts-yellow': '#cca700',
  '--vscode-charts-red': '#f14c4c',
  '--vscode-errorForeground': '#f85149',
  '--vscode-button-background': '#0078d4',
  '--vscode-button-foreground': '#ffffff',
  '--vscode-button-hoverBackground': '#026ec1',
  '--vscode-button-secondaryBackground': '#313131',
  '--vscode-button-secondaryForeground': '#cccccc',
  '--vscode-button-secondaryHoverBackground': '#3c3c3c',
  '--vscode-inputValidation-warningBackground': '#352a05',
  '--vscode-inputValidation-warningBorder': '#b89500',
};

let browser: Browser;
let page: Page;
const requests: string[] = [];

before(async () => {
  if (skip) return;
  fs.mkdirSync(artifactsDir, { recursive: true });
  const htmlPath = path.join(artifactsDir, 'results-panel.html');
  fs.writeFileSync(
    htmlPath,
    renderWebviewHtml({
      cspSource: 'file:',
      scriptUri: pathToFileURL(path.join(root, 'dist', 'webview.js')).href,
      styleUri: pathToFileURL(path.join(root, 'media', 'results.css')).href,
    }),
  );
  browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--allow-file-access-from-files'],
  });
  page = await browser.newPage({ viewport: { width: 1180, height: 900 }, deviceScaleFactor: 1 });
  page.on('request', (request) => requests.push(request.url()));
  await page.addInitScript((theme: Record<string, string>) => {
    const w = window as unknown as Record<string, unknown>;
    w.__sent = [];
    w.__violations = [];
    document.addEventListener('securitypolicyviolation', (e) => (w.__violations as string[]).push(`${e.violatedDirective} ${e.blockedURI}`));
    w.acquireVsCodeApi = () => ({
      postMessage: (message: unknown) => (w.__sent as unknown[]).push(message),
      getState: () => undefined,
      setState: () => undefined,
    });
    for (const [name, value] of Object.entries(theme)) document.documentElement.style.setProperty(name, value);
    document.documentElement.classList.add('vscode-dark');
  }, DARK_MODERN);
  await page.goto(pathToFileURL(htmlPath).href);
});

after(async () => {
  await browser?.close();
});

function sent(): Promise<any[]> {
  return page.evaluate(() => (window as unknown as { __sent: unknown[] }).__sent);
}

async function post(message: unknown): Promise<void> {
  await page.evaluate((m) => window.postMessage(m, '*'), message);
}

test('the panel asks for results once loaded and shows a placeholder', { skip }, async () => {
  assert.deepEqual(await sent(), [{ type: 'ready' }]);
  assert.equal(await page.textContent('#app'), 'Waiting for results…');
});

test('recorded results render as bar charts, memory bars and a line table', { skip }, async () => {
  await post({ type: 'results', results: loadResults() });
  await page.waitForSelector('table tbody tr');
  assert.equal(await page.textContent('h1'), 'train_resnet.py');
  assert.match((await page.textContent('.subtitle'))!, /^batch size 192 · 4 GPUs · analytic roofline/);
  assert.equal(await page.locator('.traced').count(), 0, 'an older daemon does not say what traced');

  const titles = await page.$$eval('.chart h2', (nodes) => nodes.map((n) => n.textContent));
  assert.deepEqual(titles, ['Iteration time', 'Throughput (samples/s)', 'Cost per 1,000 samples']);
  const iterationValues = await page.$$eval('.chart-iteration .bar-value', (nodes) => nodes.map((n) => n.textContent));
  assert.deepEqual(iterationValues, ['359 ms', '617 ms', '1.47 s', '3.19 s']);
  const labels = await page.$$eval('.chart-iteration .bar-label', (nodes) => nodes.map((n) => [n.textContent, (n as HTMLElement).title]));
  assert.deepEqual(labels[0], ['H100-SXM', 'NVIDIA H100 80GB HBM3']);
  const throughputValues = await page.$$eval('.chart-throughput .bar-value', (nodes) => nodes.map((n) => n.textContent));
  assert.deepEqual(throughputValues, ['535', '311', '131', '60.3']);
  assert.equal(await page.textContent('.chart-cost .bar-value.best'), '$0.0011');

  // Bar widths are proportional to the values (T4 is the longest iteration).
  const widths = await page.$$eval('.chart-iteration .fill', (nodes) => nodes.map((n) => (n as HTMLElement).getBoundingClientRect().width));
  assert.ok(Math.abs(widths[0] / widths[3] - 358.662 / 3185.0) < 0.02, `widths ${widths}`);
  assert.equal(await page.locator('.chart-iteration .fill').first().locator('.segment').count(), 3);

  const memoryLabels = await page.$$eval('.memory .bar-value', (nodes) => nodes.map((n) => n.textContent));
  assert.deepEqual(memoryLabels, ['16.4 GiB of 80.0 GiB', '16.4 GiB of 40.0 GiB', '16.4 GiB of 24.0 GiB', '16.4 GiB of 16.0 GiB — out of memory']);
  assert.equal(await page.locator('.memory .bar-row.oom').count(), 1);
  assert.equal(await page.locator('.warnings .warning').count(), 3);
  assert.match((await page.textContent('.warnings'))!, /out of memory on T4: the iteration needs about 16.4 GiB, the GPU has 16.0 GiB/);

  const headers = await page.$$eval('thead th', (nodes) => nodes.map((n) => n.textContent));
  assert.deepEqual(headers, ['Line', 'Operations', 'H100-SXM', 'A100-SXM4-40GB', 'L4', 'T4']);
  assert.equal(await page.locator('tbody tr').count(), 11);
  const firstRow = await page.$$eval('tbody tr:first-child td', (nodes) => nodes.map((n) => n.textContent));
  assert.equal(firstRow[0], 'train_resnet.py:24');
  assert.equal(firstRow[1], 'convolution, batch_norm, relu_, max_pool2d 4 ops');
  assert.equal(firstRow[2], '10.2 ms3%');
  const lastRow = await page.$$eval('tbody tr:last-child td', (nodes) => nodes.map((n) => n.textContent));
  assert.equal(lastRow[0], 'other code');
  // Results from before the host model: no GPU/CPU details, no host-bound markers.
  assert.equal(await page.locator('.bar-detail, .host-bound').count(), 0);

  fs.mkdirSync(artifactsDir, { recursive: true });
  await page.screenshot({ path: path.join(artifactsDir, 'results-panel.png'), fullPage: true });
});

test('clicking a line row posts a reveal message for that line; “other code” links nowhere', { skip }, async () => {
  const before = (await sent()).length;
  await page.click('tbody tr[data-line="0"]');
  assert.equal((await sent()).length, before);
  await page.click('tbody tr[data-line="27"]');
  const messages = await sent();
  assert.deepEqual(messages[messages.length - 1], { type: 'reveal', file: '/home/ada/projects/resnet/train_resnet.py', line: 27 });
  await page.focus('tbody tr[data-line="45"]');
  await page.keyboard.press('Enter');
  assert.deepEqual((await sent()).at(-1), { type: 'reveal', file: '/home/ada/projects/resnet/train_resnet.py', line: 45 });
});

test('sorting by a GPU puts its slowest line first; buttons post commands', { skip }, async () => {
  await page.click('th.col-gpu button:text("T4")');
  const lines = await page.$$eval('tbody tr', (rows) => rows.map((r) => (r as HTMLElement).dataset.line));
  assert.deepEqual(lines.slice(0, 3), ['27', '26', '25']);
  await page.click('button:text("Analyze now")');
  await page.click('button:text("Pick GPUs")');
  assert.deepEqual((await sent()).slice(-2), [{ type: 'analyze' }, { type: 'pickGpus' }]);
});

test('host-bound GPUs and lines are marked, with GPU idle time and the advice', { skip }, async () => {
  await post({ type: 'results', results: loadHostBoundResults() });
  await page.waitForSelector('.chart-iteration .bar-detail');
  assert.equal(await page.textContent('.chart-iteration h2'), 'Iteration time (wall)');
  const values = await page.$$eval('.chart-iteration .bar-value', (nodes) => nodes.map((n) => n.textContent));
  assert.deepEqual(values, ['3.60 ms', '3.60 ms']);
  const details = await page.$$eval('.chart-iteration .bar-detail', (nodes) => nodes.map((n) => Array.from(n.children).map((c) => c.textContent)));
  assert.deepEqual(details, [
    ['GPU busy 0.284 ms · CPU 3.59 ms', 'host-bound: GPU idle 3.32 ms of 3.60 ms'],
    ['GPU busy 1.32 ms · CPU 3.59 ms', 'host-bound: GPU idle 2.28 ms of 3.60 ms'],
  ]);
  assert.match((await page.textContent('.chart-iteration .note'))!, /^Host-bound on H100-SXM, T4: .*a larger batch, CUDA graphs or torch\.compile/);
  // The detail sits under its bar: below the track, not beside it.
  const track = await page.locator('.chart-iteration .track').first().boundingBox();
  const detail = await page.locator('.chart-iteration .bar-detail').first().boundingBox();
  assert.ok(track && detail && detail.y >= track.y + track.height - 1 && detail.x >= track.x - 1, `track ${JSON.stringify(track)} detail ${JSON.stringify(detail)}`);
  // The other charts carry no host details.
  assert.equal(await page.locator('.chart-throughput .bar-detail, .chart-cost .bar-detail').count(), 0);

  await page.click('th.col-line button');
  const marked = await page.$$eval('tbody tr', (rows) =>
    rows.map((r) => [(r as HTMLElement).dataset.line, Array.from(r.querySelectorAll('td.col-gpu')).map((td) => td.classList.contains('host-bound'))]),
  );
  assert.deepEqual(marked, [
    ['22', [true, false]],
    ['23', [true, false]],
    ['24', [true, false]],
    ['25', [false, false]],
    ['26', [true, false]],
    ['45', [true, true]],
    ['47', [true, true]],
  ]);
  assert.equal(await page.locator('tbody tr.host-bound').count(), 6);
  const firstRow = await page.$$eval('tbody tr:first-child td', (nodes) => nodes.map((n) => [n.textContent, (n as HTMLElement).title]));
  assert.deepEqual(firstRow[2], ['0.464 mshost-bound13%', 'wall 0.464 ms · GPU busy 0.058 ms · host-bound: GPU idle 0.406 ms of 0.464 ms']);
  assert.deepEqual(firstRow[3], ['0.653 ms18%', 'wall 0.653 ms · GPU busy 0.456 ms']);
  assert.equal(await page.locator('.warnings .warning').count(), 3);
  await page.screenshot({ path: path.join(artifactsDir, 'results-panel-host-bound.png'), fullPage: true });
});

test('the torch that traced the script is named under the title', { skip }, async () => {
  await post({ type: 'results', results: loadTracedResults() });
  await page.waitForSelector('.subtitle.traced');
  assert.equal(await page.textContent('.subtitle.traced'), 'traced with torch 2.11.0+cu130');
});

test('an analysis error shows the message, the hint and a link to the line', { skip }, async () => {
  await post({
    type: 'results',
    results: {
      uri: 'file:///home/ada/projects/resnet/train_resnet.py',
      state: 'error',
      content_version: 8,
      prediction: null,
      error: {
        kind: 'ProviderError',
        message: 'wavecast_input() takes no argument batch_size',
        file: '/home/ada/projects/resnet/train_resnet.py',
        line: 33,
        hint: 'Write def wavecast_input(batch_size=32): ...',
      },
    },
  });
  await page.waitForSelector('.error-box');
  assert.match((await page.textContent('.error-box'))!, /ProviderError: wavecast_input\(\) takes no argument batch_size/);
  assert.match((await page.textContent('.error-box'))!, /Write def wavecast_input/);
  assert.equal(await page.locator('table').count(), 0);
  await page.click('.error-box button');
  assert.deepEqual((await sent()).at(-1), { type: 'reveal', file: '/home/ada/projects/resnet/train_resnet.py', line: 33 });
  await page.screenshot({ path: path.join(artifactsDir, 'results-panel-error.png') });
});

test('nothing was blocked by the CSP and nothing left the machine', { skip }, async () => {
  const violations = await page.evaluate(() => (window as unknown as { __violations: string[] }).__violations);
  assert.deepEqual(violations, []);
  assert.deepEqual(
    requests.filter((url) => !url.startsWith('file://')),
    [],
  );
  assert.ok(requests.some((url) => url.endsWith('/dist/webview.js')));
});

test('colours follow the editor theme’s variables (Light Modern)', { skip }, async () => {
  await post({ type: 'results', results: loadResults() });
  await page.evaluate(() => {
    const light: Record<string, string> = {
      '--vscode-editor-background': '#ffffff',
      '--vscode-editor-foreground': '#3b3b3b',
      '--vscode-editorWidget-background': '#f8f8f8',
      '--vscode-textLink-foreground': '#005fb8',
      '--vscode-charts-blue': '#1a85ff',
    };
    for (const [name, value] of Object.entries(light)) document.documentElement.style.setProperty(name, value);
  });
  const colours = await page.evaluate(() => ({
    background: getComputedStyle(document.body).backgroundColor,
    text: getComputedStyle(document.body).color,
    card: getComputedStyle(document.querySelector('.card')!).backgroundColor,
    link: getComputedStyle(document.querySelector('.link')!).color,
    bar: getComputedStyle(document.querySelector('.chart-iteration .seg-forward')!).backgroundColor,
  }));
  assert.deepEqual(colours, {
    background: 'rgb(255, 255, 255)',
    text: 'rgb(59, 59, 59)',
    card: 'rgb(248, 248, 248)',
    link: 'rgb(0, 95, 184)',
    bar: 'rgb(26, 133, 255)',
  });
  await page.screenshot({ path: path.join(artifactsDir, 'results-panel-light.png'), fullPage: true });
});
