// Finds the `wavecast` executable: the serverPath setting, then PATH, then a
// CMake build tree (build/bin/wavecast) in or next to the workspace or the
// extension's own folder (running from a source checkout).
import * as path from 'path';

export type ServerSource = 'setting' | 'PATH' | 'build tree';

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
  workspaceFolders: readonly string[];
  extensionPath: string;
  isExecutable: (file: string) => boolean;
  platform?: NodeJS.Platform;
}

const EXECUTABLE = 'wavecast';

export function buildTreeCandidates(workspaceFolders: readonly string[], extensionPath: string): string[] {
  const roots: string[] = [];
  for (const folder of workspaceFolders) roots.push(folder, path.dirname(folder));
  roots.push(path.dirname(extensionPath));
  const candidates: string[] = [];
  for (const root of roots) {
    const candidate = path.join(root, 'build', 'bin', EXECUTABLE);
    if (!candidates.includes(candidate)) candidates.push(candidate);
  }
  return candidates;
}

export function locateServer(input: LocateInput): LocatedServer | LocateFailure {
  const exe = input.platform === 'win32' ? `${EXECUTABLE}.exe` : EXECUTABLE;
  if (input.serverPath) {
    if (input.isExecutable(input.serverPath)) return { path: input.serverPath, source: 'setting' };
    return {
      error:
        `wavecast.serverPath is "${input.serverPath}", which is not an executable file. ` +
        'Fix the setting or clear it to search PATH and the build tree.',
      searched: [input.serverPath],
    };
  }
  const searched: string[] = [];
  const separator = input.platform === 'win32' ? ';' : ':';
  for (const dir of (input.pathEnv ?? '').split(separator)) {
    if (dir === '') continue;
    const candidate = path.join(dir, exe);
    searched.push(candidate);
    if (input.isExecutable(candidate)) return { path: candidate, source: 'PATH' };
  }
  for (const candidate of buildTreeCandidates(input.workspaceFolders, input.extensionPath)) {
    searched.push(candidate);
    if (input.isExecutable(candidate)) return { path: candidate, source: 'build tree' };
  }
  return {
    error:
      'The wavecast daemon was not found on PATH or in a build/bin folder. Build it ' +
      '(cmake -S . -B build -G Ninja && ninja -C build wavecast), put it on PATH, or set wavecast.serverPath.',
    searched,
  };
}
