import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import {
  daemonSettings,
  launchScripts,
  initializationOptions,
  parseBatchSize,
  parseRemoteAddress,
  readSettings,
  resolveUserPath,
  parallelTargetLabel,
  serveArguments,
  SettingsProblemMemory,
} from '../../src/logic/settings';

test('defaults when nothing is set', () => {
  const { settings, problems } = readSettings({});
  assert.deepEqual(problems, []);
  assert.deepEqual(settings, {
    targets: [],
    parallelTargets: [],
    trigger: 'onSave',
    batchSize: null,
    pythonEnv: null,
    serverPath: null,
    remote: null,
    settingsToken: null,
    display: 'inlayHints',
    initializeTimeout: 30,
    tf32Matmul: 'script',
    tf32Conv: 'script',
    analysisTimeout: null,
    gpuFile: null,
    debounceMs: 0,
    lineCodeLens: false,
    lineDiagnostics: false,
    scriptArgs: [],
    worldSize: null,
    compile: null,
  });
});

test('valid values are kept; targets trimmed and deduplicated', () => {
  const { settings, problems } = readSettings({
    targets: [' H100-SXM ', 'T4', 'T4'],
    trigger: 'manual',
    batchSize: 64,
    pythonEnv: '/opt/venv',
    serverPath: '/usr/local/bin/wavecast',
    remoteAddress: '10.0.0.5:7325',
    remoteToken: 'secret',
    display: 'decorations',
  });
  assert.deepEqual(problems, []);
  assert.deepEqual(settings.targets, ['H100-SXM', 'T4']);
  assert.equal(settings.trigger, 'manual');
  assert.equal(settings.batchSize, 64);
  assert.deepEqual(settings.remote, { host: '10.0.0.5', port: 7325 });
  assert.equal(settings.display, 'decorations');
});

test('the initialize time-out is a number of seconds; anything else falls back to 30 s with a message', () => {
  assert.equal(readSettings({ initializeTimeout: 5 }).settings.initializeTimeout, 5);
  for (const bad of [0, -1, '10', Number.NaN, 1e9]) {
    const { settings, problems } = readSettings({ initializeTimeout: bad });
    assert.equal(settings.initializeTimeout, 30);
    assert.equal(problems.length, 1);
    assert.match(problems[0], /wavecast.initializeTimeout must be a number of seconds from 1 to 3600/);
  }
});

test('invalid values fall back to defaults and say what to write', () => {
  const { settings, problems } = readSettings({
    targets: ['A100', 7, ''],
    trigger: 'always',
    batchSize: 0,
    display: 'sidebar',
    remoteAddress: 'localhost',
  });
  assert.deepEqual(settings.targets, ['A100']);
  assert.equal(settings.trigger, 'onSave');
  assert.equal(settings.batchSize, null);
  assert.equal(settings.display, 'inlayHints');
  assert.equal(settings.remote, null);
  assert.equal(problems.length, 6);
  assert.match(problems[0], /ignored 7/);
  assert.match(problems.join('\n'), /"onSave" or "manual"/);
  assert.match(problems.join('\n'), /at least 1/);
  assert.match(problems.join('\n'), /host:port/);
});

test('the daemon options are checked like the others', () => {
  const good = readSettings({ tf32Matmul: 'on', tf32Conv: 'off', analysisTimeout: 600, gpuFile: ' ~/gpus.json ', debounceMs: 0, lineCodeLens: true });
  assert.deepEqual(good.problems, []);
  assert.equal(good.settings.tf32Matmul, 'on');
  assert.equal(good.settings.tf32Conv, 'off');
  assert.equal(good.settings.analysisTimeout, 600);
  assert.equal(good.settings.gpuFile, '~/gpus.json');
  assert.equal(good.settings.debounceMs, 0);
  assert.equal(good.settings.lineCodeLens, true);

  const bad = readSettings({ tf32Matmul: true, analysisTimeout: 1.5, debounceMs: 70000, lineCodeLens: 'yes' });
  assert.equal(bad.settings.tf32Matmul, 'script');
  assert.equal(bad.settings.analysisTimeout, null);
  assert.equal(bad.settings.debounceMs, 0);
  assert.equal(bad.settings.lineCodeLens, false);
  assert.deepEqual(bad.problems, [
    'wavecast.tf32Matmul must be "script", "on" or "off", not true; using "script".',
    "wavecast.analysisTimeout must be a whole number of seconds from 1 to 86400, not 1.5; using the daemon's default.",
    'wavecast.debounceMs must be a whole number of milliseconds from 0 to 60000, not 70000; using 0.',
    'wavecast.lineCodeLens must be true or false, not "yes"; using false.',
  ]);
});

