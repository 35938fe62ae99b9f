// Follows the interpreter selected in the Python extension (ms-python.python)
// through its environments API. Without that extension nothing happens: the
// worker keeps wavecast.pythonEnv or the daemon's default.
import { PVSC_EXTENSION_ID, PythonExtension, type ResolvedEnvironment } from '@vscode/python-extension';
import * as vscode from 'vscode';
import { selectedInterpreter, type InterpreterReport, type SelectedInterpreter } from './logic/pythonEnvironment';

type EnvironmentsApi = PythonExtension['environments'];

export class PythonInterpreterWatcher implements vscode.Disposable {
  private environments: EnvironmentsApi | null = null;
  private connecting: Promise<void> | null = null;
  private selected: SelectedInterpreter | null = null;
  /** Counts reads, so a slow resolve never overwrites a newer selection. */
  private reads = 0;
  private readonly changed = new vscode.EventEmitter<SelectedInterpreter | null>();
  private readonly subscriptions: vscode.Disposable[] = [this.changed];
  /** Fires when the selected interpreter's path changes (null: none known). */
  readonly onDidChange = this.changed.event;

  constructor(private readonly log: (message: string) => void) {
    // The Python extension installed or enabled while this one runs.
    this.subscriptions.push(vscode.extensions.onDidChange(() => void this.connect()));
  }

  /** The interpreter selected for the first workspace folder, once known. */
  get current(): SelectedInterpreter | null {
    return this.selected;
  }

  /** Connects to the Python extension if it is installed (activating it) and reads its selection. */
  connect(): Promise<void> {
    if (this.environments) return Promise.resolve();
    this.connecting ??= this.connectOnce().finally(() => (this.connecting = null));
    return this.connecting;
  }

  private async connectOnce(): Promise<void> {
    if (!vscode.extensions.getExtension(PVSC_EXTENSION_ID)) return;
    let environments: EnvironmentsApi | undefined;
    try {
      environments = (await PythonExtension.api()).environments;
    } catch (error) {
      this.log(`The Python extension did not start (${error instanceof Error ? error.message : String(error)}); using wavecast.pythonEnv or the daemon's default.`);
      return;
    }
    if (!environments?.getActiveEnvironmentPath) {
      this.log("This Python extension has no environments API; update it to have wavecast follow its interpreter.");
      return;
    }
    this.environments = environments;
    this.subscriptions.push(
      environments.onDidChangeActiveEnvironmentPath((event) => {
        const first = this.folder();
        if (event.resource && first && event.resource.uri.toString() !== first.uri.toString()) return;
        void this.read();
      }),
    );
    await this.read();
  }

  /** One daemon serves every folder, so the first folder's interpreter is the one it gets. */
  private folder(): vscode.WorkspaceFolder | undefined {
    return vscode.workspace.workspaceFolders?.[0];
  }

  private async read(): Promise<void> {
    const environments = this.environments;
    if (!environments) return;
    const read = ++this.reads;
    let next: SelectedInterpreter | null = null;
    try {
      const active = environments.getActiveEnvironmentPath(this.folder());
      const resolved = await environments.resolveEnvironment(active);
      if (read !== this.reads) return;
      next = active.path ? selectedInterpreter(interpreterReport(active.path, resolved)) : null;
    } catch (error) {
      if (read !== this.reads) return;
      this.log(`Reading the Python extension's interpreter failed: ${error instanceof Error ? error.message : String(error)}.`);
    }
    if (next?.path === this.selected?.path) return;
    this.selected = next;
    this.changed.fire(next);
  }

  dispose(): void {
    this.subscriptions.splice(0).forEach((d) => d.dispose());
  }
}

function interpreterReport(activePath: string, resolved: ResolvedEnvironment | undefined): InterpreterReport {
  return {
    activePath,
    executable: resolved?.executable.uri?.fsPath,
    folder: resolved?.environment?.folderUri.fsPath,
    environmentType: resolved?.environment?.type,
    version: resolved?.version ? { major: resolved.version.major, minor: resolved.version.minor, micro: resolved.version.micro } : undefined,
  };
}
