// Typed access to the daemon's custom methods (and the standard ones the
// extension asks itself) over any JSON-RPC endpoint: the extension's
// LanguageClient or a bare MessageConnection (tests).
import { InlayHintRequest, type InlayHint, type NotificationType, type Range, type RequestType } from 'vscode-languageserver-protocol';
import {
  AnalyzeRequest,
  ListGpusRequest,
  ResultsChangedNotification,
  ResultsRequest,
  SetBatchSizeRequest,
  SetTargetsRequest,
  StatusNotification,
  type ListGpusResult,
  type ResultsChangedParams,
  type Results,
  type StatusParams,
} from './protocol';

export interface Disposable {
  dispose(): void;
}

export interface RpcEndpoint {
  sendRequest<P, R>(type: RequestType<P, R, void>, params: P): Promise<R>;
  onNotification<P>(type: NotificationType<P>, handler: (params: P) => void): Disposable;
}

export class WavecastApi {
  constructor(private readonly endpoint: RpcEndpoint) {}

  listGpus(): Promise<ListGpusResult> {
    return this.endpoint.sendRequest(ListGpusRequest, {});
  }

  /** Returns the target ids the daemon accepted. */
  async setTargets(gpus: readonly string[]): Promise<string[]> {
    const reply = await this.endpoint.sendRequest(SetTargetsRequest, { gpus: [...gpus] });
    return reply.targets;
  }

  /** `null` removes the per-file override. */
  async setBatchSize(uri: string, batchSize: number | null): Promise<void> {
    await this.endpoint.sendRequest(SetBatchSizeRequest, { uri, batch_size: batchSize });
  }

  analyze(uri: string, batchSize?: number): Promise<Results> {
    return this.endpoint.sendRequest(AnalyzeRequest, batchSize === undefined ? { uri } : { uri, batch_size: batchSize });
  }

  /** Without the per-op detail: the extension shows lines, modules and summaries, and a large model's ops are most of its results. */
  results(uri: string): Promise<Results> {
    return this.endpoint.sendRequest(ResultsRequest, { uri, ops: false });
  }

  /** The daemon's inlay hints for `range` of `uri`, placed on the document as the daemon last saw it (unsaved edits included). */
  inlayHints(uri: string, range: Range): Promise<InlayHint[] | null> {
    return this.endpoint.sendRequest(InlayHintRequest.type, { textDocument: { uri }, range });
  }

  onResultsChanged(handler: (params: ResultsChangedParams) => void): Disposable {
    return this.endpoint.onNotification(ResultsChangedNotification, handler);
  }

  onStatus(handler: (params: StatusParams) => void): Disposable {
    return this.endpoint.onNotification(StatusNotification, handler);
  }
}
