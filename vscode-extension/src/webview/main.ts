// Results panel script: renders the chart model into the DOM. Runs in the
// webview (a browser), bundled by esbuild; no network, no inline styles
// (the CSP forbids them; element.style through the CSSOM is allowed).
import { buildChartModel, type Bar, type BarChart, type ChartModel, type ConfigurationTable, type LineRow, type MemoryBar } from '../logic/chartData';
import type { FromWebview, PanelState, ToWebview } from '../logic/webviewMessages';
import type { Results } from '../logic/protocol';

interface VsCodeApi {
  postMessage(message: FromWebview): void;
  getState(): unknown;
  setState(state: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();

type SortKey = { column: 'line' } | { column: 'gpu'; gpu: string };
let sortKey: SortKey = { column: 'line' };
let current: Results | null = null;

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  options: { className?: string; text?: string; title?: string } = {},
  children: (Node | null)[] = [],
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (options.className) node.className = options.className;
  if (options.text !== undefined) node.textContent = options.text;
  if (options.title) node.title = options.title;
  for (const child of children) if (child) node.appendChild(child);
  return node;
}

function percent(fraction: number): string {
  return `${Math.max(0, Math.min(1, fraction)) * 100}%`;
}

function button(label: string, message: FromWebview, title: string): HTMLButtonElement {
  const b = el('button', { text: label, title });
  b.addEventListener('click', () => vscode.postMessage(message));
  return b;
}

function renderBar(bar: Bar): HTMLElement[] {
  const track = el('div', { className: 'track' });
  const fill = el('div', { className: `fill${bar.best ? ' best' : ''}` });
  fill.style.width = percent(bar.fraction);
  if (bar.segments.length > 0) {
    for (const segment of bar.segments) {
      const part = el('div', { className: `segment seg-${segment.kind}`, title: segment.label });
      part.style.width = percent(segment.value / (bar.value ?? 1));
      fill.appendChild(part);
    }
  }
  track.appendChild(fill);
  const row = el('div', { className: `bar-row${bar.hostBound ? ' host-bound' : ''}`, title: `${bar.name}: ${bar.label}` }, [
    el('span', { className: 'bar-label', text: bar.gpu, title: bar.name }),
    track,
    el('span', { className: `bar-value${bar.value === null ? ' missing' : ''}${bar.best ? ' best' : ''}`, text: bar.label }),
  ]);
  if (!bar.detail && !bar.hostBound) return [row];
  // Under the track: GPU and CPU time, and the host-bound marker.
  const detail = el('div', { className: 'bar-detail' }, [
    bar.detail ? el('span', { className: 'detail', text: bar.detail }) : null,
    bar.hostBound ? el('span', { className: 'tag host-bound', text: bar.hostBound, title: `${bar.gpu} waits for the CPU to issue work` }) : null,
  ]);
  return [row, detail];
}

function renderChart(chart: BarChart): HTMLElement {
  const card = el('section', { className: `card chart chart-${chart.id}` }, [
    el('header', {}, [
      el('h2', { text: chart.title }),
      el('span', { className: 'hint', text: chart.better === 'lower' ? 'lower is better' : 'higher is better' }),
    ]),
  ]);
  card.appendChild(el('div', { className: 'rows' }, chart.bars.flatMap(renderBar)));
  if (chart.id === 'iteration' && chart.bars.some((b) => b.segments.length > 1)) {
    card.appendChild(legend([
      ['forward', 'forward'],
      ['backward', 'backward'],
      ['optimizer', 'optimizer'],
    ]));
  }
  if (chart.note) card.appendChild(el('p', { className: 'note', text: chart.note }));
  return card;
}

function legend(entries: [string, string][]): HTMLElement {
  return el(
    'div',
    { className: 'legend' },
    entries.map(([kind, label]) => el('span', { className: 'legend-item' }, [el('i', { className: `swatch seg-${kind}` }), document.createTextNode(label)])),
  );
}

function renderMemory(memory: MemoryBar[]): HTMLElement {
  const rows = el('div', { className: 'rows' });
  const card = el('section', { className: 'card memory' }, [
    el('header', {}, [el('h2', { text: 'Peak memory vs capacity' }), el('span', { className: 'hint', text: 'marker = GPU memory' })]),
    rows,
  ]);
  for (const m of memory) {
    const track = el('div', { className: 'track' });
    const fill = el('div', { className: `fill stacked${m.fits ? '' : ' oom'}` });
    fill.style.width = percent(m.peakFraction);
    const segmentTotal = m.segments.reduce((sum, s) => sum + s.value, 0) || 1;
    for (const segment of m.segments) {
      const part = el('div', { className: `segment seg-${segment.kind}`, title: segment.label });
      part.style.width = percent(segment.value / segmentTotal);
      fill.appendChild(part);
    }
    const marker = el('div', { className: 'capacity', title: `capacity of ${m.gpu} (${m.name})` });
    marker.style.left = percent(m.capacityFraction);
    track.append(fill, marker);
    rows.appendChild(
      el('div', { className: `bar-row${m.fits ? '' : ' oom'}` }, [
        el('span', { className: 'bar-label', text: m.gpu, title: m.name }),
        track,
        el('span', { className: `bar-value${m.fits ? '' : ' error'}`, text: m.label }),
      ]),
    );
  }
  card.appendChild(
    legend([
      ['weights', 'weights'],
      ['gradients', 'gradients'],
      ['optimizer-state', 'optimizer state'],
      ['activations', 'activations'],
      ['workspace', 'workspace'],
    ]),
  );
  return card;
}

function sortedRows(rows: LineRow[]): LineRow[] {
  const key = sortKey;
  if (key.column === 'line') return rows;
  const index = (row: LineRow) => row.cells.find((c) => c.gpu === key.gpu)?.totalMs ?? 0;
  return [...rows].sort((a, b) => index(b) - index(a));
}

function renderTable(model: ChartModel): HTMLElement {
  const headerCells: HTMLElement[] = [];
  const sortButton = (label: string, key: SortKey, active: boolean) => {
    const b = el('button', { className: `sort${active ? ' active' : ''}`, text: label, title: `Sort by ${label}` });
    b.addEventListener('click', () => {
      sortKey = key;
      render();
    });
    return b;
  };
  headerCells.push(el('th', { className: 'col-line' }, [sortButton('Line', { column: 'line' }, sortKey.column === 'line')]));
  headerCells.push(el('th', { className: 'col-ops', text: 'Operations' }));
  for (const gpu of model.gpuColumns) {
    const active = sortKey.column === 'gpu' && sortKey.gpu === gpu.gpu;
    headerCells.push(el('th', { className: 'col-gpu', title: gpu.name }, [sortButton(gpu.gpu, { column: 'gpu', gpu: gpu.gpu }, active)]));
  }
  const body = el('tbody');
  for (const row of sortedRows(model.rows)) {
    const linked = row.line >= 1 && row.file !== '';
    const tr = el('tr', {
      className: `line-row${linked ? '' : ' unlinked'}${row.hostBound ? ' host-bound' : ''}`,
      title: linked ? `Go to ${row.fileLabel}` : 'Ops outside the project’s files (library code, autograd internals)',
    });
    tr.dataset.file = row.file;
    tr.dataset.line = String(row.line);
    if (linked) {
      tr.tabIndex = 0;
      const reveal = () => vscode.postMessage({ type: 'reveal', file: row.file, line: row.line });
      tr.addEventListener('click', reveal);
      tr.addEventListener('keydown', (event) => {
        if (event.key === 'Enter' || event.key === ' ') {
          event.preventDefault();
          reveal();
        }
      });
    }
    tr.appendChild(el('td', { className: 'col-line' }, [el('span', { className: linked ? 'link' : 'muted', text: row.fileLabel })]));
    tr.appendChild(
      el('td', { className: 'col-ops', title: row.ops }, [
        el('span', { text: row.ops }),
        el('span', { className: 'count', text: ` ${row.opCount} op${row.opCount === 1 ? '' : 's'}` }),
      ]),
    );
    for (const cell of row.cells) {
      const heat = el('div', { className: 'heat' });
      heat.style.width = percent(cell.share);
      tr.appendChild(
        el('td', { className: `col-gpu${cell.hostBound ? ' host-bound' : ''}`, title: cell.title }, [
          el('div', { className: 'cell' }, [
            el('span', { className: 'time', text: cell.label }),
            cell.hostBound ? el('span', { className: 'tag host-bound', text: 'host-bound' }) : null,
            el('span', { className: 'share', text: cell.shareLabel }),
          ]),
          el('div', { className: 'heat-track' }, [heat]),
        ]),
      );
    }
    body.appendChild(tr);
  }
  return el('section', { className: 'card lines' }, [
    el('header', {}, [el('h2', { text: 'Per-line breakdown' }), el('span', { className: 'hint', text: 'click a line to open it' })]),
    el('div', { className: 'table-wrap' }, [el('table', {}, [el('thead', {}, [el('tr', {}, headerCells)]), body])]),
  ]);
}

function renderConfigurations(table: ConfigurationTable): HTMLElement {
  const head = el('tr', {}, [
    el('th', { className: 'col-figure', text: '' }),
    ...table.columns.map((c) => el('th', { className: 'col-config', text: c.label, title: c.detail })),
  ]);
  const body = el(
    'tbody',
    {},
    table.rows.map((row) =>
      el('tr', {}, [
        el('th', { className: 'col-figure', text: row.label }),
        ...row.cells.map((cell, i) => el('td', { className: `col-config${row.best === i ? ' best' : ''}`, text: cell })),
      ]),
    ),
  );
  return el('section', { className: 'card configurations' }, [
    el('header', {}, [el('h2', { text: 'Multi-GPU configurations' }), el('span', { className: 'hint', text: 'one rank each; best per row highlighted' })]),
    table.columns.length > 0 ? el('div', { className: 'table-wrap' }, [el('table', {}, [el('thead', {}, [head]), body])]) : null,
    ...table.refusals.map((r) => el('p', { className: 'warning', text: r })),
    ...table.notes.map((n) => el('p', { className: 'note', text: n })),
  ]);
}

function render(): void {
  const app = document.getElementById('app');
  if (!app) return;
  app.replaceChildren();
  if (!current) {
    app.appendChild(el('p', { className: 'placeholder', text: 'Waiting for results…' }));
    return;
  }
  const model = buildChartModel(current);
  app.dataset.state = model.state;
  app.appendChild(
    el('header', { className: 'page-header' }, [
      el('div', {}, [
        el('h1', { text: model.title }),
        el('p', { className: 'subtitle', text: model.subtitle }),
        model.tracedWith ? el('p', { className: 'subtitle traced', text: model.tracedWith }) : null,
      ]),
      el('div', { className: 'actions' }, [
        button('Pick GPUs', { type: 'pickGpus' }, 'Choose the GPUs to predict for'),
        button('Analyze now', { type: 'analyze' }, 'Run the analysis again'),
      ]),
    ]),
  );
  if (model.errorText) {
    const box = el('section', { className: 'card error-box' }, [el('h2', { text: 'The analysis failed' }), el('p', { text: model.errorText })]);
    if (model.hint) box.appendChild(el('p', { className: 'hint-text', text: model.hint }));
    const location = model.errorLocation;
    if (location) {
      const link = el('button', { className: 'link-button', text: `Go to line ${location.line}` });
      link.addEventListener('click', () => vscode.postMessage({ type: 'reveal', file: location.file, line: location.line }));
      box.appendChild(link);
    }
    app.appendChild(box);
  }
  if (model.warnings.length > 0) {
    app.appendChild(
      el('section', { className: 'warnings' }, model.warnings.map((w) => el('p', { className: 'warning', text: w }))),
    );
  }
  if (model.charts.length > 0) {
    app.appendChild(el('div', { className: 'charts' }, model.charts.map(renderChart)));
    app.appendChild(renderMemory(model.memory));
    if (model.configurations) app.appendChild(renderConfigurations(model.configurations));
    app.appendChild(renderTable(model));
  }
}

window.addEventListener('message', (event: MessageEvent<ToWebview>) => {
  const message = event.data;
  if (message && message.type === 'results') {
    current = message.results;
    const state: PanelState = { results: current };
    vscode.setState(state);
    render();
  }
});

const saved = vscode.getState() as PanelState | undefined;
if (saved?.results) {
  current = saved.results;
  render();
}
vscode.postMessage({ type: 'ready' });
