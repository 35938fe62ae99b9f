// Ending the daemon's process whatever state the client is in: a daemon that
// never answered initialize cannot be shut down over LSP, only killed.
import type { ChildProcess } from 'child_process';

function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/**
 * Waits up to `graceMs` for `child` to exit by itself, then sends SIGTERM
 * (and SIGKILL after another `graceMs`). Resolves once it has exited.
 */
export async function endProcess(child: ChildProcess, graceMs: number): Promise<void> {
  if (hasExited(child) || child.pid === undefined) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const waitFor = (ms: number) =>
    new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), ms);
      void exited.then(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  if (graceMs > 0 && (await waitFor(graceMs))) return;
  if (hasExited(child)) return;
  child.kill('SIGTERM');
  if (await waitFor(Math.max(graceMs, 1000))) return;
  if (!hasExited(child)) child.kill('SIGKILL');
  await exited;
}
