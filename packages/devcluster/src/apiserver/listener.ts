/**
 * The API server's listening socket. `portal dev` serves HTTPS only, as
 * kube-apiserver does. In-process tests may also ask for the legacy
 * "one port, two protocols" mode (`plainHttp`): client-node and fetch reach
 * it over http:// without a CA, while kubectl (client-go 1.35 never sends a
 * bearer token over plain HTTP) uses https:// on the same port. There the
 * first byte of a connection decides: 0x16 is a TLS handshake record.
 */
import { createServer as createHttp, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttps } from 'node:https';
import { connect, createServer as createNet, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { generate } from 'selfsigned';
import { listenError } from './listen-error.ts';

const TLS_HANDSHAKE = 0x16;

export interface Listener {
  /** PEM of the serving certificate (self-signed unless given). */
  cert: string;
  /** Open client connections (and relay legs), destroyed by close(). */
  sockets: Set<Socket>;
  /**
   * Binds `host:port`. A port in use rejects with a PortalError
   * (ConfigInvalid) naming it; nothing stays bound or listening then.
   */
  listen(port: number, host: string): Promise<void>;
  address(): AddressInfo;
  /** Stops listening and destroys every open connection. Idempotent. */
  close(): Promise<void>;
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

function bind(server: NetServer, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onError = (err: Error): void => reject(listenError(err, host, port));
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

function closeServer(server: NetServer): Promise<void> {
  return new Promise<void>((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
  });
}

function tuned<T extends Server>(s: T): T {
  // Watches are long-lived; never let Node's default timeouts cut them.
  s.requestTimeout = 0;
  s.keepAliveTimeout = 65_000;
  return s;
}

/**
 * One port for both: plain HTTP goes to `http`, a TLS handshake is relayed
 * to the HTTPS server on its internal loopback port (`tlsPort`, known once it listens).
 */
function sniffingServer(http: Server, track: (socket: Socket) => void, tlsPort: () => number): NetServer {
  return createNet((socket) => {
    track(socket);
    // net.Server sockets keep Nagle on (unlike http.Server's): a small watch
    // event written while the previous one is unacknowledged would wait for
    // the peer's delayed ACK (~40 ms on Linux).
    socket.setNoDelay(true);
    socket.on('error', () => socket.destroy());
    socket.once('data', (chunk: Buffer) => {
      if (chunk[0] !== TLS_HANDSHAKE) {
        socket.pause();
        socket.unshift(chunk);
        http.emit('connection', socket);
        socket.resume();
        return;
      }
      const upstream = connect(tlsPort(), '127.0.0.1');
      upstream.setNoDelay(true);
      track(upstream);
      upstream.once('close', () => socket.destroy());
      upstream.on('error', () => upstream.destroy());
      socket.once('close', () => upstream.destroy());
      upstream.write(chunk);
      socket.pipe(upstream).pipe(socket);
    });
  });
}

export function createListener(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  tls: { cert: string; key: string },
  opts: { plainHttp: boolean },
): Listener {
  const https = tuned(createHttps({ cert: tls.cert, key: tls.key }, handler));
  const sockets = new Set<Socket>();
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  let closing: Promise<void> | undefined;
  const destroyAll = (): void => {
    for (const s of sockets) s.destroy();
  };

  if (!opts.plainHttp) {
    https.on('connection', (socket: Socket) => {
      track(socket);
      socket.setNoDelay(true);
    });
    return {
      cert: tls.cert,
      sockets,
      listen: (port, host) => bind(https, port, host),
      address: () => https.address() as AddressInfo,
      close() {
        closing ??= (async () => {
          const done = closeServer(https);
          destroyAll();
          await done;
        })();
        return closing;
      },
    };
  }

  const http = tuned(createHttp(handler));
  // A TLS socket reads from the kernel handle directly, so bytes already
  // read cannot be handed to it; TLS connections are therefore relayed to
  // the HTTPS server on an internal loopback port.
  let tlsPort = 0;
  https.on('connection', track);
  const net = sniffingServer(http, track, () => tlsPort);
  return {
    cert: tls.cert,
    sockets,
    async listen(port, host) {
      // The public port first: when it is taken nothing else was opened.
      await bind(net, port, host);
      try {
        await bind(https, 0, '127.0.0.1');
      } catch (err) {
        await closeServer(net);
        throw err;
      }
      tlsPort = (https.address() as AddressInfo).port;
    },
    address: () => net.address() as AddressInfo,
    close() {
      closing ??= (async () => {
        const done = Promise.all([closeServer(net), closeServer(https)]);
        destroyAll();
        await done;
      })();
      return closing;
    },
  };
}
