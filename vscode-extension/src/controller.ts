// The extension's adapter between VS Code and the daemon: starts the
// language client, owns the status bar, commands, decorations and the results
// panel. Decisions live in ./logic; this file only wires them to `vscode`.
import * as vscode from 'vscode';
import { daemonConnection, isExecutableFile } from './daemonConnection';
import { iterationTimes, statusView, type ClientPhase } from './logic/annotations';
import { WavecastApi } from './logic/api';
import { baseName } from './logic/chartData';
import { DaemonLifecycle, type Failure, type FailureRemedy, type LaunchId } from './logic/daemonLifecycle';
import { isInvalidParamsError, notRunningMessage, requestFailureMessage } from './logic/errors';
import { tracedWith } from './logic/presentation';
import type { ResultsChangedParams, Results, StatusParams } from './logic/protocol';
import { RestartPolicy, type RestartDecision } from './logic/restartPolicy';
import { describeWorkerEnvironment, workerEnvironment, type WorkerEnvironment } from './logic/pythonEnvironment';
import { initializeTimeoutMessage, withTimeout } from './logic/startup';
import {
  daemonSettings,
  initializationOptions,
  launchScripts,
  type LaunchScripts,
  readSettings,
  RESTART_SETTINGS,
  SETTING_NAMES,
  type WavecastSettings,
} from './logic/settings';
import { LineDecorator } from './decorations';
import { Action, Notifier } from './notifier';
import { PythonInterpreterWatcher } from './pythonInterpreter';
import { RemoteTokenStore } from './remoteTokenStore';
import { compileChoices, type ModelFacts } from './logic/picker';
import { askForBatchSize, askForGpus } from './prompts';
import { RESULTS_VIEW_TYPE } from './resultsPanel';
import { ResultsView } from './resultsView';
import type { ClientFactory, ClientLike } from './client';
import { StatusBar } from './statusBar';

/** How long activation waits for the Python extension's interpreter before starting without it. */
const PYTHON_EXTENSION_WAIT_MS = 10_000;

const TRUST_EXPLANATION =
  'wavecast is off in this workspace because analysing a file runs it (it imports your model and executes one training step). ' +
  'Trust the workspace to enable wavecast.';

