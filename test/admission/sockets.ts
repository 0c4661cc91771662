/** Raw sockets to a test webhook server, for the tests of what a connection may hold (and bench/accept's queue). */
import { execFileSync } from 'node:child_process';
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

/**
 * Opens `n` connections to `port` in a child process that exits once all are
 * established. The caller is blocked meanwhile, so the kernel holds them all
 * queued on the listening socket(s): a flood's reconnections, in one call.
 */
export function queueConnections(port: number, n: number): void {
  const script = `const net = require('node:net'); let left = ${n};
    for (let i = 0; i < ${n}; i++) { const c = net.connect(${port}, '127.0.0.1', () => { if (--left === 0) process.exit(0); }); c.on('error', (e) => { console.error(e.message); process.exit(1); }); }`;
  execFileSync(process.execPath, ['-e', script], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 60_000 });
}
