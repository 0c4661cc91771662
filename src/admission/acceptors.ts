/**
 * More than one new connection accepted per event-loop turn (issue 31).
 *
 * libuv accepts one connection per listening socket per turn of the event
 * loop. On a loaded replica a turn takes tens of milliseconds, so one
 * socket accepts a few dozen connections a second, and the kernel's accept
 * queue is first come, first served: an attacker reconnecting every
 * connection the guard closes kept ~240 connections queued on one replica,
 * and a new connection of the API server waited behind them for up to 5 s
 * (measured with `ss -ltn` and strace; the victim's webhook calls timed out
 * while the main thread was idle a third of the time).
 *
 * So the server listens on `count` sockets bound to the same address with
 * SO_REUSEPORT: the kernel spreads new connections over them, each is
 * accepted on its own turn slot, and the queue drains `count` times faster.
 * The extra sockets hand each connection to the server as Node documents
 * for injected connections (`server.emit('connection', socket)`), so the
 * connection guard, TLS and the HTTP timeouts see it as any other. Linux
 * only lets sockets of the same user join a SO_REUSEPORT group.
 */
import { createServer, type Server as NetServer, type Socket } from 'node:net';

export interface AcceptorsOptions {
  /** Listening sockets in all, the server's own included; 1: none added. */
  count: number;
  /** Called once if the extra sockets cannot listen (the server keeps its own). */
  onError?: (err: Error) => void;
}

/**
 * Adds `count - 1` listening sockets to `server` each time it starts
 * listening, closed with it. The server's own socket must be in the
 * SO_REUSEPORT group too, so its `listen(options)` is given `reusePort`
 * (fastify always listens with an options object). Its `close(callback)`
 * calls back once every socket's connections have ended: Node's own close
 * waits only for the connections its socket accepted, and a request that
 * came through another would still be in flight.
 */
export function addAcceptors(server: NetServer, opts: AcceptorsOptions): void {
  if (opts.count <= 1) return;
  let extra: NetServer[] = [];
  const listen = server.listen.bind(server) as (...args: unknown[]) => NetServer;
  server.listen = ((...args: unknown[]) => {
    const [first, ...rest] = args;
    return typeof first === 'object' && first !== null ? listen({ ...first, reusePort: true }, ...rest) : listen(...args);
  }) as NetServer['listen'];
  const close = server.close.bind(server);
  server.close = ((callback?: (err?: Error) => void) => {
    const closing = extra;
    extra = [];
    const drained = Promise.all(closing.map((s) => new Promise<void>((resolve) => (s.listening ? s.close(() => resolve()) : resolve()))));
    return close((err?: Error) => void drained.then(() => callback?.(err)));
  }) as NetServer['close'];
  server.on('listening', () => {
    const address = server.address();
    if (address === null || typeof address === 'string') return; // a pipe: nothing to share
    let failed = false;
    for (let i = 1; i < opts.count; i++) {
      const s = createServer((socket: Socket) => server.emit('connection', socket));
      s.once('error', (err) => {
        if (failed) return;
        failed = true;
        for (const other of extra.splice(0)) if (other.listening) other.close();
        opts.onError?.(err);
      });
      s.listen({ port: address.port, host: address.address, reusePort: true });
      extra.push(s);
    }
  });
}
