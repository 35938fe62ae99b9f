// Writes src/logic/generated/protocolTypes.ts from protocol/schema/wavecast.schema.json,
// the one definition of the daemon's messages and results: run before every build,
// typecheck and test compile; the output is gitignored and never edited by hand.
import { compile } from 'json-schema-to-typescript';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const schemaPath = path.resolve(here, '../../protocol/schema/wavecast.schema.json');
const outPath = path.resolve(here, '../src/logic/generated/protocolTypes.ts');

const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
const source = await compile(schema, 'Wavecast', {
  bannerComment: '// Generated from protocol/schema/wavecast.schema.json by scripts/generate-protocol-types.mjs: do not edit.',
  // Only the definitions are types; the root is a container for them.
  unreachableDefinitions: true,
  additionalProperties: false,
  strictIndexSignatures: true,
  format: true,
  style: { singleQuote: true, printWidth: 120 },
});
// The schema's root has no shape of its own.
const types = source.replace(/export interface Wavecast \{[^}]*\}\n*/, '');
fs.mkdirSync(path.dirname(outPath), { recursive: true });
if (!fs.existsSync(outPath) || fs.readFileSync(outPath, 'utf8') !== types) fs.writeFileSync(outPath, types);
