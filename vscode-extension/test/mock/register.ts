// Makes `require('vscode')` resolve to the mock. Import before any module
// that imports `vscode`.
import Module = require('module');
import * as path from 'path';

const mockPath = path.join(__dirname, 'vscode.js');
const moduleWithResolver = Module as unknown as {
  _resolveFilename(request: string, ...rest: unknown[]): string;
};
const original = moduleWithResolver._resolveFilename;
moduleWithResolver._resolveFilename = function (request: string, ...rest: unknown[]): string {
  if (request === 'vscode') return mockPath;
  return original.call(this, request, ...rest);
};
