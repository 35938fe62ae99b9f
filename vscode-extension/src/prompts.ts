// The dialogs that ask the user for a choice: target GPUs and batch size.
import * as vscode from 'vscode';
import {
  buildCompilePickItems,
  buildGpuPickItems,
  buildParallelPickItems,
  compileLabel,
  pickerPlaceholder,
  type CompileChoice,
  type GpuPickItem,
  type ModelFacts,
} from './logic/picker';
import type { CompileMode, ListGpusResult } from './logic/protocol';
import { parseBatchSize, type ParallelTargetSetting } from './logic/settings';

export interface PickedTargets {
  gpus: string[];
  parallelTargets: ParallelTargetSetting[];
  /** The torch.compile mode every target is predicted in; null: as each script says. */
  compile: CompileMode | null;
}

/** The compile modes offered and the one the settings hold. */
export interface CompileOffer {
  choices: readonly CompileChoice[];
  current: CompileMode | null;
}

/** The GPU ids and multi-GPU targets picked, or undefined when the user cancelled or picked no GPU. */
/** `model`: what the last results said of the model, which the offered layouts follow. */
export async function askForGpus(
  list: ListGpusResult,
  parallelTargets: readonly ParallelTargetSetting[],
  model: ModelFacts = {},
  compile: CompileOffer = { choices: [], current: null },
): Promise<PickedTargets | undefined> {
  const separator = (label: string) => ({ label, kind: vscode.QuickPickItemKind.Separator }) as unknown as GpuPickItem;
  const items = [...buildGpuPickItems(list), separator('Multi-GPU targets'), ...buildParallelPickItems(list, parallelTargets, model)];
  if (compile.choices.length > 0) items.push(separator('What if compiled'), ...buildCompilePickItems(compile.choices, compile.current));
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
  const modes = chosen.map((item) => item.compileMode).filter((m): m is CompileMode => m !== undefined);
  let mode: CompileMode | null = modes[0] ?? null;
  if (modes.length > 1) {
    mode = compile.current;
    const kept = mode === null ? 'each script as written' : compileLabel(mode);
    void vscode.window.showWarningMessage(`wavecast predicts in one torch.compile mode at a time; keeping ${kept}.`);
  }
  return { gpus, parallelTargets: picked, compile: mode };
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
