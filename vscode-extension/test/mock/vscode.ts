// A small hand-written stand-in for the `vscode` module: just the API the
// controller uses, recording calls so tests can assert on them.
/* eslint-disable @typescript-eslint/no-explicit-any */

import * as fs from 'fs';
import * as path from 'path';
import { PYTHON_EXTENSION_ID, type FakePythonExtension } from './pythonExtension';
import { CancellationTokenSource, Disposable, EventEmitter, Position, Range, Uri, type ConfigurationTarget, type Listener, type StatusBarAlignment } from './vscodeTypes';

export * from './vscodeTypes';

/** The `wavecast.*` defaults package.json declares, by name without the prefix: what VS Code returns for unset settings. */
const manifestDefaults: ReadonlyMap<string, unknown> = (() => {
  const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'package.json'), 'utf8'));
  const properties: Record<string, { default?: unknown }> = manifest.contributes.configuration.properties;
  return new Map(Object.entries(properties).map(([name, schema]) => [name.replace(/^wavecast\./, ''), schema.default]));
})();

/** A setting as VS Code reports it: the user's value, else the declared default. */
function settingValue(name: string): unknown {
  return harness.config.has(name) ? harness.config.get(name) : manifestDefaults.get(name);
}

/** The whole `wavecast` section as one object, dotted names nested ("trace.server"). */
function wavecastSection(): Record<string, unknown> {
  const section: Record<string, any> = {};
  for (const name of new Set([...manifestDefaults.keys(), ...harness.config.keys()])) {
    const parts = name.split('.');
    let node = section;
    for (const part of parts.slice(0, -1)) node = node[part] ??= {};
    node[parts.at(-1)!] = settingValue(name);
  }
  return section;
}

/** ExtensionContext.secrets: an in-memory store with the change event. */
export class FakeSecretStorage {
  readonly values = new Map<string, string>();
  private readonly changed = new EventEmitter<{ key: string }>();
  readonly onDidChange = this.changed.event;
  get(key: string): Promise<string | undefined> {
    return Promise.resolve(this.values.get(key));
  }
  store(key: string, value: string): Promise<void> {
    this.values.set(key, value);
    this.changed.fire({ key });
    return Promise.resolve();
  }
  delete(key: string): Promise<void> {
    this.values.delete(key);
    this.changed.fire({ key });
    return Promise.resolve();
  }
}

/** ExtensionContext.globalState. */
export class FakeMemento {
  readonly values = new Map<string, unknown>();
  get<T>(key: string, fallback?: T): T | undefined {
    return this.values.has(key) ? (this.values.get(key) as T) : fallback;
  }
  update(key: string, value: unknown): Promise<void> {
    this.values.set(key, value);
    return Promise.resolve();
  }
  keys(): string[] {
    return [...this.values.keys()];
  }
}

export interface Shown {
  kind: 'error' | 'warning' | 'information';
  message: string;
  actions: string[];
}

export class FakeTextDocument {
  readonly languageId: string;
  isDirty = false;
  isClosed = false;
  readonly isUntitled = false;
  version = 1;
  /** The text as last saved: what the daemon analysed. */
  readonly savedLines: readonly string[];
  constructor(
    readonly uri: Uri,
    readonly lines: string[],
    languageId = 'python',
  ) {
    this.languageId = languageId;
    this.savedLines = [...lines];
  }
  get fileName(): string {
    return this.uri.fsPath;
  }
  getText(): string {
    return this.lines.join('\n');
  }
  positionAt(offset: number): Position {
    let rest = offset;
    for (let line = 0; line < this.lines.length; line++) {
      if (rest <= this.lines[line].length) return new Position(line, rest);
      rest -= this.lines[line].length + 1;
    }
    return new Position(this.lines.length - 1, this.lines.at(-1)!.length);
  }
  get lineCount(): number {
    return this.lines.length;
  }
  lineAt(line: number) {
    const text = this.lines[line];
    return { text, range: new Range(line, 0, line, text.length) };
  }
  /** An unsaved edit replacing `deleted` lines from 0-based `line` with `inserted`, announced like VS Code does. */
  edit(line: number, deleted: number, inserted: string[]): void {
    this.lines.splice(line, deleted, ...inserted);
    this.version += 1;
    this.isDirty = true;
    const range = new Range(line, 0, line + deleted, 0);
    const text = inserted.map((l) => `${l}\n`).join('');
    harness.documentChanged.fire({ document: this, contentChanges: [{ range, rangeOffset: 0, rangeLength: 0, text }], reason: undefined });
  }
}

