/**
 * The cost per request of the webhook's connection accounting (issue 31
 * item 3): the connection guard's request listener (in-flight count, body
 * clock) and the peer queue's turn (PeerQueue.enter, and its `close`
 * listener), on the path every review takes while nothing waits.
 *
 * The admission bench (bench/admission.ts) measures whole requests over TLS;
 * on a loaded 2-vCPU machine its noise (tens of µs per request between
 * rounds) is far above what is measured here, so this runs the two pieces
 * in-process on stand-in requests and responses, against a baseline in the
 * same run: a response with one `close` listener emitted (what any request
 * costs Node already). Rounds alternate; the summary is the median of the
 * per-round differences.
 *
 * Run: node --import tsx bench/connection-accounting.ts [--rounds 15] [--n 200000]
 * Prints one JSON object on stdout.
 */
import { EventEmitter } from 'node:events';
import { Server, type IncomingMessage, type ServerResponse } from 'node:http';
import { loadavg } from 'node:os';
import { guardConnections } from '../src/admission/connection-guard.ts';
import { CONNECTION_LIMITS } from '../src/admission/limits.ts';
import { PeerQueue } from '../src/admission/peer-queue.ts';

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}
const ROUNDS = Number(flag('rounds', '15'));
const N = Number(flag('n', '200000'));

/** A socket as the guard sees it: an address, a byte count, close and destroy. */
class FakeSocket extends EventEmitter {
  remoteAddress = '127.0.0.1';
  remotePort = 40000;
  bytesRead = 0;
  destroyed = false;
  destroy(): void {
    this.destroyed = true;
  }
}

const sock = new FakeSocket();
const server = new Server();
const guard = guardConnections(server, {
  maxConnections: CONNECTION_LIMITS.maxConnections,
  maxPerPeer: CONNECTION_LIMITS.maxPerPeer,
  tls: false,
  bodyRate: { graceMs: CONNECTION_LIMITS.bodyGraceMs, minBytesPerSecond: CONNECTION_LIMITS.minBodyBytesPerSecond, checkIntervalMs: 60_000 },
});
server.emit('connection', sock);
let dispatched = 0;
const queue = new PeerQueue({ maxActive: CONNECTION_LIMITS.maxActive, maxActivePerPeer: CONNECTION_LIMITS.maxActivePerPeer, dispatch: () => dispatched++ });
const headers = { 'content-type': 'application/json', 'content-length': '4344' };
const noop = (): void => {};

function baseline(): number {
  const t = performance.now();
  for (let i = 0; i < N; i++) {
    const res = new EventEmitter();
    res.once('close', noop);
    res.emit('close');
  }
  return ((performance.now() - t) * 1000) / N;
}

function accounted(): number {
  const t = performance.now();
  for (let i = 0; i < N; i++) {
    const req = { socket: sock, headers, complete: true } as unknown as IncomingMessage;
    const res = new EventEmitter() as unknown as ServerResponse;
    res.once('close', noop);
    server.emit('request', req, res);
    queue.enter(req, res);
    res.emit('close');
  }
  return ((performance.now() - t) * 1000) / N;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
baseline();
accounted();
const base: number[] = [];
const with_: number[] = [];
const diff: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  let a: number;
  let b: number;
  if (r % 2 === 0) {
    b = baseline();
    a = accounted();
  } else {
    a = accounted();
    b = baseline();
  }
  base.push(b);
  with_.push(a);
  diff.push(a - b);
}
if (dispatched !== N * (ROUNDS + 1) || guard.stats().open !== 1) throw new Error('the accounting did not run as on the server');
console.log(
  JSON.stringify(
    {
      benchmark: 'connection-accounting',
      machine: { loadavg1m: loadavg().map((x) => Math.round(x * 100) / 100), node: process.version },
      requestsPerRound: N,
      rounds: ROUNDS,
      median: { baselineUs: +median(base).toFixed(3), accountedUs: +median(with_).toFixed(3), addedUsPerRequest: +median(diff).toFixed(3), ratio: +(median(with_) / median(base)).toFixed(2) },
    },
    null,
    2,
  ),
);
