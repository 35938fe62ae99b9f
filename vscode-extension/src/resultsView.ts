// The results panel: the controller hands it results and the running
// daemon's API; this fetches what the open panel shows and follows its
// line links into the editor.
import * as vscode from 'vscode';
import type { WavecastApi } from './logic/api';
import type { Results } from './logic/protocol';
import { restoredUri } from './logic/webviewMessages';
import { ResultsPanel } from './resultsPanel';

export interface ResultsViewHost {
  /** The daemon's API; null while there is no client. */
  api(): WavecastApi | null;
  /** Whether the daemon has finished starting. */
  running(): boolean;
  log(message: string): void;
  /** The panel's buttons. */
  analyze(uri: string): void;
  pickGpus(): void;
}

export class ResultsView implements vscode.Disposable {
  private readonly panel: ResultsPanel;

  constructor(
    extensionUri: vscode.Uri,
    private readonly host: ResultsViewHost,
  ) {
    this.panel = new ResultsPanel(extensionUri, {
      reveal: (file, line) => void this.reveal(file, line),
      analyze: (uri) => host.analyze(uri),
      pickGpus: () => host.pickGpus(),
    });
  }

  /** The document the open panel shows. */
  get panelUri(): string | undefined {
    return this.panel.uri;
  }

  /** New results of one document, shown if the panel shows that document. */
  show(results: Results): void {
    this.panel.update(results);
  }

  async openPanel(api: WavecastApi, uri: string): Promise<void> {
    this.panel.show(uri);
    this.panel.update(await api.results(uri));
  }


  /** VS Code restores the results panel after a reload; it is filled once the daemon runs. */
  async restorePanel(panel: vscode.WebviewPanel, state: unknown): Promise<void> {
    const uri = restoredUri(state);
    if (!uri) {
      panel.dispose();
      return;
    }
    this.panel.restore(panel, uri);
    const api = this.host.api();
    if (api && this.host.running()) await this.refreshRestoredPanel(api);
  }

  async refreshRestoredPanel(api: WavecastApi): Promise<void> {
    const uri = this.panel.uri;
    if (!uri) return;
    try {
      const results = await api.results(uri);
      // A fresh daemon knows nothing yet: keep what the panel saved until it does.
      if (results.state !== 'none') this.panel.update(results);
    } catch (error) {
      this.logFailure(error);
    }
  }

  private async reveal(file: string, line: number): Promise<void> {
    const document = await vscode.workspace.openTextDocument(vscode.Uri.file(file));
    const position = new vscode.Position(Math.max(0, line - 1), 0);
    const editor = await vscode.window.showTextDocument(document, {
      viewColumn: vscode.ViewColumn.One,
      selection: new vscode.Range(position, position),
    });
    editor.revealRange(new vscode.Range(position, position), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  }

  private logFailure(error: unknown): void {
    this.host.log(`wavecast/results failed: ${error instanceof Error ? error.message : String(error)}`);
  }

  dispose(): void {
    this.panel.dispose();
  }
}
