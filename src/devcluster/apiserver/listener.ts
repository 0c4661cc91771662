/**
 * One port, two protocols. kubectl (client-go 1.35) never sends a bearer
 * token over plain HTTP (verified: the Authorization header is simply
 * omitted), so kubeconfigs point at https://; client-node and tests may use
 * http:// on the same port. The first byte of a connection decides: 0x16 is
 * a TLS handshake record.
 */
import { createServer as createHttp, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttps } from 'node:https';
import { connect, createServer as createNet, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { generate } from 'selfsigned';

const TLS_HANDSHAKE = 0x16;

export interface DualListener {
  net: NetServer;
  http: Server;
  https: Server;
  /** PEM of the serving certificate (self-signed unless given). */
  cert: string;
  sockets: Set<Socket>;
  listen(port: number, host: string): Promise<void>;
}

export async function selfSignedCert(): Promise<{ cert: string; key: string }> {
  const pems = await generate([{ name: 'commonName', value: 'portal-dev-apiserver' }], {
    keyType: 'ec', curve: 'P-256', algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, keyCertSign: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }, { type: 7, ip: '::1' }] },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

export function dualListener(handler: (req: IncomingMessage, res: ServerResponse) => void, tls: { cert: string; key: string }): DualListener {
  const http = createHttp(handler);
  const https = createHttps({ cert: tls.cert, key: tls.key }, handler);
  for (const s of [http, https]) {
    // Watches are long-lived; never let Node's default timeouts cut them.
    s.requestTimeout = 0;
    s.keepAliveTimeout = 65_000;
  }
  const sockets = new Set<Socket>();
  // A TLS socket reads from the kernel handle directly, so bytes already
  // read cannot be handed to it; TLS connections are therefore relayed to
  // the HTTPS server on an internal loopback port (kubectl traffic only).
  let tlsPort = 0;
  const net = createNet((socket) => {
    sockets.add(socket);
    // net.Server sockets keep Nagle on (unlike http.Server's): a small watch
    // event written while the previous one is unacknowledged would wait for
    // the peer's delayed ACK (~40 ms on Linux).
    socket.setNoDelay(true);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.once('data', (chunk: Buffer) => {
      if (chunk[0] !== TLS_HANDSHAKE) {
        socket.pause();
        socket.unshift(chunk);
        http.emit('connection', socket);
        socket.resume();
        return;
      }
      const upstream = connect(tlsPort, '127.0.0.1');
      upstream.setNoDelay(true);
      sockets.add(upstream);
      upstream.once('close', () => { sockets.delete(upstream); socket.destroy(); });
      upstream.on('error', () => upstream.destroy());
      socket.once('close', () => upstream.destroy());
      upstream.write(chunk);
      socket.pipe(upstream).pipe(socket);
    });
  });
  net.once('close', () => https.close());
  const listen = async (port: number, host: string): Promise<void> => {
    await new Promise<void>((resolve, reject) => {
      https.once('error', reject);
      https.listen(0, '127.0.0.1', () => resolve());
    });
    tlsPort = (https.address() as AddressInfo).port;
    await new Promise<void>((resolve, reject) => {
      net.once('error', reject);
      net.listen(port, host, () => resolve());
    });
  };
  return { net, http, https, cert: tls.cert, sockets, listen };
}