test('serve arguments: only the options that differ from the script and the daemon defaults', () => {
  const resolve = (text: string) => resolveUserPath(text, '/home/ada', '/work/project');
  assert.deepEqual(serveArguments(readSettings({}).settings, resolve), ['serve']);
  assert.deepEqual(
    serveArguments(readSettings({ tf32Matmul: 'off', tf32Conv: 'on', analysisTimeout: 30, gpuFile: '~/lab/gpus.json' }).settings, resolve),
    ['serve', '--tf32-matmul', 'off', '--tf32-conv', 'on', '--timeout', '30', '--gpu-file', '/home/ada/lab/gpus.json'],
  );
});

test('user paths: ~ is the home folder, relative paths start at the workspace folder', () => {
  assert.equal(resolveUserPath('~/gpus.json', '/home/ada', '/work/p'), '/home/ada/gpus.json');
  assert.equal(resolveUserPath('/etc/gpus.json', '/home/ada', '/work/p'), '/etc/gpus.json');
  assert.equal(resolveUserPath('conf/gpus.json', '/home/ada', '/work/p'), '/work/p/conf/gpus.json');
  assert.equal(resolveUserPath('conf/gpus.json', '/home/ada', undefined), 'conf/gpus.json');
});

test('parseBatchSize accepts whole numbers in range only', () => {
  assert.equal(parseBatchSize(' 48 '), 48);
  assert.deepEqual(parseBatchSize('1.5'), { error: '"1.5" is not a whole number; enter a batch size such as 32.' });
  assert.deepEqual(parseBatchSize('-3'), { error: '"-3" is not a whole number; enter a batch size such as 32.' });
  assert.deepEqual(parseBatchSize('0'), { error: 'the batch size must be at least 1.' });
  assert.match((parseBatchSize('99999999') as { error: string }).error, /at most 1048576/);
});

test('parseRemoteAddress handles names, IPv4, IPv6 and bad ports', () => {
  assert.deepEqual(parseRemoteAddress('gpu-box:7325'), { host: 'gpu-box', port: 7325 });
  assert.deepEqual(parseRemoteAddress('[::1]:9000'), { host: '::1', port: 9000 });
  assert.match((parseRemoteAddress('host:70000') as { error: string }).error, /outside 1–65535/);
  assert.match((parseRemoteAddress('::1:9000') as { error: string }).error, /not host:port/);
});

test('initialization options carry the token only for a remote daemon', () => {
  const local = readSettings({}).settings;
  assert.equal(initializationOptions(local, 'abc').token, undefined);
  const remote = readSettings({ remoteAddress: '127.0.0.1:7325', remoteToken: 'from-settings' }).settings;
  assert.equal(initializationOptions(remote, 'abc').token, 'abc', 'the stored token, never the settings one');
  assert.equal(initializationOptions(remote).token, undefined);
});

test('initialization options carry the protocol version and settings', () => {
  const { settings } = readSettings({ targets: ['T4'], batchSize: 32, trigger: 'manual', pythonEnv: '/opt/venv' });
  assert.deepEqual(initializationOptions(settings), {
    protocol_version: 2,
    targets: ['T4'],
    parallelTargets: [],
    batchSize: 32,
    trigger: 'manual',
    pythonEnv: '/opt/venv',
    debounceMs: 0,
    lineCodeLens: false,
    lineDiagnostics: false,
    scriptArgs: { '': [] },
    scriptWorkingDirectories: {},
    worldSize: null,
    compile: null,
  });
});

