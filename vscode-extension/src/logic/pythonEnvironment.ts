// Which Python environment the daemon's worker traces with: wavecast.pythonEnv
// when set, else the interpreter selected in the Python extension, else the
// daemon's own default (the torch 2.x venv `scripts/setup.sh` makes).

/** What the Python extension says about its selected interpreter (from its environments API). */
export interface InterpreterReport {
  /** getActiveEnvironmentPath().path: the python executable, or the folder of an environment without one. */
  activePath: string;
  /** resolveEnvironment(): the executable, when the environment has one. */
  executable?: string;
  /** resolveEnvironment(): the environment's folder; none for a global interpreter. */
  folder?: string;
  /** resolveEnvironment(): "VirtualEnvironment", "Conda", …; none for a global interpreter. */
  environmentType?: string;
  version?: { major: number; minor: number; micro: number };
}

/** The interpreter the Python extension selected, as the worker is told of it. */
export interface SelectedInterpreter {
  /** What the worker gets as its environment: the executable (the worker finds its venv), else the folder. */
  path: string;
  /** For the log: "Python 3.12.1 (VirtualEnvironment) /home/ada/venv/bin/python". */
  description: string;
}

export function selectedInterpreter(report: InterpreterReport): SelectedInterpreter {
  const path = report.executable ?? report.folder ?? report.activePath;
  const version = report.version ? `Python ${report.version.major}.${report.version.minor}.${report.version.micro} ` : '';
  const kind = report.environmentType ? `(${report.environmentType}) ` : '';
  return { path, description: `${version}${kind}${path}` };
}

export type WorkerEnvironmentSource = 'setting' | 'pythonExtension' | 'daemonDefault';

export interface WorkerEnvironment {
  /** Sent to the daemon as `pythonEnv`; null: its default. */
  path: string | null;
  source: WorkerEnvironmentSource;
}

/**
 * `setting` is wavecast.pythonEnv (null when empty). A remote daemon runs on
 * another machine, where this machine's interpreter paths mean nothing, so it
 * only gets the setting.
 */
export function workerEnvironment(setting: string | null, interpreter: SelectedInterpreter | null, remote: boolean): WorkerEnvironment {
  if (setting) return { path: setting, source: 'setting' };
  if (interpreter && !remote) return { path: interpreter.path, source: 'pythonExtension' };
  return { path: null, source: 'daemonDefault' };
}

/** One log line saying which environment the worker uses and why. */
export function describeWorkerEnvironment(environment: WorkerEnvironment, interpreter: SelectedInterpreter | null): string {
  switch (environment.source) {
    case 'setting':
      return `The worker's Python environment is ${environment.path} (wavecast.pythonEnv).`;
    case 'pythonExtension':
      return `The worker's Python environment is the Python extension's interpreter, ${interpreter?.description ?? environment.path}.`;
    case 'daemonDefault':
      return "The worker's Python environment is the daemon's default (no wavecast.pythonEnv, no interpreter from the Python extension).";
  }
}
