import net from 'node:net';
import { listenError } from '../apiserver/listen-error.ts';

/**
 * A loopback port that was free a moment ago. Replicas need their ports
 * before they start (they are passed as flags and stay fixed across
 * restarts), so ports are reserved by binding port 0 and releasing it; the
 * short race with other programs is acceptable for a dev tool.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Why `host:port` cannot be listened on (taken, not allowed), or undefined.
 * Checked before anything else is loaded so that the commonest start-up
 * failure is reported at once; the real bind reports a race the same way.
 */
export async function portProblem(port: number, host = '127.0.0.1'): Promise<string | undefined> {
  if (port === 0) return undefined;
  const server = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
  } catch (err) {
    return listenError(err, host, port).message;
  }
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return undefined;
}
