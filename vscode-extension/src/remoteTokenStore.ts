// The remote daemon's token in VS Code's secret storage, the commands that
// set and clear it, and the one-time move of a token from settings.json.
import * as vscode from 'vscode';
import { planTokenMigration, REMOTE_TOKEN_SECRET, TOKEN_MIGRATED_STATE } from './logic/remoteToken';

export class RemoteTokenStore {
  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly log: (message: string) => void,
  ) {}

  /** The stored token, after moving `settingsToken` (the deprecated setting) here if it was never moved. */
  async token(settingsToken: string | null): Promise<string | null> {
    const stored = (await this.context.secrets.get(REMOTE_TOKEN_SECRET)) || null;
    const plan = planTokenMigration(settingsToken, stored, this.context.globalState.get<boolean>(TOKEN_MIGRATED_STATE) === true);
    if (plan.log) this.log(plan.log);
    if (plan.store) await this.context.secrets.store(REMOTE_TOKEN_SECRET, plan.store);
    if (plan.notice) {
      await this.context.globalState.update(TOKEN_MIGRATED_STATE, true);
      void vscode.window.showInformationMessage(plan.notice, 'Open Settings').then((choice) => {
        if (choice) void vscode.commands.executeCommand('workbench.action.openSettings', 'wavecast.remoteToken');
      });
    }
    return plan.store ?? stored;
  }

  /** Asks for the token; an empty answer clears it. */
  async set(): Promise<void> {
    const input = await vscode.window.showInputBox({
      title: 'wavecast: remote token',
      prompt: 'The token `wavecast serve --listen` printed (or the first line of its --token-file). Empty clears it.',
      password: true,
      ignoreFocusOut: true,
    });
    if (input === undefined) return;
    if (input.trim() === '') await this.clear();
    else await this.context.secrets.store(REMOTE_TOKEN_SECRET, input.trim());
  }

  async clear(): Promise<void> {
    await this.context.secrets.delete(REMOTE_TOKEN_SECRET);
  }

  onDidChange(listener: () => void): vscode.Disposable {
    return this.context.secrets.onDidChange((event) => event.key === REMOTE_TOKEN_SECRET && listener());
  }
}
