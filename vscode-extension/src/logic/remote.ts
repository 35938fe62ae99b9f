// Connects to a daemon started with `wavecast serve --listen HOST:PORT`.
// The daemon authenticates the connection in `initialize`
// (initializationOptions.token), so the socket is handed to the language
// client as it is; this only turns connection failures into advice.
import * as net from 'net';
import type { RemoteAddress } from './settings';

export class RemoteConnectError extends Error {}

/** Resolves with a connected socket, or rejects with what to check. */
export function connectRemote(address: RemoteAddress, timeoutMs = 10_000): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const where = `${address.host}:${address.port}`;
    const socket = net.connect({ host: address.host, port: address.port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new RemoteConnectError(`The wavecast daemon at ${where} did not accept the connection within ${timeoutMs / 1000} s.`));
    }, timeoutMs);
    socket.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      const reason =
        error.code === 'ECONNREFUSED'
          ? `nothing listens on ${where}. Start it with \`wavecast serve --listen ${where}\` or fix wavecast.remoteAddress.`
          : `${error.message}. Check wavecast.remoteAddress.`;
      reject(new RemoteConnectError(`Could not connect to the wavecast daemon: ${reason}`));
    });
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
  });
}

/** The daemon's reply to a wrong token, recognised to point at the setting. */
export function isAuthenticationError(message: string): boolean {
  return /authenticat/i.test(message) && /token/i.test(message);
}
