// Decides whether a crashed daemon is restarted automatically: a few times,
// but not in a loop when it dies at once every time.

export interface RestartDecision {
  restart: boolean;
  /** Crashes inside the current window, this one included. */
  crashesInWindow: number;
  message: string;
}

export class RestartPolicy {
  private crashTimes: number[] = [];

  constructor(
    readonly maxRestarts = 3,
    readonly windowMs = 3 * 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  recordCrash(): RestartDecision {
    const time = this.now();
    this.crashTimes = this.crashTimes.filter((t) => time - t < this.windowMs);
    this.crashTimes.push(time);
    const crashes = this.crashTimes.length;
    if (crashes <= this.maxRestarts) {
      return {
        restart: true,
        crashesInWindow: crashes,
        message: `The wavecast daemon stopped unexpectedly; restarting it (attempt ${crashes} of ${this.maxRestarts}).`,
      };
    }
    const minutes = Math.round(this.windowMs / 60_000);
    return {
      restart: false,
      crashesInWindow: crashes,
      message:
        `The wavecast daemon crashed ${crashes} times in ${minutes} minutes and was not restarted again. ` +
        'Open the server log to see why, then restart it.',
    };
  }

  /** A restart the user asked for starts a fresh budget. */
  reset(): void {
    this.crashTimes = [];
  }
}
