// Finds the `wavecast` executable: the serverPath setting, the daemon a
// platform-specific .vsix carries, PATH, the usual install folders, then a
// CMake build tree inside a trusted workspace folder or (while developing the
// extension) in its own source checkout. Nothing outside the folders the user
// trusted or installed is run.
import * as path from 'path';

export type ServerSource = 'setting' | 'extension' | 'PATH' | 'install folder' | 'workspace build tree' | 'source checkout';

export interface LocatedServer {
  path: string;
  source: ServerSource;
}

export interface LocateFailure {
  error: string;
  searched: string[];
}

export interface LocateInput {
  serverPath: string | null;
  pathEnv: string | undefined;
  homeDir: string;
  workspaceFolders: readonly string[];
  /** Only a trusted workspace's own build tree may be run. */
  workspaceTrusted: boolean;
  extensionPath: string;
  /** The extension runs from its source checkout (Extension Development Host). */
  developing: boolean;
  isExecutable: (file: string) => boolean;
  platform?: NodeJS.Platform;
}

const EXECUTABLE = 'wavecast';

/** What `cmake --install` needs; the message the user sees when nothing is found names it. */
export const INSTALL_COMMAND = 'cmake --install build --prefix ~/.local';

/** Where a platform-specific .vsix keeps the installed daemon (`<prefix>` of `cmake --install`). */
export const BUNDLED_PREFIX = 'server';

export function installFolders(homeDir: string): string[] {
  return [path.join(homeDir, '.local', 'bin'), '/usr/local/bin', '/usr/bin'];
}

interface Candidate {
  path: string;
  source: ServerSource;
}

function candidates(input: LocateInput, exe: string): Candidate[] {
  const list: Candidate[] = [{ path: path.join(input.extensionPath, BUNDLED_PREFIX, 'bin', exe), source: 'extension' }];
  const separator = input.platform === 'win32' ? ';' : ':';
  for (const dir of (input.pathEnv ?? '').split(separator)) {
    // An empty or relative PATH entry means the current directory: not trusted.
    if (dir !== '' && path.isAbsolute(dir)) list.push({ path: path.join(dir, exe), source: 'PATH' });
  }
  // VS Code started from a desktop launcher often lacks ~/.local/bin on PATH.
  for (const dir of installFolders(input.homeDir)) list.push({ path: path.join(dir, exe), source: 'install folder' });
  if (input.workspaceTrusted) {
    for (const folder of input.workspaceFolders) list.push({ path: path.join(folder, 'build', 'bin', exe), source: 'workspace build tree' });
  }
  if (input.developing) {
    list.push({ path: path.join(path.dirname(input.extensionPath), 'build', 'bin', exe), source: 'source checkout' });
  }
  const seen = new Set<string>();
  return list.filter((c) => !seen.has(c.path) && seen.add(c.path));
}

export function locateServer(input: LocateInput): LocatedServer | LocateFailure {
  const exe = input.platform === 'win32' ? `${EXECUTABLE}.exe` : EXECUTABLE;
  if (input.serverPath) {
    if (input.isExecutable(input.serverPath)) return { path: input.serverPath, source: 'setting' };
    return {
      error:
        `wavecast.serverPath is "${input.serverPath}", which is not an executable file. ` +
        'Fix the setting or clear it to search PATH and the install folders.',
      searched: [input.serverPath],
    };
  }
  const searched: string[] = [];
  for (const candidate of candidates(input, exe)) {
    searched.push(candidate.path);
    if (input.isExecutable(candidate.path)) return candidate;
  }
  return {
    error:
      'The wavecast daemon was not found on PATH or in ~/.local/bin, /usr/local/bin or /usr/bin. ' +
      `Install it from a wavecast checkout (scripts/setup.sh build && ${INSTALL_COMMAND}), ` +
      'or set wavecast.serverPath to the wavecast executable.',
    searched,
  };
}
