// The status bar item: shown only while a Python editor is active, since
// wavecast has nothing to say about other files.
import * as vscode from 'vscode';
import type { StatusView } from './logic/annotations';

function isPythonEditor(editor: vscode.TextEditor | undefined): boolean {
  return editor?.document.languageId === 'python';
}

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor() {
    this.item = vscode.window.createStatusBarItem('wavecast.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'wavecast';
    this.item.command = 'wavecast.pickGpus';
    this.subscriptions.push(this.item, vscode.window.onDidChangeActiveTextEditor((editor) => this.follow(editor)));
    this.follow(vscode.window.activeTextEditor);
  }

  show(view: StatusView): void {
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.backgroundColor =
      view.severity === 'error'
        ? new vscode.ThemeColor('statusBarItem.errorBackground')
        : view.severity === 'warning'
          ? new vscode.ThemeColor('statusBarItem.warningBackground')
          : undefined;
  }

  private follow(editor: vscode.TextEditor | undefined): void {
    if (isPythonEditor(editor)) this.item.show();
    else this.item.hide();
  }

  dispose(): void {
    this.subscriptions.splice(0).forEach((d) => d.dispose());
  }
}
