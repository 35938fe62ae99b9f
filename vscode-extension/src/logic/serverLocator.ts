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

/** Why nothing runs: a wrong setting, no daemon found, or none found on a platform no package carries one for. */
export type LocateFailureKind = 'badSetting' | 'notFound' | 'noPackageForPlatform';

export interface LocateFailure {
  kind: LocateFailureKind;
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
  arch?: NodeJS.Architecture;
}

const EXECUTABLE = 'wavecast';

/** What `cmake --install` needs; the message the user sees when nothing is found names it. */
export const INSTALL_COMMAND = 'cmake --install build --prefix ~/.local';

/** Where a platform-specific .vsix keeps the installed daemon (`<prefix>` of `cmake --install`). */
export const BUNDLED_PREFIX = 'server';

/** The VS Code targets a .vsix with the daemon is made for (package.json's package:<target> scripts). */
export const BUNDLED_TARGETS: readonly string[] = ['linux-x64'];

const PLATFORM_NAMES: Partial<Record<NodeJS.Platform, string>> = { darwin: 'macOS', win32: 'Windows', linux: 'Linux' };

/** The README's sections the messages point to. */
const INSTALL_SECTION = 'the README\'s "Install" section';
const REMOTE_SECTION = 'the README\'s "A daemon on another machine" section';

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
      kind: 'badSetting',
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
  return notFound(input.platform ?? process.platform, input.arch ?? process.arch, searched);
}

/** What to do when nothing was found depends on whether a package with the daemon exists for this machine. */
function notFound(platform: NodeJS.Platform, arch: NodeJS.Architecture, searched: string[]): LocateFailure {
  const target = `${platform}-${arch}`;
  const where = 'on PATH or in ~/.local/bin, /usr/local/bin or /usr/bin';
  const build = `scripts/setup.sh build && ${INSTALL_COMMAND}`;
  if (BUNDLED_TARGETS.includes(target)) {
    return {
      kind: 'notFound',
      error:
        `The wavecast daemon was not found ${where}, and this copy of the extension carries none (its ${target} package does). ` +
        `Install that package, or install the daemon from a wavecast checkout (${build}), ` +
        'or set wavecast.serverPath to the wavecast executable.',
      searched,
    };
  }
  if (platform === 'linux') {
    return {
      kind: 'noPackageForPlatform',
      error:
        `No package of the extension carries a wavecast daemon for ${target}, and none was found ${where}. ` +
        `Build and install it from a wavecast checkout as ${INSTALL_SECTION} says (${build}), ` +
        'or set wavecast.serverPath to the wavecast executable.',
      searched,
    };
  }
  // The daemon builds only on Linux: elsewhere it runs on another machine.
  return {
    kind: 'noPackageForPlatform',
    error:
      `The wavecast daemon runs on Linux only, so none comes with the extension on ${PLATFORM_NAMES[platform] ?? platform} (${target}), ` +
      `and none was found ${where}. Run it on a Linux machine and connect to it as ${REMOTE_SECTION} says ` +
      '(wavecast serve --listen there, wavecast.remoteAddress here), or set wavecast.serverPath to a wavecast executable.',
    searched,
  };
}
