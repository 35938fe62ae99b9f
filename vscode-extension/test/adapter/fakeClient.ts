// A scripted stand-in for the language client, recording what the
// controller asks of it.
import type { NotificationType, RequestType } from 'vscode-languageserver-protocol';
import type { ClientLike, ClientSpec } from '../../src/client';
import { REQUIRED_METHODS } from '../../src/logic/protocol';

export class FakeClient implements ClientLike {
  started = false;
  stopped = false;
  startError: Error | null = null;
  /** Runs inside start() before it settles: a daemon that never answers, or crashes while starting. */
  startHook: (() => Promise<void>) | null = null;
  experimental: unknown = { wavecast: { protocol_version: 2, methods: [...REQUIRED_METHODS] } };
  readonly requests: { method: string; params: unknown }[] = [];
  readonly handlers = new Map<string, (params: any) => unknown>();
  readonly notificationHandlers = new Map<string, (params: any) => void>();
  inlayRefreshes = 0;
  private runningListeners: (() => void)[] = [];

  constructor(readonly spec: ClientSpec) {}

  async start(): Promise<void> {
    if (this.startHook) await this.startHook();
    if (this.startError) throw this.startError;
    this.started = true;
    this.running();
  }

  /** The client reached the running state (after start or an automatic restart). */
  running(): void {
    this.runningListeners.forEach((listener) => listener());
  }

  onRunning(listener: () => void) {
    this.runningListeners.push(listener);
    return { dispose: () => (this.runningListeners = this.runningListeners.filter((l) => l !== listener)) };
  }

  async stop(): Promise<void> {
    this.stopped = true;
  }

  /** What the daemon printed last before exiting (stdio daemons). */
  exitLine: string | null = null;

  lastWords(): string | null {
    return this.exitLine;
  }

  serverExperimentalCapabilities(): unknown {
    return this.experimental;
  }

  refreshInlayHints(): void {
    this.inlayRefreshes += 1;
  }

  /** What each workspace/didChangeConfiguration the controller asked for carried. */
  readonly settingsSent: unknown[] = [];

  sendSettings(): void {
    this.settingsSent.push(this.spec.daemonSettings());
  }

  async sendRequest<P, R>(type: RequestType<P, R, void>, params: P): Promise<R> {
    this.requests.push({ method: type.method, params });
    const handler = this.handlers.get(type.method);
    if (!handler) throw new Error(`unexpected request ${type.method}`);
    return (await handler(params)) as R;
  }

  onNotification<P>(type: NotificationType<P>, handler: (params: P) => void) {
    this.notificationHandlers.set(type.method, handler as (params: any) => void);
    return { dispose: () => this.notificationHandlers.delete(type.method) };
  }

  notify(method: string, params: unknown): void {
    const handler = this.notificationHandlers.get(method);
    if (!handler) throw new Error(`no handler for ${method}`);
    handler(params);
  }

  requestsOf(method: string): unknown[] {
    return this.requests.filter((r) => r.method === method).map((r) => r.params);
  }
}