test('the daemon gets only accepted values, the worker environment, and no targets (they go through setTargets)', () => {
  const { settings, problems } = readSettings({ targets: ['H100'], batchSize: 0, trigger: 'manual', debounceMs: 'x', lineCodeLens: true });
  assert.equal(problems.length, 2);
  assert.match(problems[0], /wavecast.batchSize: the batch size must be at least 1; using the script's default\./);
  assert.deepEqual(daemonSettings(settings, null), {
    parallelTargets: [],
    batchSize: null,
    trigger: 'manual',
    pythonEnv: '',
    debounceMs: 0,
    lineCodeLens: true,
    lineDiagnostics: false,
    scriptArgs: { '': [] },
    scriptWorkingDirectories: {},
    worldSize: null,
    compile: null,
  });
  assert.equal(daemonSettings(settings, '/v/bin/python').pythonEnv, '/v/bin/python');
  assert.equal(initializationOptions(settings, null, '/v/bin/python').pythonEnv, '/v/bin/python');
});

test('multi-GPU targets: words or parts kept, anything else named and dropped', () => {
  const { settings, problems } = readSettings({
    parallelTargets: [' 8x H100-SXM, FSDP ', { gpu: 'A100-80GB', count: 16, layout: 'tp2', system: 'HGX-A100-80GB' }, { gpu: 'T4', count: 0 }, 7, ''],
  });
  assert.deepEqual(settings.parallelTargets, ['8x H100-SXM, FSDP', { gpu: 'A100-80GB', count: 16, layout: 'tp2', system: 'HGX-A100-80GB' }]);
  assert.equal(problems.length, 3);
  assert.match(problems[0], /^wavecast.parallelTargets: ignored \{"gpu":"T4","count":0\}/);
  assert.deepEqual(daemonSettings(settings, null).parallelTargets, settings.parallelTargets);
  assert.deepEqual(readSettings({ parallelTargets: 'fsdp' }).problems.length, 1);
  assert.equal(parallelTargetLabel(settings.parallelTargets[0]), '8× H100-SXM, FSDP');
  assert.equal(parallelTargetLabel(settings.parallelTargets[1]), '16× A100-80GB, tp2 on HGX-A100-80GB');
});

test('a settings problem is new once; fixed and back, it is new again', () => {
  const memory = new SettingsProblemMemory();
  assert.deepEqual(memory.unreported(['a', 'b']), ['a', 'b']);
  assert.deepEqual(memory.unreported(['a', 'b']), []);
  assert.deepEqual(memory.unreported(['b', 'c']), ['c']);
  assert.deepEqual(memory.unreported([]), []);
  assert.deepEqual(memory.unreported(['a']), ['a']);
});

test('script arguments: the setting for every script, a launch configuration\'s args and cwd for its program', () => {
  const { settings, problems } = readSettings({ scriptArgs: ['--lr', '0.1'] });
  assert.deepEqual(problems, []);
  const launch = launchScripts(
    [
      { type: 'debugpy', program: '${workspaceFolder}/train.py', args: ['--batch-size', '64'], cwd: '${workspaceFolder}/runs' },
      { type: 'debugpy', program: 'tools/finetune.py', args: ['--epochs', '1'] },
      { type: 'debugpy', program: 'tools/eval.py', cwd: 'tools' },
      { type: 'debugpy', program: '${file}', args: ['--ignored'] },
      { type: 'node', program: 'app.js' },
    ],
    '/work/project',
  );
  assert.deepEqual(daemonSettings(settings, null, launch).scriptArgs, {
    '': ['--lr', '0.1'],
    '/work/project/train.py': ['--batch-size', '64'],
    '/work/project/tools/finetune.py': ['--epochs', '1'],
  });
  assert.deepEqual(daemonSettings(settings, null, launch).scriptWorkingDirectories, {
    '/work/project/train.py': '/work/project/runs',
    '/work/project/tools/eval.py': '/work/project/tools',
  });
  assert.match(readSettings({ scriptArgs: '--lr 0.1' }).problems[0], /wavecast.scriptArgs must be a list of strings/);
});

test('world size: whole ranks go to the daemon, anything else is named and left to its 8', () => {
  const { settings, problems } = readSettings({ worldSize: 64 });
  assert.deepEqual(problems, []);
  assert.equal(daemonSettings(settings, null).worldSize, 64);
  const bad = readSettings({ worldSize: 0.5 });
  assert.equal(bad.settings.worldSize, null);
  assert.match(bad.problems[0], /wavecast.worldSize must be a whole number of ranks/);
});

test('compile: "script" sends null, a mode goes to the daemon as written (it names a wrong one)', () => {
  assert.equal(daemonSettings(readSettings({}).settings, null).compile, null);
  assert.equal(daemonSettings(readSettings({ compile: 'script' }).settings, null).compile, null);
  const { settings, problems } = readSettings({ compile: 'reduce-overhead' });
  assert.deepEqual(problems, []);
  assert.equal(daemonSettings(settings, null).compile, 'reduce-overhead');
  const bad = readSettings({ compile: 3 });
  assert.equal(bad.settings.compile, null);
  assert.match(bad.problems[0], /wavecast.compile must be "script" or a torch.compile mode/);
});
