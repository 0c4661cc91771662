import net from 'node:net';

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
