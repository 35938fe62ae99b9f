// The Python extension (ms-python.python) as other extensions see it: its
// environments API (getActiveEnvironmentPath, resolveEnvironment,
// onDidChangeActiveEnvironmentPath), scripted by tests.
import * as path from 'path';
import { EventEmitter, Uri } from './vscodeTypes';

export const PYTHON_EXTENSION_ID = 'ms-python.python';

/** A ResolvedEnvironment of the API, with what the extension reads from it. */
export interface FakeEnvironment {
  id: string;
  path: string;
  executable: { uri: Uri | undefined; bitness: string; sysPrefix: string };
  environment: { type: string; name: string | undefined; folderUri: Uri; workspaceFolder: undefined } | undefined;
  version: { major: number; minor: number; micro: number; release: { level: string; serial: number }; sysVersion: string };
  tools: string[];
}

/** A venv made with `python3.X -m venv folder`. */
export function venvEnvironment(folder: string, version = '3.11.2'): FakeEnvironment {
  const executable = path.join(folder, 'bin', 'python');
  return {
    id: executable,
    path: executable,
    executable: { uri: Uri.file(executable), bitness: '64-bit', sysPrefix: folder },
    environment: { type: 'VirtualEnvironment', name: path.basename(folder), folderUri: Uri.file(folder), workspaceFolder: undefined },
    version: versionInfo(version),
    tools: ['Venv'],
  };
}

/** A global interpreter such as /usr/bin/python3: no environment folder. */
export function globalInterpreter(executable: string, version = '3.11.2'): FakeEnvironment {
  return {
    id: executable,
    path: executable,
    executable: { uri: Uri.file(executable), bitness: '64-bit', sysPrefix: '/usr' },
    environment: undefined,
    version: versionInfo(version),
    tools: [],
  };
}

function versionInfo(version: string): FakeEnvironment['version'] {
  const [major, minor, micro] = version.split('.').map(Number);
  return { major, minor, micro, release: { level: 'final', serial: 0 }, sysVersion: version };
}

export class FakePythonEnvironments {
  private active: FakeEnvironment;
  /** The resource each getActiveEnvironmentPath call asked about. */
  readonly askedFor: unknown[] = [];
  private readonly changed = new EventEmitter<{ id: string; path: string; resource: unknown }>();
  readonly onDidChangeActiveEnvironmentPath = this.changed.event;
  /** Lets a test hold resolveEnvironment back (a slow Python extension). */
  resolveGate: Promise<void> = Promise.resolve();

  constructor(initial: FakeEnvironment) {
    this.active = initial;
  }

  getActiveEnvironmentPath(resource?: unknown): { id: string; path: string } {
    this.askedFor.push(resource);
    return { id: this.active.id, path: this.active.path };
  }

  async resolveEnvironment(environment: { path: string } | string): Promise<FakeEnvironment | undefined> {
    const wanted = typeof environment === 'string' ? environment : environment.path;
    const active = this.active;
    await this.resolveGate;
    return wanted === active.path ? active : undefined;
  }

  /** The user picks another interpreter (for `resource`, a workspace folder, if given). */
  select(environment: FakeEnvironment, resource?: unknown): void {
    this.active = environment;
    this.changed.fire({ id: environment.id, path: environment.path, resource });
  }
}

export class FakePythonExtension {
  readonly id = PYTHON_EXTENSION_ID;
  isActive = false;
  activations = 0;
  readonly exports: { environments: FakePythonEnvironments };

  constructor(initial: FakeEnvironment) {
    this.exports = { environments: new FakePythonEnvironments(initial) };
  }

  get environments(): FakePythonEnvironments {
    return this.exports.environments;
  }

  activate(): Promise<unknown> {
    this.activations += 1;
    this.isActive = true;
    return Promise.resolve(this.exports);
  }
}
