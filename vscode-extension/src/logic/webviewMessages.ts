// Messages between the extension and the results panel.
import type { Results } from './protocol';

export type ToWebview = { type: 'results'; results: Results };

export type FromWebview =
  | { type: 'ready' }
  | { type: 'reveal'; file: string; line: number }
  | { type: 'analyze' }
  | { type: 'pickGpus' };

/** Validates a message from the webview; anything else is ignored. */
export function parseFromWebview(message: unknown): FromWebview | null {
  if (typeof message !== 'object' || message === null) return null;
  const m = message as Record<string, unknown>;
  switch (m.type) {
    case 'ready':
    case 'analyze':
    case 'pickGpus':
      return { type: m.type };
    case 'reveal':
      if (typeof m.file === 'string' && m.file !== '' && Number.isInteger(m.line) && (m.line as number) >= 1) {
        return { type: 'reveal', file: m.file, line: m.line as number };
      }
      return null;
    default:
      return null;
  }
}

/** What the panel's script saves with setState; VS Code hands it back when it restores the panel. */
export interface PanelState {
  results?: Results;
}

/** The document a restored panel showed, if its saved state says. */
export function restoredUri(state: unknown): string | undefined {
  if (typeof state !== 'object' || state === null) return undefined;
  const results = (state as PanelState).results;
  const uri = typeof results === 'object' && results !== null ? (results as { uri?: unknown }).uri : undefined;
  return typeof uri === 'string' && uri !== '' ? uri : undefined;
}
