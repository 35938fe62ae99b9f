// Decorations mode draws what the daemon rendered as inlay hints, on the
// lines the daemon put them: it maps the analysed lines through the unsaved
// edits it has seen (docs/architecture.md, step 9), which results JSON alone
// cannot. These are the pure parts: which lines to ask for, what to draw,
// and which answer is still wanted.
import type { InlayHint, Range } from 'vscode-languageserver-protocol';

export interface LineLabel {
  /** 0-based line in the document as it is now. */
  line: number;
  text: string;
}

/** The daemon's hints as end-of-line labels: one per line, inside the document, never empty. */
export function hintLabels(hints: readonly InlayHint[] | null, lineCount: number): LineLabel[] {
  const labels = new Map<number, string>();
  for (const hint of hints ?? []) {
    const line = hint.position.line;
    const text = typeof hint.label === 'string' ? hint.label : hint.label.map((part) => part.value).join('');
    if (line < 0 || line >= lineCount || text === '' || labels.has(line)) continue;
    labels.set(line, text);
  }
  return [...labels].map(([line, text]) => ({ line, text }));
}

/** 0-based, inclusive: a visible stretch of an editor. */
export interface LineSpan {
  start: number;
  end: number;
}

/**
 * The lines to ask hints for: the visible ones and as many again above and
 * below, so that a short scroll shows labels before its redraw comes. The
 * whole document when nothing is known to be visible.
 */
export function hintRange(visible: readonly LineSpan[], lineCount: number): Range {
  const last = Math.max(0, lineCount - 1);
  if (visible.length === 0) return { start: { line: 0, character: 0 }, end: { line: last, character: 0 } };
  const first = Math.min(...visible.map((span) => span.start));
  const final = Math.max(...visible.map((span) => span.end));
  const height = final - first + 1;
  return {
    start: { line: Math.max(0, first - height), character: 0 },
    end: { line: Math.min(last, final + height), character: 0 },
  };
}

/** Requests per key (an editor) where only the newest answer counts: an older one finishing later is dropped. */
export class LatestRequests<K extends object> {
  private readonly latest = new WeakMap<K, number>();
  private issued = 0;

  /** A new request for `key`; any earlier one is no longer wanted. */
  begin(key: K): number {
    this.issued += 1;
    this.latest.set(key, this.issued);
    return this.issued;
  }

  isLatest(key: K, request: number): boolean {
    return this.latest.get(key) === request;
  }
}
