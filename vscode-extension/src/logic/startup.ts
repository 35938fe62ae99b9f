// The first start of the daemon: a time-out on `initialize`, and one outcome
// per start (a crash while starting is a failed start, not also a restart).

export class TimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TimeoutError';
  }
}

/**
 * Resolves or rejects like `promise`, or rejects with a TimeoutError after
 * `ms`. The timer never outlives the race.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(message)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export function initializeTimeoutMessage(seconds: number): string {
  return (
    `The wavecast daemon did not answer initialize within ${seconds} s and was stopped. ` +
    'Open the server log to see what it was doing, then restart it (or raise wavecast.initializeTimeout if it is just slow to start).'
  );
}

/** What happened to a start: the outcome reported to the user, exactly once. */
export type StartOutcome = { ok: true } | { ok: false; reason: string; timedOut: boolean };

/**
 * Settles the first start from what the client reported: `startError` (the
 * rejection of start(), if any) and whether the connection closed while
 * starting. A close during the first start makes it a failed start even when
 * start() itself resolved. `lastWords`, the daemon's last line on stderr,
 * says why it exited.
 */
export function startOutcome(
  startError: unknown,
  closedWhileStarting: boolean,
  initializeError: string | null,
  lastWords: string | null = null,
): StartOutcome {
  if (startError === undefined && !closedWhileStarting) return { ok: true };
  if (startError instanceof TimeoutError) return { ok: false, reason: startError.message, timedOut: true };
  // Its last words say why better than the initialize request that failed with it.
  if (closedWhileStarting && lastWords) return { ok: false, reason: `it exited while starting: ${lastWords}`, timedOut: false };
  if (initializeError) return { ok: false, reason: initializeError, timedOut: false };
  if (startError === undefined) return { ok: false, reason: 'it exited while starting; its log may say why', timedOut: false };
  const message = startError instanceof Error ? startError.message : String(startError);
  return { ok: false, reason: closedWhileStarting ? `it exited while starting (${message})` : message, timedOut: false };
}
