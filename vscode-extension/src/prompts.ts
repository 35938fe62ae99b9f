// The dialogs that ask the user for a choice: target GPUs and batch size.
import * as vscode from 'vscode';
import { buildGpuPickItems, buildParallelPickItems, pickerPlaceholder, type GpuPickItem, type ModelFacts } from './logic/picker';
import type { ListGpusResult } from './logic/protocol';
import { parseBatchSize, type ParallelTargetSetting } from './logic/settings';

export interface PickedTargets {
  gpus: string[];
  parallelTargets: ParallelTargetSetting[];
}

/** The GPU ids and multi-GPU targets picked, or undefined when the user cancelled or picked no GPU. */
/** `model`: what the last results said of the model, which the offered layouts follow. */
export async function askForGpus(
  list: ListGpusResult,
  parallelTargets: readonly ParallelTargetSetting[],
  model: ModelFacts = {},
): Promise<PickedTargets | undefined> {
  const separator = { label: 'Multi-GPU targets', kind: vscode.QuickPickItemKind.Separator } as unknown as GpuPickItem;
  const items = [...buildGpuPickItems(list), separator, ...buildParallelPickItems(list, parallelTargets, model)];
  const chosen = await vscode.window.showQuickPick(items, {
    canPickMany: true,
    title: 'wavecast: target GPUs',
    placeHolder: pickerPlaceholder(list),
    matchOnDescription: true,
    matchOnDetail: true,
  });
  if (!chosen) return undefined;
  const gpus = chosen.filter((item) => item.id !== '').map((item) => item.id);
  if (gpus.length === 0) {
    void vscode.window.showWarningMessage('wavecast needs at least one target GPU; the selection was not changed.');
    return undefined;
  }
  const picked = chosen.map((item) => item.parallelTarget).filter((t): t is ParallelTargetSetting => t !== undefined);
  return { gpus, parallelTargets: picked };
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
