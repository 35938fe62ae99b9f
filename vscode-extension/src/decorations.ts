// End-of-line per-line times when wavecast.display is `decorations`: the
// daemon's inlay hints, asked for through the language client and drawn as
// decorations where the daemon placed them (so unsaved edits move them as
// they move the hints). The hover is the daemon's own, through the client.
import * as vscode from 'vscode';
import type { WavecastApi } from './logic/api';
import { hintLabels, hintRange, LatestRequests } from './logic/lineHints';

/** Typing and scrolling redraw once they pause for this long. */
const REDRAW_DELAY_MS = 200;

export interface LineDecoratorHost {
  /** The daemon's API while decorations are shown (daemon running, display `decorations`); null clears them. */
  api(): WavecastApi | null;
  log(message: string): void;
}

export class LineDecorator implements vscode.Disposable {
  private readonly type = vscode.window.createTextEditorDecorationType({
    after: { margin: '0 0 0 2em', color: new vscode.ThemeColor('editorCodeLens.foreground'), fontStyle: 'italic' },
    rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
  });
  private readonly requests = new LatestRequests<vscode.TextEditor>();
  private readonly delayed = new Map<vscode.TextEditor, ReturnType<typeof setTimeout>>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(private readonly host: LineDecoratorHost) {
    this.subscriptions = [
      vscode.window.onDidChangeVisibleTextEditors((editors) => editors.forEach((editor) => void this.redraw(editor))),
      vscode.window.onDidChangeTextEditorVisibleRanges((event) => this.redrawSoon(event.textEditor)),
      vscode.workspace.onDidChangeTextDocument((event) => this.editorsOf(event.document.uri.toString()).forEach((e) => this.redrawSoon(e))),
    ];
  }

  /** Every visible editor: the daemon started, or the display mode changed. */
  async redrawAll(): Promise<void> {
    await Promise.all(vscode.window.visibleTextEditors.map((editor) => this.redraw(editor)));
  }

  /** The daemon's results for `uri` changed. */
  async resultsChanged(uri: string): Promise<void> {
    await Promise.all(this.editorsOf(uri).map((editor) => this.redraw(editor)));
  }

  async redraw(editor: vscode.TextEditor): Promise<void> {
    this.cancelDelayed(editor);
    const document = editor.document;
    if (document.languageId !== 'python') return;
    const request = this.requests.begin(editor);
    const api = this.host.api();
    if (!api) {
      editor.setDecorations(this.type, []);
      return;
    }
    const version = document.version;
    const visible = editor.visibleRanges.map((range) => ({ start: range.start.line, end: range.end.line }));
    let hints;
    try {
      hints = await api.inlayHints(document.uri.toString(), hintRange(visible, document.lineCount));
    } catch (error) {
      this.host.log(`textDocument/inlayHint failed: ${error instanceof Error ? error.message : String(error)}`);
      return;
    }
    // A newer request draws instead; an edit since this one schedules it.
    if (!this.requests.isLatest(editor, request) || document.version !== version) return;
    const options = hintLabels(hints, document.lineCount).map((label): vscode.DecorationOptions => {
      const end = document.lineAt(label.line).range.end;
      return { range: new vscode.Range(end, end), renderOptions: { after: { contentText: label.text } } };
    });
    editor.setDecorations(this.type, options);
  }

  private redrawSoon(editor: vscode.TextEditor): void {
    this.cancelDelayed(editor);
    const timer = setTimeout(() => {
      this.delayed.delete(editor);
      void this.redraw(editor);
    }, REDRAW_DELAY_MS);
    this.delayed.set(editor, timer);
  }

  private cancelDelayed(editor: vscode.TextEditor): void {
    clearTimeout(this.delayed.get(editor));
    this.delayed.delete(editor);
  }

  private editorsOf(uri: string): readonly vscode.TextEditor[] {
    return vscode.window.visibleTextEditors.filter((editor) => editor.document.uri.toString() === uri);
  }

  dispose(): void {
    [...this.delayed.keys()].forEach((editor) => this.cancelDelayed(editor));
    this.subscriptions.splice(0).forEach((d) => d.dispose());
    this.type.dispose();
  }
}
