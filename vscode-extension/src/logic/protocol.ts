// The request and notification definitions of wavecast's custom LSP methods
// (docs/protocol.md). Their params and results are generated from the schema,
// protocol/schema/wavecast.schema.json (scripts/generate-protocol-types.mjs).
// No `vscode` import: shared by the extension, the webview bundle and the
// integration tests.
import { NotificationType, RequestType } from 'vscode-languageserver-protocol';
import type {
  AnalyzeParams,
  ListGpusParams,
  ListGpusResult,
  Results,
  ResultsChangedParams,
  ResultsParams,
  SetBatchSizeParams,
  SetBatchSizeResult,
  SetTargetsParams,
  SetTargetsResult,
  StatusParams,
} from './generated/protocolTypes';

export type * from './generated/protocolTypes';

/** Version of the custom `wavecast/*` protocol this client speaks (2: snake_case fields). */
export const PROTOCOL_VERSION = 2;

export const ListGpusRequest = new RequestType<ListGpusParams, ListGpusResult, void>('wavecast/listGpus');
export const SetTargetsRequest = new RequestType<SetTargetsParams, SetTargetsResult, void>('wavecast/setTargets');
export const SetBatchSizeRequest = new RequestType<SetBatchSizeParams, SetBatchSizeResult, void>('wavecast/setBatchSize');
export const AnalyzeRequest = new RequestType<AnalyzeParams, Results, void>('wavecast/analyze');
export const ResultsRequest = new RequestType<ResultsParams, Results, void>('wavecast/results');
export const ResultsChangedNotification = new NotificationType<ResultsChangedParams>('wavecast/resultsChanged');
export const StatusNotification = new NotificationType<StatusParams>('wavecast/status');

/** Methods this client calls; the server must advertise all of them. */
export const REQUIRED_METHODS: readonly string[] = [
  ListGpusRequest.method,
  SetTargetsRequest.method,
  SetBatchSizeRequest.method,
  AnalyzeRequest.method,
  ResultsRequest.method,
];
