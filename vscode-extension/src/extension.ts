// Entry point: wires the controller to the real language client.
import type * as vscode from 'vscode';
import { WavecastController } from './controller';
import { createLanguageClient } from './languageClient';

let controller: WavecastController | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  controller = new WavecastController(context, createLanguageClient);
  await controller.activate();
}

export async function deactivate(): Promise<void> {
  const current = controller;
  controller = undefined;
  await current?.shutdown();
}
