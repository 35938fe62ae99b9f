// A small hand-written stand-in for the `vscode` module: just the API the
// controller uses, recording calls so tests can assert on them.
/* eslint-disable @typescript-eslint/no-explicit-any */

type Listener<T> = (value: T) => unknown;

export class EventEmitter<T> {
  private listeners: Listener<T>[] = [];
  event = (listener: Listener<T>) => {
    this.listeners.push(listener);
    return { dispose: () => (this.listeners = this.listeners.filter((l) => l !== listener)) };
  };
  fire(value: T): void {
    for (const listener of [...this.listeners]) listener(value);
  }
  dispose(): void {
    this.listeners = [];
  }
}

export class Disposable {
  constructor(private readonly onDispose: () => void = () => undefined) {}
  dispose(): void {
    this.onDispose();
  }
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly fsPath: string,
  ) {}
  static file(path: string): Uri {
    return new Uri('file', path);
  }
  static parse(text: string): Uri {
    const match = /^([a-z-]+):\/\/(.*)$/.exec(text);
    return match ? new Uri(match[1], decodeURIComponent(match[2])) : new Uri('file', text);
  }
  static joinPath(base: Uri, ...parts: string[]): Uri {
    return new Uri(base.scheme, [base.fsPath, ...parts].join('/'));
  }
  get path(): string {
    return this.fsPath;
  }
  toString(): string {
    return `${this.scheme}://${this.fsPath}`;
  }
}

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(a: Position | number, b: Position | number, c?: number, d?: number) {
    if (typeof a === 'number') {
      this.start = new Position(a, b as number);
      this.end = new Position(c as number, d as number);
    } else {
      this.start = a;
      this.end = b as Position;
    }
  }
}

export class ThemeColor {
  constructor(readonly id: string) {}
}

export class MarkdownString {
  constructor(readonly value: string) {}
}

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}
export enum ConfigurationTarget {
  Global = 1,
  Workspace = 2,
  WorkspaceFolder = 3,
}
export enum DecorationRangeBehavior {
  OpenOpen = 0,
  ClosedClosed = 1,
}
export enum ProgressLocation {
  SourceControl = 1,
  Window = 10,
  Notification = 15,
}
export enum ViewColumn {
  Active = -1,
  Beside = -2,
  One = 1,
}
export enum ExtensionMode {
  Production = 1,
  Development = 2,
  Test = 3,
}
export enum TextEditorRevealType {
  Default = 0,
  InCenter = 1,
  InCenterIfOutsideViewport = 2,
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
  constructor(
    readonly uri: Uri,
    readonly lines: string[],
    languageId = 'python',
  ) {
    this.languageId = languageId;
  }
  get lineCount(): number {
    return this.lines.length;
  }
  lineAt(line: number) {
    const text = this.lines[line];
    return { text, range: new Range(line, 0, line, text.length) };
  }
}

export class FakeTextEditor {
  decorations = new Map<unknown, any[]>();
  revealed: Range[] = [];
  selection: Range | undefined;
  constructor(readonly document: FakeTextDocument) {}
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
    this.documents = new Map();
    this.shownDocuments = [];
    this.configurationChanged = new EventEmitter();
    this.trustGranted = new EventEmitter();
    this.visibleEditorsChanged = new EventEmitter();
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
  withProgress<T>(options: unknown, task: (progress: unknown) => Promise<T>): Promise<T> {
    harness.executed.push({ id: 'withProgress', args: [options] });
    return task({ report: () => undefined });
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
  getConfiguration(section: string) {
    return {
      get: (key: string, fallback?: unknown) => {
        const value = harness.config.get(key);
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
  openTextDocument(uri: Uri) {
    const document = harness.documents.get(uri.fsPath);
    return document ? Promise.resolve(document) : Promise.reject(new Error(`no document ${uri.fsPath}`));
  },
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
