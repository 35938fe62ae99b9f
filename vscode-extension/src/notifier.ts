// What wavecast tells the user in notifications, and what the button they
// choose runs. Settings problems are told once per wrong value.
import * as vscode from 'vscode';
import { SettingsProblemMemory } from './logic/settings';

/** The buttons wavecast's notifications offer. */
export const Action = {
  openSettings: 'Open Settings',
  restartServer: 'Restart Server',
  openServerLog: 'Open Server Log',
  manageTrust: 'Manage Workspace Trust',
  showResults: 'Show Results',
  setRemoteToken: 'Set Remote Token',
  openInstallInstructions: 'Open Install Instructions',
} as const;
export type Action = (typeof Action)[keyof typeof Action];

/** What the buttons need from the controller. */
export interface ActionHandlers {
  restartServer(): Promise<void>;
  openServerLog(): void;
  showResults(): Promise<void>;
  setRemoteToken(): Promise<void>;
  /** The extension's README, whose sections say how to install or reach the daemon. */
  openInstallInstructions(): Promise<void>;
}

/**
 * Where a settings problem was found: the extension reads every value;
 * the daemon alone knows its GPUs (wavecast.targets).
 */
export type SettingsProblemSource = 'extension' | 'daemon';

export class Notifier {
  private readonly problems = new Map<SettingsProblemSource, SettingsProblemMemory>([
    ['extension', new SettingsProblemMemory()],
    ['daemon', new SettingsProblemMemory()],
  ]);

  constructor(
    private readonly handlers: ActionHandlers,
    private readonly log: (message: string) => void,
  ) {}

  error(message: string, ...actions: Action[]): Promise<void> {
    return this.offer(vscode.window.showErrorMessage<Action>(message, ...actions));
  }

  warning(message: string, ...actions: Action[]): Promise<void> {
    return this.offer(vscode.window.showWarningMessage<Action>(message, ...actions));
  }

  information(message: string, ...actions: Action[]): Promise<void> {
    return this.offer(vscode.window.showInformationMessage<Action>(message, ...actions));
  }

  /**
   * The current problems from `source`, each logged and shown (with Open
   * Settings) the first time it appears; the rest of the settings apply.
   */
  settingsProblems(source: SettingsProblemSource, current: readonly string[]): void {
    const fresh = this.problems.get(source)!.unreported(current);
    if (fresh.length === 0) return;
    for (const problem of fresh) this.log(`settings: ${problem}`);
    void this.warning(fresh.join(' '), Action.openSettings);
  }

  /** Runs the button the user chose on a notification. */
  private async offer(choice: Thenable<Action | undefined>): Promise<void> {
    switch (await choice) {
      case Action.openSettings:
        await vscode.commands.executeCommand('workbench.action.openSettings', 'wavecast');
        break;
      case Action.restartServer:
        await this.handlers.restartServer();
        break;
      case Action.openServerLog:
        this.handlers.openServerLog();
        break;
      case Action.manageTrust:
        await vscode.commands.executeCommand('workbench.trust.manage');
        break;
      case Action.showResults:
        await this.handlers.showResults();
        break;
      case Action.setRemoteToken:
        await this.handlers.setRemoteToken();
        break;
      case Action.openInstallInstructions:
        await this.handlers.openInstallInstructions();
        break;
      case undefined:
        break;
    }
  }
}
