// The results webview: one panel showing the file last asked for.
import * as vscode from 'vscode';
import { baseName } from './logic/chartData';
import type { Results } from './logic/protocol';
import { renderWebviewHtml } from './logic/webviewHtml';
import { parseFromWebview, type ToWebview } from './logic/webviewMessages';

/** The panel's view type; VS Code restores panels of this type through the serializer. */
export const RESULTS_VIEW_TYPE = 'wavecast.results';

function titleFor(uri: string): string {
  return `wavecast: ${baseName(vscode.Uri.parse(uri).fsPath)}`;
}

export interface ResultsPanelHandlers {
  reveal(file: string, line: number): void;
  analyze(uri: string): void;
  pickGpus(): void;
}

export class ResultsPanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private shownUri: string | undefined;
  private latest: Results | undefined;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly handlers: ResultsPanelHandlers,
  ) {}

  /** The document the panel shows, while it is open. */
  get uri(): string | undefined {
    return this.panel ? this.shownUri : undefined;
  }

  show(uri: string): void {
    if (this.shownUri !== uri) this.latest = undefined;
    this.shownUri = uri;
    if (this.panel) {
      this.panel.title = titleFor(uri);
      this.panel.reveal(undefined, true);
      return;
    }
    const panel = vscode.window.createWebviewPanel(
      RESULTS_VIEW_TYPE,
      titleFor(uri),
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
      this.webviewOptions(),
    );
    this.attach(panel);
  }

  /** Takes over a panel VS Code restored after a reload; it shows `uri` again. */
  restore(panel: vscode.WebviewPanel, uri: string): void {
    this.panel?.dispose();
    this.shownUri = uri;
    this.latest = undefined;
    panel.title = titleFor(uri);
    // The restored webview keeps its state but not its options.
    panel.webview.options = this.webviewOptions();
    this.attach(panel);
  }

  private webviewOptions(): vscode.WebviewPanelOptions & vscode.WebviewOptions {
    return { enableScripts: true, localResourceRoots: [this.dist(), this.media()], enableFindWidget: true };
  }

  private dist(): vscode.Uri {
    return vscode.Uri.joinPath(this.extensionUri, 'dist');
  }

  private media(): vscode.Uri {
    return vscode.Uri.joinPath(this.extensionUri, 'media');
  }

  private attach(panel: vscode.WebviewPanel): void {
    panel.webview.html = renderWebviewHtml({
      cspSource: panel.webview.cspSource,
      scriptUri: panel.webview.asWebviewUri(vscode.Uri.joinPath(this.dist(), 'webview.js')).toString(),
      styleUri: panel.webview.asWebviewUri(vscode.Uri.joinPath(this.media(), 'results.css')).toString(),
      title: panel.title,
    });
    panel.webview.onDidReceiveMessage((raw) => this.onMessage(raw));
    panel.onDidDispose(() => {
      if (this.panel !== panel) return;
      this.panel = undefined;
      this.latest = undefined;
    });
    this.panel = panel;
  }

  /** Shows `results` if they belong to the open panel's document. */
  update(results: Results): void {
    if (!this.panel || results.uri !== this.shownUri) return;
    this.latest = results;
    const message: ToWebview = { type: 'results', results };
    void this.panel.webview.postMessage(message);
  }

  private onMessage(raw: unknown): void {
    const message = parseFromWebview(raw);
    if (!message) return;
    switch (message.type) {
      case 'ready':
        if (this.latest) this.update(this.latest);
        break;
      case 'reveal':
        this.handlers.reveal(message.file, message.line);
        break;
      case 'analyze':
        if (this.shownUri) this.handlers.analyze(this.shownUri);
        break;
      case 'pickGpus':
        this.handlers.pickGpus();
        break;
    }
  }

  dispose(): void {
    this.panel?.dispose();
  }
}
