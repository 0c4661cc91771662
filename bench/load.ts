/**
 * A lean HTTPS/1.1 load generator for the admission benchmark.
 *
 * Why not node:https? Its client costs about as much CPU per request as the
 * server under test; on a 2-core machine the generator then saturates first
 * and every server looks equally fast (the ratio drifts towards 1, which is
 * flattering and wrong). Here each connection is a raw keep-alive TLS socket
 * that writes one pre-encoded request (headers + body in a single Buffer) and
 * parses only the status line, Content-Length and the body: a few
 * microseconds of generator work per request.
 *
 * - closed loop: N connections, each sends the next request as soon as the
 *   previous one is answered (maximum throughput).
 * - open loop: a fixed request rate over N connections. Latency is measured
 *   from the *intended* send time, so when the server (or a busy connection)
 *   delays a request the wait is counted, not hidden (no coordinated
 *   omission). A request whose time has come waits in a queue for a free
 *   connection; it is never dropped or re-timed.
 */
import { connect, type TLSSocket } from 'node:tls';

export interface Target {
  port: number;
  ca: Buffer;
  body: Buffer;
  /** Checks a response body; false counts as an error. */
  check: (body: string) => boolean;
}

export interface LoadResult {
  requests: number;
  errors: number;
  seconds: number;
  rps: number;
  p50ms: number;
  p99ms: number;
  maxms: number;
}

const HEADER_END = Buffer.from('\r\n\r\n');

function encodeRequest(body: Buffer): Buffer {
  const head = `POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), body]);
}

type Done = (ok: boolean) => void;

/** One keep-alive TLS connection that carries one request at a time. */
class Connection {
  readonly #target: Target;
  readonly #wire: Buffer;
  #socket: TLSSocket | undefined;
  #buf: Buffer = Buffer.alloc(0);
  #done: Done | undefined;

  constructor(target: Target, wire: Buffer) {
    this.#target = target;
    this.#wire = wire;
  }

  send(done: Done): void {
    this.#done = done;
    this.#buf = Buffer.alloc(0);
    const socket = this.#socket ?? this.#open();
    socket.write(this.#wire);
  }

  close(): void {
    const socket = this.#socket;
    this.#socket = undefined;
    socket?.destroy();
  }

  #open(): TLSSocket {
    const socket = connect({ host: '127.0.0.1', port: this.#target.port, servername: 'localhost', ca: this.#target.ca });
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      if (this.#socket === socket) this.#onData(chunk);
    });
    // Only the current socket can fail the request in flight: a late 'close'
    // from a replaced socket must not fail the next request.
    const fail = (): void => {
      if (this.#socket !== socket) return;
      this.#socket = undefined;
      socket.destroy();
      this.#finish(false);
    };
    socket.on('error', fail);
    socket.on('close', fail);
    this.#socket = socket;
    return socket;
  }

  #onData(chunk: Buffer): void {
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    const end = this.#buf.indexOf(HEADER_END);
    if (end < 0) return;
    const head = this.#buf.toString('latin1', 0, end);
    const m = /\r\ncontent-length: *(\d+)/i.exec(head);
    if (!m) {
      // This client only speaks Content-Length framing; both servers use it.
      this.close();
      this.#finish(false);
      return;
    }
    const bodyStart = end + HEADER_END.length;
    const bodyEnd = bodyStart + Number(m[1]);
    if (this.#buf.length < bodyEnd) return;
    const ok = head.startsWith('HTTP/1.1 200 ') && this.#target.check(this.#buf.toString('utf8', bodyStart, bodyEnd));
    this.#buf = Buffer.alloc(0);
    this.#finish(ok);
  }

  #finish(ok: boolean): void {
    const done = this.#done;
    this.#done = undefined;
    done?.(ok);
  }
}

function summarize(latencies: number[], errors: number, seconds: number): LoadResult {
  latencies.sort((a, b) => a - b);
  const q = (p: number): number => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
  const round = (n: number): number => Math.round(n * 1000) / 1000;
  return {
    requests: latencies.length,
    errors,
    seconds: round(seconds),
    rps: Math.round(latencies.length / seconds),
    p50ms: round(q(0.5)),
    p99ms: round(q(0.99)),
    maxms: round(latencies[latencies.length - 1] ?? NaN),
  };
}

function connections(t: Target, n: number): Connection[] {
  const wire = encodeRequest(t.body);
  return Array.from({ length: n }, () => new Connection(t, wire));
}

export async function closedLoop(t: Target, n: number, durationMs: number): Promise<LoadResult> {
  const conns = connections(t, n);
  const latencies: number[] = [];
  let errors = 0;
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(
    conns.map(
      (conn) =>
        new Promise<void>((resolve) => {
          const next = (): void => {
            const t0 = performance.now();
            if (t0 >= end) return resolve();
            conn.send((ok) => {
              if (ok) latencies.push(performance.now() - t0);
              else errors++;
              next();
            });
          };
          next();
        }),
    ),
  );
  const seconds = (performance.now() - start) / 1000;
  for (const c of conns) c.close();
  return summarize(latencies, errors, seconds);
}

export async function openLoop(t: Target, n: number, ratePerSecond: number, durationMs: number): Promise<LoadResult> {
  const idle = connections(t, n);
  const all = [...idle];
  const latencies: number[] = [];
  let errors = 0;
  const interval = 1000 / ratePerSecond;
  const total = Math.round((durationMs / 1000) * ratePerSecond);
  const start = performance.now();
  // Intended send times of requests that found no free connection, oldest first.
  const waiting: number[] = [];
  let sent = 0;
  let answered = 0;
  let finished: () => void = () => undefined;
  const allAnswered = new Promise<void>((resolve) => (finished = resolve));

  const dispatch = (conn: Connection, scheduled: number): void => {
    conn.send((ok) => {
      if (ok) latencies.push(performance.now() - scheduled);
      else errors++;
      if (++answered === total) finished();
      const nextScheduled = waiting.shift();
      if (nextScheduled !== undefined) dispatch(conn, nextScheduled);
      else idle.push(conn);
    });
  };

  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const now = performance.now();
      while (sent < total && start + sent * interval <= now) {
        const scheduled = start + sent * interval;
        sent++;
        const conn = idle.pop();
        if (conn) dispatch(conn, scheduled);
        else waiting.push(scheduled);
      }
      if (sent >= total) resolve();
      // 1 ms timers with catch-up (requests due since the last tick go out
      // now and keep their intended time): a busy loop would steal a core
      // from the servers.
      else setTimeout(tick, 1);
    };
    tick();
  });
  if (total > 0) await allAnswered;
  const seconds = (performance.now() - start) / 1000;
  for (const c of all) c.close();
  return summarize(latencies, errors, seconds);
}