function asUri(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** The buttons offered with a failure. */
const REMEDY_ACTIONS: Record<FailureRemedy, Action[]> = {
  restart: [Action.openSettings, Action.restartServer, Action.openServerLog],
  settings: [Action.openSettings, Action.openServerLog],
  remoteToken: [Action.setRemoteToken, Action.openServerLog],
  install: [Action.openInstallInstructions, Action.openSettings],
};

/** One client and what hangs on it, from its creation until it is stopped. */
interface Session {
  client: ClientLike;
  api: WavecastApi;
  subscriptions: vscode.Disposable[];
}

export class WavecastController implements vscode.Disposable {
  /** Which client is current and what state it is in; this adapter only carries out its decisions. */
  private readonly lifecycle: DaemonLifecycle;
  private session: Session | null = null;
  private serverStatus: StatusParams | null = null;
  /** "traced with torch …" of the last results seen (analyses of the active file, Analyze Now). */
  private traced: string | null = null;
  /** What those results said of the model (precision, experts), which the picker follows. */
  private model: ModelFacts = {};
  private targets: string[] = [];
  private settings: WavecastSettings = readSettings({}).settings;
  private lastAnalyzedUri: string | undefined;
  /** The worker's environment last logged and given to the daemon. */
  private workerEnvironmentPath: string | null | undefined;
  private readonly statusBar: StatusBar;
  private readonly output: vscode.OutputChannel;
  private readonly results: ResultsView;
  private readonly decorator: LineDecorator;
  private readonly tokens: RemoteTokenStore;
  private readonly notifier: Notifier;
  private readonly interpreter: PythonInterpreterWatcher;
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly createClient: ClientFactory,
    private readonly isExecutable: (file: string) => boolean = isExecutableFile,
    restartPolicy = new RestartPolicy(),
  ) {
    this.lifecycle = new DaemonLifecycle(
      {
        changed: (phase) => this.onPhaseChanged(phase),
        initializeTimeoutSeconds: () => this.settings.initializeTimeout,
        restartTimedOut: (failure) => void this.releaseSession().then(() => this.report(failure)),
      },
      restartPolicy,
    );
    this.output = vscode.window.createOutputChannel('wavecast');
    this.statusBar = new StatusBar();
    this.tokens = new RemoteTokenStore(context, (message) => this.log(message));
    this.notifier = new Notifier(
      {
        restartServer: () => this.restart(),
        openServerLog: () => this.output.show(true),
        showResults: () => this.whenRunning('showing the results', (api) => this.showResults(api)),
        setRemoteToken: async () => void (await vscode.commands.executeCommand('wavecast.setRemoteToken')),
        openInstallInstructions: async () =>
          void (await vscode.commands.executeCommand('markdown.showPreview', vscode.Uri.joinPath(context.extensionUri, 'README.md'))),
      },
      (message) => this.log(message),
    );
    this.interpreter = new PythonInterpreterWatcher((message) => this.log(message));
    this.results = new ResultsView(context.extensionUri, {
      api: () => this.session?.api ?? null,
      running: () => this.lifecycle.phase === 'running',
      log: (message) => this.log(message),
      analyze: (uri) => void this.whenRunning(`analysing ${baseName(vscode.Uri.parse(uri).fsPath)}`, (api) => this.analyze(api, uri)),
      pickGpus: () => void this.whenRunning('picking target GPUs', (api) => this.pickGpus(api)),
    });
    this.decorator = new LineDecorator({
      api: () => (this.lifecycle.phase === 'running' && this.settings.display === 'decorations' ? (this.session?.api ?? null) : null),
      log: (message) => this.log(message),
    });
    this.subscriptions.push(this.output, this.statusBar, this.results, this.decorator, this.interpreter);
  }

  /** Registers commands and listeners, then starts the daemon if the workspace is trusted. */
  async activate(): Promise<void> {
    const command = (id: string, run: (...args: any[]) => unknown) => vscode.commands.registerCommand(id, run);
    this.subscriptions.push(
      command('wavecast.analyzeNow', () => this.whenRunning('analysing the file', (api) => this.analyzeActive(api))),
      command('wavecast.pickGpus', () => this.whenRunning('picking target GPUs', (api) => this.pickGpus(api))),
      // The daemon's code lenses pass the document's URI.
      command('wavecast.setBatchSize', (uri?: unknown) => this.whenRunning('setting the batch size', (api) => this.setBatchSize(api, asUri(uri)))),
      command('wavecast.showResults', (uri?: unknown) => this.whenRunning('showing the results', (api) => this.showResults(api, asUri(uri)))),
      command('wavecast.restartServer', () => this.restart()),
      command('wavecast.openServerLog', () => this.output.show(true)),
      command('wavecast.setRemoteToken', () => this.tokens.set()),
      command('wavecast.clearRemoteToken', () => this.tokens.clear()),
      this.tokens.onDidChange(() => void this.onTokenChanged()),
      vscode.workspace.onDidChangeConfiguration((event) => void this.onConfigurationChanged(event)),
      vscode.workspace.onDidGrantWorkspaceTrust(() => void this.start()),
      vscode.window.registerWebviewPanelSerializer(RESULTS_VIEW_TYPE, {
        deserializeWebviewPanel: async (panel, state) => this.results.restorePanel(panel, state),
      }),
      this.interpreter.onDidChange(() => this.onInterpreterChanged()),
    );
    this.context.subscriptions.push(this);
    this.updateStatus();
    // The first start uses the interpreter if the Python extension tells it in time; a later answer is sent then.
    await Promise.race([this.interpreter.connect(), new Promise((resolve) => setTimeout(resolve, PYTHON_EXTENSION_WAIT_MS).unref?.())]);
    await this.start();
  }

  /** Where the connection to the daemon stands. */
  get currentPhase(): ClientPhase {
    return this.lifecycle.phase;
  }

  async start(): Promise<void> {
    if (!vscode.workspace.isTrusted) {
      this.lifecycle.untrusted();
      this.log(TRUST_EXPLANATION);
      void this.explainUntrusted();
      return;
    }
    if (this.session) return;
    const settings = this.readSettings();
    this.targets = settings.targets;
    this.noteWorkerEnvironment();
    const environment = this.workerEnvironment();

    const launch = this.lifecycle.connect();
    const connection = await daemonConnection(settings, {
      context: this.context,
      tokens: this.tokens,
      isExecutable: this.isExecutable,
      log: (message) => this.log(message),
    });
    if ('error' in connection) {
      // Stopped, or started again, meanwhile: the later call carries on.
      if (this.lifecycle.connectFailed(launch, connection.error)) this.report({ message: connection.error, remedy: connection.remedy });
      return;
    }
    if (!this.lifecycle.beginStart(launch)) return;
    const client = this.createClient({
      transport: connection.transport,
      initializationOptions: initializationOptions(settings, connection.token, environment.path),
      outputChannel: this.output,
      onClosed: () => this.onConnectionClosed(launch),
      onInitializeFailed: (message) => this.lifecycle.initializeFailed(launch, message),
      inlayHintsEnabled: () => this.settings.display === 'inlayHints',
      // Read when sent: the client's own configuration listener may run before this controller's.
      daemonSettings: () => {
        const current = readSettings(this.rawSettings()).settings;
        return daemonSettings(current, this.workerEnvironment(current).path, this.launchScripts());
      },
    });
    const api = new WavecastApi(client);
    this.session = {
      client,
      api,
      subscriptions: [
        api.onStatus((status) => {
          this.serverStatus = status;
          this.updateStatus();
        }),
        api.onResultsChanged((change) => void this.onResultsChanged(api, change)),
        client.onRunning(() => void this.onRestarted(launch)),
      ],
    };

    let error: unknown = undefined;
    try {
      const seconds = settings.initializeTimeout;
      await withTimeout(client.start(), seconds * 1000, initializeTimeoutMessage(seconds));
    } catch (thrown) {
      error = thrown ?? new Error('start failed');
    }
    const settled = this.lifecycle.settleStart(launch, {
      error,
      lastWords: client.lastWords(),
      capabilities: client.serverExperimentalCapabilities(),
    });
    switch (settled.kind) {
      case 'superseded':
        return;
      case 'failed':
        await this.releaseSession();
        this.report(settled.failure);
        return;
      case 'running':
        this.log(`Connected (${settled.protocol}).`);
        await this.refreshGpuList();
        void this.decorator.redrawAll();
        await this.results.refreshRestoredPanel(api);
    }
  }

  async restart(): Promise<void> {
    if (!vscode.workspace.isTrusted) {
      void this.explainUntrusted();
      return;
    }
    this.lifecycle.userRestart();
    await this.releaseSession();
    await this.start();
  }

  /** A new token applies to the next connection to a remote daemon. */
  private async onTokenChanged(): Promise<void> {
    if (!this.lifecycle.tokenChanged(this.settings.remote !== null)) return;
    this.log('The remote token changed; reconnecting.');
    await this.restart();
  }

  /** After an automatic restart the client is back: show it and refresh. */
  private async onRestarted(launch: LaunchId): Promise<void> {
    if (!this.lifecycle.clientRunning(launch)) return;
    this.log('The daemon is running again.');
    void this.decorator.redrawAll();
    await this.refreshGpuList();
  }

  private onConnectionClosed(launch: LaunchId): RestartDecision {
    const closed = this.lifecycle.closed(launch);
    switch (closed.kind) {
      case 'notCurrent':
        break;
      case 'exitedWhileStarting':
        this.log(closed.decision.message);
        break;
      case 'restarting':
        this.log(closed.decision.message);
        void vscode.window.showWarningMessage(closed.decision.message);
        break;
      case 'gaveUp':
        this.log(closed.decision.message);
        void this.notifier.error(closed.decision.message, Action.restartServer, Action.openServerLog);
        break;
    }
    return closed.decision;
  }

  /** Results are fetched once, for the panel showing them and for the status bar when the active file was analysed. */
  private async onResultsChanged(api: WavecastApi, change: ResultsChangedParams): Promise<void> {
    void this.decorator.resultsChanged(change.uri);
    const forStatus = change.state === 'ready' && change.uri === this.activePythonUri();
    if (!forStatus && this.results.panelUri !== change.uri) return;
    try {
      const results = await api.results(change.uri);
      this.results.show(results);
      if (forStatus) this.noteTraced(results);
    } catch (error) {
      this.log(`wavecast/results failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  private noteTraced(results: Results): void {
    if (!results.prediction) return;
    this.traced = tracedWith(results.prediction);
    // Each absent from older daemons.
    this.model = { matrixPrecision: results.prediction.precision?.gemm, routedExperts: results.prediction.routed_experts };
    this.updateStatus();
  }

  /** Stops the current client, if any, and waits for it. */
  private async stopClient(): Promise<void> {
    this.lifecycle.stop();
    await this.releaseSession();
  }

  /** Lets go of the current client and stops it; the lifecycle already says what state that leaves. */
  private async releaseSession(): Promise<void> {
    const session = this.session;
    this.session = null;
    this.serverStatus = null;
    this.traced = null;
    if (!session) return;
    session.subscriptions.forEach((d) => d.dispose());
    try {
      await session.client.stop();
    } catch (error) {
      this.log(`Stopping the daemon: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /** Logs a failure the lifecycle has entered and tells the user, with what fixes it. */
  private report(failure: Failure): void {
    this.log(failure.message);
    void this.notifier.error(failure.message, ...REMEDY_ACTIONS[failure.remedy]);
  }

  private async explainUntrusted(): Promise<void> {
    await this.notifier.information(TRUST_EXPLANATION, Action.manageTrust);
  }

  /**
   * Runs a user action that needs the daemon, with its API. Never fails
   * silently: a daemon that is not running, or a request that fails, is a
   * message saying what failed and what to do. `what` names the action.
   */
  private async whenRunning(what: string, run: (api: WavecastApi) => Promise<void>): Promise<void> {
    try {
      const current = this.lifecycle.phase;
      if (current === 'untrusted') {
        await this.explainUntrusted();
        return;
      }
      const api = this.session?.api;
      if (!api || current !== 'running') {
        const phase = current === 'starting' ? 'starting' : current === 'failed' ? 'failed' : 'stopped';
        const message = notRunningMessage(phase, this.lifecycle.failure);
        const show = phase === 'failed' ? this.notifier.error : this.notifier.warning;
        await show.call(this.notifier, message, Action.restartServer, Action.openServerLog);
        return;
      }
      try {
        await run(api);
      } catch (error) {
        const message = requestFailureMessage(what, error);
        this.log(message);
        await this.notifier.error(message, Action.openServerLog, Action.restartServer);
      }
    } catch (error) {
      // Showing the message itself failed: the log is all that is left.
      this.log(`${what}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  private onPhaseChanged(phase: ClientPhase): void {
    void vscode.commands.executeCommand('setContext', 'wavecast.running', phase === 'running');
    this.updateStatus();
    // As inlay hints go with the daemon, so do decorations; a start draws them again.
    if (phase !== 'running') void this.decorator.redrawAll();
  }

  private updateStatus(): void {
    this.statusBar.show(
      statusView(this.lifecycle.phase, this.targets, this.serverStatus, this.lifecycle.failure, this.traced, this.settings.compile),
    );
  }

  /** Reads the settings; a wrong value is reported once and replaced by its default. */
  private readSettings(): WavecastSettings {
    const { settings, problems } = readSettings(this.rawSettings());
    this.settings = settings;
    this.notifier.settingsProblems('extension', problems);
    return settings;
  }

  private workerEnvironment(settings = this.settings): WorkerEnvironment {
    return workerEnvironment(settings.pythonEnv, this.interpreter.current, settings.remote !== null);
  }

  /** Logs a new worker environment; returns whether it changed. */
  private noteWorkerEnvironment(): boolean {
    const environment = this.workerEnvironment();
    if (environment.path === this.workerEnvironmentPath) return false;
    this.workerEnvironmentPath = environment.path;
    this.log(describeWorkerEnvironment(environment, this.interpreter.current));
    return true;
  }

  /** Another interpreter selected: a running daemon is told (one still starting reads daemonSettings() once it runs). */
  private onInterpreterChanged(): void {
    if (this.noteWorkerEnvironment() && this.lifecycle.phase === 'running') this.session?.client.sendSettings();
  }

  /** The `args` and `cwd` of each workspace folder's launch configurations, by program. */
  private launchScripts(): LaunchScripts {
    const found: LaunchScripts = { args: {}, workingDirectories: {} };
    for (const folder of vscode.workspace.workspaceFolders ?? []) {
      const configurations = vscode.workspace.getConfiguration('launch', folder.uri).get('configurations');
      const scripts = launchScripts(configurations, folder.uri.fsPath);
      Object.assign(found.args, scripts.args);
      Object.assign(found.workingDirectories, scripts.workingDirectories);
    }
    return found;
  }

  private rawSettings(): Record<string, unknown> {
    const config = vscode.workspace.getConfiguration('wavecast');
    return Object.fromEntries(SETTING_NAMES.map((name) => [name, config.get(name)]));
  }

  private log(message: string): void {
    this.output.appendLine(`[${new Date().toISOString()}] ${message}`);
  }

  private async refreshGpuList(): Promise<void> {
    const api = this.session?.api;
    if (!api) return;
    try {
      this.targets = (await api.listGpus()).targets;
    } catch (error) {
      this.log(`wavecast/listGpus failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    this.updateStatus();
  }

  private async onConfigurationChanged(event: vscode.ConfigurationChangeEvent): Promise<void> {
    if (!event.affectsConfiguration('wavecast')) return;
    if (RESTART_SETTINGS.some((name) => event.affectsConfiguration(`wavecast.${name}`))) {
      if (!this.lifecycle.settingsNeedRestart()) return;
      this.log('Settings changed; restarting the daemon to apply them.');
      await this.restart();
      return;
    }
    const previous = this.settings;
    // The language client sends the daemon the valid values (daemonSettings) itself.
    const settings = this.readSettings();
    if (previous.pythonEnv !== settings.pythonEnv) this.noteWorkerEnvironment();
    if (previous.compile !== settings.compile) this.updateStatus();
    if (event.affectsConfiguration('wavecast.targets') && this.session) {
      const wanted = settings.targets;
      if (wanted.join('\n') !== this.targets.join('\n') && wanted.length > 0) await this.applyTargets(wanted);
    }
    if (previous.display !== settings.display) {
      for (const editor of vscode.window.visibleTextEditors) this.session?.client.refreshInlayHints(editor.document);
      await this.decorator.redrawAll();
    }
  }

  /** Only the daemon knows its GPUs: an unknown one is a settings problem; the others still apply. */
  private async applyTargets(wanted: string[]): Promise<void> {
    await this.whenRunning('applying wavecast.targets', async (api) => {
      try {
        this.targets = await api.setTargets(wanted);
        this.notifier.settingsProblems('daemon', []);
      } catch (error) {
        if (!isInvalidParamsError(error)) throw error;
        const reason = error instanceof Error ? error.message : String(error);
        this.notifier.settingsProblems('daemon', [`wavecast.targets: ${reason}; keeping ${this.targets.join(', ')}.`]);
      }
      this.updateStatus();
    });
  }

  private async pickGpus(api: WavecastApi): Promise<void> {
    const compile = { choices: compileChoices(this.context.extension?.packageJSON), current: this.settings.compile };
    const picked = await askForGpus(await api.listGpus(), this.settings.parallelTargets, this.model, compile);
    if (!picked) return;
    const ids = picked.gpus;
    this.targets = await api.setTargets(ids);
    // Persisted per workspace (or per user when no folder is open); the multi-GPU targets and
    // the compile mode reach the daemon as a settings change.
    const scope = vscode.workspace.workspaceFolders?.length ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
    const compileChanged = picked.compile !== this.settings.compile;
    this.settings = { ...this.settings, targets: ids, parallelTargets: picked.parallelTargets, compile: picked.compile };
    this.updateStatus();
    await vscode.workspace.getConfiguration('wavecast').update('targets', ids, scope);
    await vscode.workspace.getConfiguration('wavecast').update('parallelTargets', picked.parallelTargets, scope);
    if (compileChanged) await vscode.workspace.getConfiguration('wavecast').update('compile', picked.compile ?? 'script', scope);
  }

  private activePythonUri(): string | undefined {
    const document = vscode.window.activeTextEditor?.document;
    if (document && document.languageId === 'python' && document.uri.scheme === 'file') return document.uri.toString();
    return undefined;
  }

  private async analyzeActive(api: WavecastApi): Promise<void> {
    const uri = this.activePythonUri();
    if (!uri) {
      void vscode.window.showInformationMessage('Open a Python training script (with wavecast_model/wavecast_input/wavecast_iteration) to analyse it.');
      return;
    }
    await this.analyze(api, uri);
  }

  private async analyze(api: WavecastApi, uri: string, batchSize?: number): Promise<void> {
    this.lastAnalyzedUri = uri;
    const name = baseName(vscode.Uri.parse(uri).fsPath);
    const results = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `wavecast: analysing ${name}…` },
      () => api.analyze(uri, batchSize),
    );
    await this.showOutcome(results, name);
  }

  private async showOutcome(results: Results, name: string): Promise<void> {
    this.results.show(results);
    this.noteTraced(results);
    if (results.state === 'error' && results.error) {
      const where = results.error.line ? ` (line ${results.error.line})` : '';
      const hint = results.error.hint ? ` ${results.error.hint}` : '';
      await this.notifier.error(`wavecast: ${name}${where}: ${results.error.message}${hint}`, Action.showResults, Action.openServerLog);
      return;
    }
    const prediction = results.prediction;
    if (prediction) {
      const times = iterationTimes(prediction.summaries);
      await this.notifier.information(`wavecast: ${name}, batch ${prediction.batch_size}: ${times} per iteration.`, Action.showResults);
    }
  }

  private async setBatchSize(api: WavecastApi, uriArgument?: string): Promise<void> {
    const uri = uriArgument ?? this.activePythonUri();
    if (!uri) {
      void vscode.window.showInformationMessage('Open the Python training script whose batch size you want to set.');
      return;
    }
    const current = (await api.results(uri)).prediction?.batch_size ?? this.settings.batchSize;
    const batchSize = await askForBatchSize(baseName(vscode.Uri.parse(uri).fsPath), current);
    if (batchSize === undefined) return;
    if (batchSize === null) {
      await api.setBatchSize(uri, null);
      await this.analyze(api, uri);
    } else {
      await this.analyze(api, uri, batchSize);
    }
  }

  private async showResults(api: WavecastApi, uriArgument?: string): Promise<void> {
    const uri = uriArgument ?? this.activePythonUri() ?? this.results.panelUri ?? this.lastAnalyzedUri;
    if (!uri) {
      void vscode.window.showInformationMessage('Open a Python training script to see its wavecast results.');
      return;
    }
    await this.results.openPanel(api, uri);
  }

  /** Stops the daemon and waits for it; used on deactivation. */
  async shutdown(): Promise<void> {
    await this.stopClient();
    this.dispose();
  }

  dispose(): void {
    void this.stopClient();
    this.subscriptions.splice(0).forEach((d) => d.dispose());
  }
}