export class FakeTextEditor {
  decorations = new Map<unknown, any[]>();
  revealed: Range[] = [];
  selection: Range | undefined;
  /** What is on screen: the whole document unless a test scrolls. */
  visibleRanges: Range[];
  constructor(readonly document: FakeTextDocument) {
    this.visibleRanges = [new Range(0, 0, Math.max(0, document.lineCount - 1), 0)];
  }
  /** Shows lines `start`–`end` (0-based, inclusive), announced like VS Code does. */
  scrollTo(start: number, end: number): void {
    this.visibleRanges = [new Range(start, 0, end, 0)];
    harness.visibleRangesChanged.fire({ textEditor: this, visibleRanges: this.visibleRanges });
  }
  setDecorations(type: unknown, options: any[]): void {
    this.decorations.set(type, options);
  }
  revealRange(range: Range): void {
    this.revealed.push(range);
  }
}

export class FakeWebview {
  html = '';
  readonly cspSource = 'vscode-resource:';
  readonly posted: any[] = [];
  readonly received = new EventEmitter<unknown>();
  readonly onDidReceiveMessage = this.received.event;
  asWebviewUri(uri: Uri): Uri {
    return Uri.parse(`vscode-resource://${uri.fsPath}`);
  }
  postMessage(message: unknown): Promise<boolean> {
    this.posted.push(message);
    return Promise.resolve(true);
  }
}

export class FakeWebviewPanel {
  readonly webview = new FakeWebview();
  readonly disposed = new EventEmitter<void>();
  readonly onDidDispose = this.disposed.event;
  reveals = 0;
  constructor(
    readonly viewType: string,
    public title: string,
    readonly options: any,
  ) {}
  reveal(): void {
    this.reveals += 1;
  }
  dispose(): void {
    this.disposed.fire();
  }
}

/** Everything the tests script or inspect. Reset between tests. */
export const harness = {
  trusted: true,
  config: new Map<string, unknown>(),
  configUpdates: [] as { key: string; value: unknown; target: ConfigurationTarget }[],
  shown: [] as Shown[],
  /** Answer to the next notifications, by message substring; default: dismissed. */
  answers: [] as { match: string; action: string }[],
  quickPick: undefined as undefined | ((items: any[], options: any) => any),
  inputBox: undefined as undefined | ((options: any) => string | undefined),
  commands: new Map<string, (...args: any[]) => unknown>(),
  executed: [] as { id: string; args: unknown[] }[],
  statusItems: [] as any[],
  outputLines: [] as string[],
  panels: [] as FakeWebviewPanel[],
  serializers: new Map<string, { deserializeWebviewPanel(panel: unknown, state: unknown): Promise<void> }>(),
  documents: new Map<string, FakeTextDocument>(),
  shownDocuments: [] as { document: FakeTextDocument; options: any; editor: FakeTextEditor }[],
  configurationChanged: new EventEmitter<{ affectsConfiguration(section: string): boolean }>(),
  trustGranted: new EventEmitter<void>(),
  visibleEditorsChanged: new EventEmitter<FakeTextEditor[]>(),
  activeEditorChanged: new EventEmitter<FakeTextEditor | undefined>(),
  /** Documents VS Code has open (workspace.textDocuments) and their events. */
  textDocuments: [] as FakeTextDocument[],
  documentOpened: new EventEmitter<FakeTextDocument>(),
  documentSaved: new EventEmitter<FakeTextDocument>(),
  documentChanged: new EventEmitter<{ document: FakeTextDocument; contentChanges: unknown[]; reason: undefined }>(),
  visibleRangesChanged: new EventEmitter<{ textEditor: FakeTextEditor; visibleRanges: Range[] }>(),
  /** The Python extension (ms-python.python); undefined: not installed. */
  pythonExtension: undefined as FakePythonExtension | undefined,
  extensionsChanged: new EventEmitter<void>(),
  /** Providers registered through `languages`, by kind ("hover", "inlayHints", "codeLens"). */
  providers: new Map<string, any[]>(),
  diagnostics: new Map<string, any[]>(),
  /** Opens `document` like VS Code: listed in textDocuments, then the event. */
  openDocument(document: FakeTextDocument): void {
    this.textDocuments.push(document);
    this.documentOpened.fire(document);
  },
  /** Makes `editor` the active one and fires the event, like focusing it. */
  activate(editor: FakeTextEditor | undefined): void {
    window.activeTextEditor = editor;
    this.activeEditorChanged.fire(editor);
  },
  reset(): void {
    this.trusted = true;
    this.config = new Map();
    this.configUpdates = [];
    this.shown = [];
    this.answers = [];
    this.quickPick = undefined;
    this.inputBox = undefined;
    this.commands = new Map();
    this.executed = [];
    this.statusItems = [];
    this.outputLines = [];
    this.panels = [];
    this.serializers = new Map();
    this.activeEditorChanged = new EventEmitter();
    this.textDocuments = [];
    this.documentOpened = new EventEmitter();
    this.documentSaved = new EventEmitter();
    this.documentChanged = new EventEmitter();
    this.visibleRangesChanged = new EventEmitter();
    this.providers = new Map();
    this.diagnostics = new Map();
    this.documents = new Map();
    this.shownDocuments = [];
    this.configurationChanged = new EventEmitter();
    this.trustGranted = new EventEmitter();
    this.visibleEditorsChanged = new EventEmitter();
    this.pythonExtension = undefined;
    this.extensionsChanged = new EventEmitter();
    window.visibleTextEditors = [];
    window.activeTextEditor = undefined;
    workspace.workspaceFolders = [{ uri: Uri.file('/home/ada/projects/resnet'), name: 'resnet', index: 0 }];
  },
  /** Changes settings and fires the change event like VS Code does. */
  changeSettings(values: Record<string, unknown>): void {
    for (const [key, value] of Object.entries(values)) this.config.set(key, value);
    const keys = Object.keys(values).map((k) => `wavecast.${k}`);
    this.configurationChanged.fire({
      affectsConfiguration: (section: string) => keys.some((k) => k === section || k.startsWith(`${section}.`)),
    });
  },
};

