// The daemon a linux-x64 .vsix carries runs with the machine's shared
// libraries, and its worker embeds Python 3.11 (libpython3.11.so.1.0), which
// a machine without Python 3.11 lacks. Running both programs is the check
// that cannot disagree with the dynamic loader: `wavecast --version` and the
// worker without arguments (it prints its usage) exit at once when their
// libraries load, and the loader names each one it cannot find otherwise.
import { execFile } from 'child_process';
import * as path from 'path';

/** The worker of the daemon at `serverPath`, as `cmake --install` lays them out (bin/, lib/wavecast/). */
export function bundledWorkerPath(serverPath: string): string {
  return path.join(path.dirname(path.dirname(serverPath)), 'lib', 'wavecast', 'wavecast-worker');
}

/** The libraries the dynamic loader could not find, from a program's stderr (glibc's message). */
export function missingLibraries(stderr: string): string[] {
  const found = stderr.matchAll(/error while loading shared libraries: ([^:\s]+): cannot open shared object file/g);
  return [...new Set([...found].map((match) => match[1]))];
}

/** The Debian and Ubuntu package of each library the bundled daemon is known to need from the system. */
const DEBIAN_PACKAGES: Readonly<Record<string, string>> = {
  'libpython3.11.so.1.0': 'libpython3.11',
};

/** One message: what is missing and what to install, then restart. */
export function missingLibrariesMessage(libraries: readonly string[]): string {
  const packages = libraries.map((library) => DEBIAN_PACKAGES[library]).filter((name): name is string => name !== undefined);
  const unknown = libraries.filter((library) => DEBIAN_PACKAGES[library] === undefined);
  const install = [
    ...(packages.length > 0 ? [`on Debian and Ubuntu: sudo apt install ${packages.join(' ')}`] : []),
    ...(unknown.length > 0 ? [`the package of your distribution that provides ${unknown.join(', ')}`] : []),
  ].join('; ');
  const names = libraries.join(', ');
  return (
    `The wavecast daemon this extension carries needs ${names}, which ${libraries.length === 1 ? 'is' : 'are'} not installed. ` +
    `Install ${install}, then run "wavecast: Restart Server".`
  );
}

/** Runs `file` with `args` and returns what it wrote on stderr; never rejects. */
function stderrOf(file: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: timeoutMs }, (_error, _stdout, stderr) => resolve(String(stderr ?? '')));
  });
}

/** The libraries the daemon at `serverPath` or its worker cannot load; empty when both start. */
export async function missingBundledLibraries(serverPath: string, timeoutMs = 5000): Promise<string[]> {
  const outputs = await Promise.all([stderrOf(serverPath, ['--version'], timeoutMs), stderrOf(bundledWorkerPath(serverPath), [], timeoutMs)]);
  return missingLibraries(outputs.join('\n'));
}
