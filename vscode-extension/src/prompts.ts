// The dialogs that ask the user for a choice: target GPUs and batch size.
import * as vscode from 'vscode';
import { buildGpuPickItems, pickerPlaceholder } from './logic/picker';
import type { ListGpusResult } from './logic/protocol';
import { parseBatchSize } from './logic/settings';

/** The GPU ids picked, or undefined when the user cancelled or picked none. */
export async function askForGpus(list: ListGpusResult): Promise<string[] | undefined> {
  const chosen = await vscode.window.showQuickPick(buildGpuPickItems(list), {
    canPickMany: true,
    title: 'wavecast: target GPUs',
    placeHolder: pickerPlaceholder(list),
    matchOnDescription: true,
    matchOnDetail: true,
  });
  if (!chosen) return undefined;
  if (chosen.length === 0) {
    void vscode.window.showWarningMessage('wavecast needs at least one target GPU; the selection was not changed.');
    return undefined;
  }
  return chosen.map((item) => item.id);
}

/** A batch size, null for "the provider's default", or undefined when cancelled. */
export async function askForBatchSize(fileName: string, current: number | null): Promise<number | null | undefined> {
  const input = await vscode.window.showInputBox({
    title: 'wavecast: batch size',
    prompt: `Batch size for ${fileName}. Leave empty to use the default.`,
    value: current ? String(current) : '',
    validateInput: (text) => {
      if (text.trim() === '') return null;
      const parsed = parseBatchSize(text);
      return typeof parsed === 'number' ? null : parsed.error;
    },
  });
  if (input === undefined) return undefined;
  if (input.trim() === '') return null;
  const parsed = parseBatchSize(input);
  return typeof parsed === 'number' ? parsed : undefined;
}