function notify(kind: Shown['kind']) {
  return (message: string, ...actions: string[]): Promise<string | undefined> => {
    harness.shown.push({ kind, message, actions });
    const answer = harness.answers.find((a) => message.includes(a.match) && actions.includes(a.action));
    return Promise.resolve(answer?.action);
  };
}

export const window = {
  visibleTextEditors: [] as FakeTextEditor[],
  activeTextEditor: undefined as FakeTextEditor | undefined,
  createOutputChannel(name: string) {
    return {
      name,
      appendLine: (line: string) => harness.outputLines.push(line),
      append: (text: string) => harness.outputLines.push(text),
      show: () => harness.executed.push({ id: 'output.show', args: [name] }),
      clear: () => undefined,
      hide: () => undefined,
      replace: () => undefined,
      dispose: () => undefined,
    };
  },
  createStatusBarItem(id: string, alignment: StatusBarAlignment, priority: number) {
    const item = { id, alignment, priority, text: '', tooltip: '', name: '', command: '', backgroundColor: undefined as any, visible: false };
    Object.assign(item, { show: () => (item.visible = true), hide: () => (item.visible = false), dispose: () => undefined });
    harness.statusItems.push(item);
    return item;
  },
  createTextEditorDecorationType(options: unknown) {
    return { options, key: 'wavecast-decoration', dispose: () => undefined };
  },
  showErrorMessage: notify('error'),
  showWarningMessage: notify('warning'),
  showInformationMessage: notify('information'),
  showQuickPick(items: any[], options: any) {
    return Promise.resolve(harness.quickPick ? harness.quickPick(items, options) : undefined);
  },
  showInputBox(options: any) {
    return Promise.resolve(harness.inputBox ? harness.inputBox(options) : undefined);
  },
  withProgress<T>(options: unknown, task: (progress: unknown, token: unknown) => Promise<T>): Promise<T> {
    harness.executed.push({ id: 'withProgress', args: [options] });
    return task({ report: () => undefined }, new CancellationTokenSource().token);
  },
  createWebviewPanel(viewType: string, title: string, _column: unknown, options: unknown) {
    const panel = new FakeWebviewPanel(viewType, title, options);
    harness.panels.push(panel);
    return panel;
  },
  showTextDocument(document: FakeTextDocument, options: any) {
    const editor = new FakeTextEditor(document);
    editor.selection = options?.selection;
    harness.shownDocuments.push({ document, options, editor });
    return Promise.resolve(editor);
  },
  onDidChangeVisibleTextEditors: (listener: Listener<FakeTextEditor[]>) => harness.visibleEditorsChanged.event(listener),
  onDidChangeActiveTextEditor: (listener: Listener<FakeTextEditor | undefined>) => harness.activeEditorChanged.event(listener),
  onDidChangeTextEditorVisibleRanges: (listener: Listener<{ textEditor: FakeTextEditor; visibleRanges: Range[] }>) =>
    harness.visibleRangesChanged.event(listener),
  registerWebviewPanelSerializer(viewType: string, serializer: { deserializeWebviewPanel(panel: unknown, state: unknown): Promise<void> }) {
    harness.serializers.set(viewType, serializer);
    return new Disposable(() => harness.serializers.delete(viewType));
  },
};

