// The results webview: one panel showing the file last asked for.
import * as vscode from 'vscode';
import { baseName } from './logic/chartData';
import type { ResultsResponse } from './logic/protocol';
import { renderWebviewHtml } from './logic/webviewHtml';
import { parseFromWebview, type ToWebview } from './logic/webviewMessages';

export interface ResultsPanelHandlers {
  reveal(file: string, line: number): void;
  analyze(uri: string): void;
  pickGpus(): void;
}

export class ResultsPanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private shownUri: string | undefined;
  private latest: ResultsResponse | undefined;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly handlers: ResultsPanelHandlers,
  ) {}

  /** The document the panel shows, while it is open. */
  get uri(): string | undefined {
    return this.panel ? this.shownUri : undefined;
  }

  show(uri: string): void {
    const title = `wavecast: ${baseName(vscode.Uri.parse(uri).fsPath)}`;
    if (this.shownUri !== uri) this.latest = undefined;
    this.shownUri = uri;
    if (this.panel) {
      this.panel.title = title;
      this.panel.reveal(undefined, true);
      return;
    }
    const dist = vscode.Uri.joinPath(this.extensionUri, 'dist');
    const media = vscode.Uri.joinPath(this.extensionUri, 'media');
    const panel = vscode.window.createWebviewPanel(
      'wavecast.results',
      title,
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
      { enableScripts: true, localResourceRoots: [dist, media], enableFindWidget: true },
    );
    panel.webview.html = renderWebviewHtml({
      cspSource: panel.webview.cspSource,
      scriptUri: panel.webview.asWebviewUri(vscode.Uri.joinPath(dist, 'webview.js')).toString(),
      styleUri: panel.webview.asWebviewUri(vscode.Uri.joinPath(media, 'results.css')).toString(),
      title,
    });
    panel.webview.onDidReceiveMessage((raw) => this.onMessage(raw));
    panel.onDidDispose(() => {
      this.panel = undefined;
      this.latest = undefined;
    });
    this.panel = panel;
  }

  /** Shows `results` if they belong to the open panel's document. */
  update(results: ResultsResponse): void {
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
