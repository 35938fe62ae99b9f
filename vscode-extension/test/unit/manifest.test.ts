// package.json declares what the code reads and registers.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { SETTING_NAMES } from '../../src/logic/settings';

const root = path.join(__dirname, '..', '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const properties: Record<string, { default?: unknown }> = manifest.contributes.configuration.properties;

test('every setting the extension reads is declared, and the language client’s trace setting too', () => {
  for (const name of SETTING_NAMES) assert.ok(properties[`wavecast.${name}`], `wavecast.${name} is not declared`);
  assert.deepEqual(properties['wavecast.trace.server'].default, 'off');
});

test('wavecast.compile offers the daemon’s torch.compile modes (the protocol schema’s CompileMode) and "script"', () => {
  const schema = JSON.parse(fs.readFileSync(path.join(root, '..', 'protocol', 'schema', 'wavecast.schema.json'), 'utf8'));
  const setting = properties['wavecast.compile'] as { enum: string[]; enumDescriptions: string[]; default: string };
  assert.deepEqual(setting.enum, ['script', ...schema.definitions.CompileMode.enum]);
  assert.equal(setting.enumDescriptions.length, setting.enum.length);
  assert.equal(setting.default, 'script');
});

test('every command the code registers is declared, and nothing else', () => {
  const source = fs.readFileSync(path.join(root, 'src', 'controller.ts'), 'utf8');
  const registered = [...source.matchAll(/command\('(wavecast\.[A-Za-z]+)'/g)].map((m) => m[1]).sort();
  const declared = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
  assert.ok(registered.length >= 8, `found ${registered.join(', ')}`);
  assert.deepEqual(declared, registered);
});

test('the results panel can be restored, and the icon, licence and changelog ship', () => {
  assert.ok(manifest.activationEvents.includes('onWebviewPanel:wavecast.results'));
  const png = fs.readFileSync(path.join(root, manifest.icon));
  assert.equal(png.subarray(1, 4).toString(), 'PNG');
  assert.equal(png.readUInt32BE(16), 128, 'width');
  assert.equal(png.readUInt32BE(20), 128, 'height');
  const shipped = fs.readFileSync(path.join(root, '.vscodeignore'), 'utf8');
  for (const file of ['LICENSE', 'CHANGELOG.md', manifest.icon]) {
    assert.ok(fs.existsSync(path.join(root, file)), file);
    assert.ok(shipped.includes(`!${file}`), `${file} is not in the .vsix`);
  }
});

test('the licence is Apache-2.0, in package.json and in LICENSE', () => {
  assert.equal(manifest.license, 'Apache-2.0');
  const licence = fs.readFileSync(path.join(root, 'LICENSE'), 'utf8');
  assert.match(licence, /^\s*Apache License\s+Version 2\.0, January 2004\s/);
  assert.match(licence, /END OF TERMS AND CONDITIONS/);
});
