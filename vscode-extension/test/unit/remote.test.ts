import { strict as assert } from 'node:assert';
import * as net from 'node:net';
import { test } from 'node:test';
import { connectRemote, isAuthenticationError } from '../../src/logic/remote';

test('connects to a listening daemon and hands over the open socket', async () => {
  const received: Buffer[] = [];
  const server = net.createServer((socket) => socket.on('data', (chunk) => received.push(chunk)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  try {
    const socket = await connectRemote({ host: '127.0.0.1', port });
    await new Promise<void>((resolve) => socket.write('Content-Length: 2\r\n\r\n{}', () => resolve()));
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(Buffer.concat(received).toString(), 'Content-Length: 2\r\n\r\n{}');
    socket.destroy();
  } finally {
    server.close();
  }
});

test('nothing listening gives a how-to-fix message', async () => {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  await assert.rejects(
    connectRemote({ host: '127.0.0.1', port }),
    new RegExp(`nothing listens on 127.0.0.1:${port}. Start it with \`wavecast serve --listen 127.0.0.1:${port}\``),
  );
});

test('the daemon’s token refusal is recognised', () => {
  assert.equal(isAuthenticationError("authentication failed: initializationOptions.token must be the daemon's token (printed at start)"), true);
  assert.equal(isAuthenticationError('unknown method wavecast/foo'), false);
});
