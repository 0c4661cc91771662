/** Raw sockets to a test webhook server, for the tests of what a connection may hold. */
import { connect as tcpConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import type { TestPki } from './helpers.ts';

/** A TLS connection to `port`; the TCP connection first, so it can come from another loopback address (a distinct peer). */
export function rawTls(pki: TestPki, port: number, localAddress = '127.0.0.1'): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const sock = tlsConnect({ socket: tcpConnect({ host: '127.0.0.1', port, localAddress }), ca: pki.ca.cert, servername: 'localhost' });
    sock.once('secureConnect', () => resolve(sock));
    sock.once('error', reject);
  });
}

/** Everything the server sends until it closes the socket, when that happened, and the socket's error (its code) if one came. */
export function untilClosed(sock: Socket): Promise<{ text: string; at: number; error?: string }> {
  return new Promise((resolve) => {
    let text = '';
    let error: string | undefined;
    sock.on('data', (d: Buffer) => (text += d.toString('latin1')));
    sock.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    sock.on('close', () => resolve({ text, at: performance.now(), ...(error !== undefined ? { error } : {}) }));
  });
}
