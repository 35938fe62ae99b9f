// What wavecast tells the user in notifications, and what the button they
// choose runs.
import * as vscode from 'vscode';

/** The buttons wavecast's notifications offer. */
export const Action = {
  openSettings: 'Open Settings',
  restartServer: 'Restart Server',
  openServerLog: 'Open Server Log',
  manageTrust: 'Manage Workspace Trust',
  showResults: 'Show Results',
} as const;
export type Action = (typeof Action)[keyof typeof Action];

/** What the buttons need from the controller. */
export interface ActionHandlers {
  restartServer(): Promise<void>;
  openServerLog(): void;
  showResults(): Promise<void>;
}

export class Notifier {
  constructor(private readonly handlers: ActionHandlers) {}

  error(message: string, ...actions: Action[]): Promise<void> {
    return this.offer(vscode.window.showErrorMessage<Action>(message, ...actions));
  }

  warning(message: string, ...actions: Action[]): Promise<void> {
    return this.offer(vscode.window.showWarningMessage<Action>(message, ...actions));
  }

  information(message: string, ...actions: Action[]): Promise<void> {
    return this.offer(vscode.window.showInformationMessage<Action>(message, ...actions));
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
      case undefined:
        break;
    }
  }
}
