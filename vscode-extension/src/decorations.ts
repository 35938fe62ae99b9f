// End-of-line per-line times, drawn by the extension when wavecast.display
// is `decorations` (otherwise the daemon's inlay hints show them).
import * as vscode from 'vscode';
import { lineDecorations } from './logic/annotations';
import type { ResultsResponse } from './logic/protocol';

export class LineDecorator implements vscode.Disposable {
  private readonly type = vscode.window.createTextEditorDecorationType({
    after: { margin: '0 0 0 2em', color: new vscode.ThemeColor('editorCodeLens.foreground'), fontStyle: 'italic' },
    rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
  });

  /** Draws `results` on `editor`, or clears it when there is no prediction. */
  draw(editor: vscode.TextEditor, results: ResultsResponse | null): void {
    if (!results?.prediction) {
      editor.setDecorations(this.type, []);
      return;
    }
    const document = editor.document;
    const options: vscode.DecorationOptions[] = lineDecorations(results.prediction, document.uri.fsPath)
      .filter((d) => d.line >= 1 && d.line <= document.lineCount)
      .map((d) => {
        const end = document.lineAt(d.line - 1).range.end;
        return {
          range: new vscode.Range(end, end),
          hoverMessage: new vscode.MarkdownString(d.hover),
          renderOptions: { after: { contentText: d.text } },
        };
      });
    editor.setDecorations(this.type, options);
  }

  dispose(): void {
    this.type.dispose();
  }
}