export const workspace = {
  get isTrusted(): boolean {
    return harness.trusted;
  },
  workspaceFolders: [] as { uri: Uri; name: string; index: number }[] | undefined,
  getConfiguration(section?: string) {
    return {
      get: (key: string, fallback?: unknown) => {
        const name = section ? `${section}.${key}` : key;
        if (name === 'wavecast') return wavecastSection();
        const value = name.startsWith('wavecast.') ? settingValue(name.slice('wavecast.'.length)) : undefined;
        return value === undefined ? fallback : value;
      },
      update: (key: string, value: unknown, target: ConfigurationTarget) => {
        harness.configUpdates.push({ key: `${section}.${key}`, value, target });
        harness.changeSettings({ [key]: value });
        return Promise.resolve();
      },
    };
  },
  onDidChangeConfiguration: (listener: Listener<any>) => harness.configurationChanged.event(listener),
  onDidGrantWorkspaceTrust: (listener: Listener<void>) => harness.trustGranted.event(listener),
  get textDocuments(): FakeTextDocument[] {
    return harness.textDocuments;
  },
  onDidOpenTextDocument: (listener: Listener<FakeTextDocument>) => harness.documentOpened.event(listener),
  onDidSaveTextDocument: (listener: Listener<FakeTextDocument>) => harness.documentSaved.event(listener),
  onDidChangeTextDocument: (listener: Listener<{ document: FakeTextDocument; contentChanges: unknown[] }>, thisArgs?: unknown) =>
    harness.documentChanged.event(listener, thisArgs),
  onDidCloseTextDocument: (_listener: Listener<unknown>) => new Disposable(),
  onWillSaveTextDocument: (_listener: Listener<unknown>) => new Disposable(),
  onDidChangeWorkspaceFolders: (_listener: Listener<unknown>) => new Disposable(),
  openTextDocument(uri: Uri) {
    const document = harness.documents.get(uri.fsPath);
    return document ? Promise.resolve(document) : Promise.reject(new Error(`no document ${uri.fsPath}`));
  },
};

export const extensions = {
  getExtension(id: string) {
    return id === PYTHON_EXTENSION_ID ? harness.pythonExtension : undefined;
  },
  onDidChange: (listener: Listener<void>) => harness.extensionsChanged.event(listener),
};

export const commands = {
  registerCommand(id: string, run: (...args: any[]) => unknown) {
    harness.commands.set(id, run);
    return new Disposable(() => harness.commands.delete(id));
  },
  executeCommand(id: string, ...args: unknown[]) {
    harness.executed.push({ id, args });
    const run = harness.commands.get(id);
    return Promise.resolve(run ? run(...args) : undefined);
  },
};

/** Registers a provider of `kind`, kept in harness.providers for tests to call. */
function provider(kind: string) {
  return (_selector: unknown, registered: unknown) => {
    harness.providers.set(kind, [...(harness.providers.get(kind) ?? []), registered]);
    return new Disposable(() => harness.providers.set(kind, (harness.providers.get(kind) ?? []).filter((p) => p !== registered)));
  };
}

export const languages = {
  /** Scores a document against a selector of `{ scheme, language }` filters like VS Code (any match: 10). */
  match(selector: { scheme?: string; language?: string }[], document: FakeTextDocument): number {
    const matches = selector.some(
      (filter) => (!filter.scheme || filter.scheme === document.uri.scheme) && (!filter.language || filter.language === document.languageId),
    );
    return matches ? 10 : 0;
  },
  registerHoverProvider: provider('hover'),
  registerInlayHintsProvider: provider('inlayHints'),
  registerCodeLensProvider: provider('codeLens'),
  createDiagnosticCollection(name: string) {
    return {
      name,
      set: (uri: Uri, diagnostics: any[] | undefined) => harness.diagnostics.set(uri.toString(), diagnostics ?? []),
      delete: (uri: Uri) => harness.diagnostics.delete(uri.toString()),
      clear: () => harness.diagnostics.clear(),
      forEach: () => undefined,
      get: (uri: Uri) => harness.diagnostics.get(uri.toString()),
      has: (uri: Uri) => harness.diagnostics.has(uri.toString()),
      dispose: () => undefined,
    };
  },
};

export const env = { appName: 'wavecast tests', language: 'en', machineId: 'test', sessionId: 'test' };
export const version = '1.91.0';
