/**
 * `npm run bench -- accept [--queued N] [--turn-ms W] [--sockets K] [--rounds R]`
 *
 * What a new connection waits behind a full accept queue (src/admission/acceptors.ts):
 * `N` connections are queued in the kernel while this process is blocked (a
 * flood's reconnections), then one more is opened (the API server's) and
 * every turn of the event loop costs `W` ms of work (a loaded replica).
 * Measured: turns and milliseconds until the late connection is accepted,
 * with the server listening on 1 socket (the baseline, Node's default) and
 * on `K` (SO_REUSEPORT), alternately for `R` rounds. libuv accepts one
 * connection per socket per turn, and the queue is first come, first served.
 */
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { addAcceptors } from '../src/admission/acceptors.ts';
import { queueConnections } from '../test/admission/sockets.ts';

const { values } = parseArgs({
  options: {
    queued: { type: 'string', default: '400' },
    'turn-ms': { type: 'string', default: '2' },
    sockets: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '5' },
  },
  strict: false,
});
const QUEUED = Number(values.queued);
const TURN_MS = Number(values['turn-ms']);
const SOCKETS = Number(values.sockets);
const ROUNDS = Number(values.rounds);

interface Round {
  turns: number;
  ms: number;
}

async function round(sockets: number): Promise<Round> {
  const accepted: Socket[] = [];
  const ports = new Set<number | undefined>();
  const server: Server = createServer((s) => {
    s.on('error', () => {});
    accepted.push(s);
    ports.add(s.remotePort);
  });
  addAcceptors(server, { count: sockets });
  server.listen({ port: 0, host: '127.0.0.1', backlog: 511 });
  await once(server, 'listening');
  await new Promise((resolve) => setImmediate(resolve));
  const port = (server.address() as AddressInfo).port;
  queueConnections(port, QUEUED);
  const started = performance.now();
  const late = connect(port, '127.0.0.1');
  late.on('error', () => {});
  await once(late, 'connect'); // the kernel's handshake: now it waits in a queue
  let turns = 0;
  while (!ports.has(late.localPort)) {
    turns++;
    const until = performance.now() + TURN_MS;
    while (performance.now() < until); // the turn's work
    await new Promise((resolve) => setImmediate(resolve));
  }
  const ms = performance.now() - started;
  late.destroy();
  for (const s of accepted) s.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return { turns, ms };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

const one: Round[] = [];
const several: Round[] = [];
for (let r = 0; r < ROUNDS; r++) {
  one.push(await round(1));
  several.push(await round(SOCKETS));
}
const m1 = median(one.map((x) => x.ms));
const mk = median(several.map((x) => x.ms));
console.log(
  JSON.stringify({
    bench: 'accept',
    setup: { queued: QUEUED, turnMs: TURN_MS, sockets: SOCKETS, rounds: ROUNDS },
    oneSocket: { turns: median(one.map((x) => x.turns)), ms: Math.round(m1), rounds: one },
    [`${SOCKETS}Sockets`]: { turns: median(several.map((x) => x.turns)), ms: Math.round(mk), rounds: several },
    ratio: Math.round((m1 / mk) * 10) / 10,
  }),
);
