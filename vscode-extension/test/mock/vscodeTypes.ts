// The value types and enums of the `vscode` API that the extension and
// vscode-languageclient construct (the latter extends several at load time).
// Plain data holders: the real ones' behaviour beyond that is not needed.
/* eslint-disable @typescript-eslint/no-explicit-any */

export type Listener<T> = (value: T) => unknown;

export class EventEmitter<T> {
  private listeners: Listener<T>[] = [];
  /** As vscode's Event: `thisArgs` binds the listener, `disposables` collects the subscription. */
  event = (listener: Listener<T>, thisArgs?: unknown, disposables?: { dispose(): void }[]) => {
    const bound: Listener<T> = thisArgs === undefined ? listener : listener.bind(thisArgs);
    this.listeners.push(bound);
    const subscription = { dispose: () => (this.listeners = this.listeners.filter((l) => l !== bound)) };
    disposables?.push(subscription);
    return subscription;
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


export class Location {
  constructor(
    readonly uri: Uri,
    readonly range: Range,
  ) {}
}

export class Selection extends Range {}

export class Command {}

export class Hover {
  constructor(
    readonly contents: MarkdownString | MarkdownString[],
    readonly range?: Range,
  ) {}
}

export class InlayHintLabelPart {
  tooltip?: string | MarkdownString;
  location?: Location;
  command?: unknown;
  constructor(readonly value: string) {}
}

export enum InlayHintKind {
  Type = 1,
  Parameter = 2,
}

export class InlayHint {
  tooltip?: string | MarkdownString;
  paddingLeft?: boolean;
  paddingRight?: boolean;
  textEdits?: unknown[];
  constructor(
    readonly position: Position,
    public label: string | InlayHintLabelPart[],
    public kind?: InlayHintKind,
  ) {}
}

export class CodeLens {
  constructor(
    readonly range: Range,
    public command?: { title: string; command: string; arguments?: unknown[] },
  ) {}
  get isResolved(): boolean {
    return this.command !== undefined;
  }
}

export enum DiagnosticSeverity {
  Error = 0,
  Warning = 1,
  Information = 2,
  Hint = 3,
}
export enum DiagnosticTag {
  Unnecessary = 1,
  Deprecated = 2,
}

export class Diagnostic {
  source?: string;
  code?: unknown;
  tags?: DiagnosticTag[];
  relatedInformation?: DiagnosticRelatedInformation[];
  constructor(
    readonly range: Range,
    readonly message: string,
    readonly severity: DiagnosticSeverity = DiagnosticSeverity.Error,
  ) {}
}

export class DiagnosticRelatedInformation {
  constructor(
    readonly location: Location,
    readonly message: string,
  ) {}
}

export class TextEdit {
  constructor(
    readonly range: Range,
    readonly newText: string,
  ) {}
}

export class CancellationError extends Error {}

export class CancellationTokenSource {
  private readonly cancelled = new EventEmitter<void>();
  readonly token = { isCancellationRequested: false, onCancellationRequested: this.cancelled.event };
  cancel(): void {
    this.token.isCancellationRequested = true;
    this.cancelled.fire();
  }
  dispose(): void {
    this.cancelled.dispose();
  }
}

export class RelativePattern {
  constructor(
    readonly base: unknown,
    readonly pattern: string,
  ) {}
}

/** Only extended by vscode-languageclient's protocol types; never built for this daemon. */
export class CompletionItem {}
export class CodeAction {}
/** vscode-languageclient maps the protocol's kinds to these when it is created. */
export class CodeActionKind {
  private constructor(readonly value: string) {}
  static readonly Empty = new CodeActionKind('');
  static readonly QuickFix = new CodeActionKind('quickfix');
  static readonly Refactor = new CodeActionKind('refactor');
  static readonly RefactorExtract = new CodeActionKind('refactor.extract');
  static readonly RefactorInline = new CodeActionKind('refactor.inline');
  static readonly RefactorRewrite = new CodeActionKind('refactor.rewrite');
  static readonly Source = new CodeActionKind('source');
  static readonly SourceOrganizeImports = new CodeActionKind('source.organizeImports');
}
export class DocumentLink {}
export class SymbolInformation {}
export class CallHierarchyItem {}
export class TypeHierarchyItem {}

export enum TextDocumentSaveReason {
  Manual = 1,
  AfterDelay = 2,
  FocusOut = 3,
}

export enum QuickPickItemKind {
  Separator = -1,
  Default = 0,
}
