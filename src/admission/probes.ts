/**
 * The plain-HTTP probes server (separate factory, separate port):
 * `/healthz` and `/livez` (pluggable liveness checks, e.g. the leader
 * elector's health), `/readyz` (the readiness gate, 503 with reasons),
 * `/metrics` (the injected prom-client Registry) and `/debug/vars`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { fastify, type FastifyInstance, type FastifyReply } from 'fastify';
import type { Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { DebugVars } from '../observability/debug-vars.ts';
import { guardConnections } from './connection-guard.ts';
import { LogKey } from '../observability/log-keys.ts';
import type { ReadinessGate } from './readiness.ts';
import { toError } from '../observability/errors.ts';

/** A liveness check: `true` when healthy, otherwise the reason. */
export type HealthCheck = () => true | string;

export class HealthChecks {
  readonly #checks = new Map<string, HealthCheck>();

  /** Adds (or replaces) a check; returns a remover. */
  add(name: string, check: HealthCheck): () => void {
    this.#checks.set(name, check);
    return () => this.#checks.delete(name);
  }

  run(): { ok: boolean; results: { name: string; ok: boolean; reason?: string }[] } {
    const results = [...this.#checks].map(([name, check]) => {
      let r: true | string;
      try {
        r = check();
      } catch (err) {
        r = err instanceof Error ? err.message : String(err);
      }
      return r === true ? { name, ok: true } : { name, ok: false, reason: r };
    });
    return { ok: results.every((r) => r.ok), results };
  }
}

export interface ProbesServerOptions {
  registry: Registry;
  gate: ReadinessGate;
  liveness: HealthChecks;
  debugVars: DebugVars;
  logger: Logger;
}

/**
 * Bounds of the probes port (issue 16: a cap that idle clients cannot hold;
 * issue 31: 80 slow `POST /metrics` held it and every probe failed).
 * Its clients are the kubelet (three probes, each a short GET), one or
 * two metrics scrapers and an operator's curl: a few connections at a time.
 * Every route is a GET, so a request with a body is refused at once, unread,
 * and its connection closed (`refuseBody`): no client can hold a request
 * open by trickling a body. What is left in flight is a GET being answered,
 * which takes milliseconds; everything else (handshake-less silent
 * connections, idle ones, headers still arriving) is what the guard closes
 * at the cap, so a new connection from the kubelet always gets room.
 */
export const PROBES_LIMITS = Object.freeze({
  /** Open connections; at the cap the one furthest from a complete request is closed (connection-guard.ts). */
  maxConnections: 64,
  /** From one remote address: the kubelet's node address needs three at most. */
  maxPerPeer: 16,
  /** Headers must be complete within this (Node's default: 60 s); a probe writes them at once, and its timeoutSeconds is 1 by default. */
  headersMs: 2_000,
  /** The whole request (it has no body), answered 408 past it. */
  requestMs: 2_000,
});

/** Whether the request announces a body: none of the probes port's routes takes one. */
function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');
}

/** 413 without reading the body, and the connection closed after the answer (Node does not wait for the body then). */
function refuseBody(req: IncomingMessage, res: ServerResponse): void {
  const text = `${req.method ?? ''} ${req.url ?? ''}: the probes port takes no request body\n`;
  res.writeHead(413, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text), connection: 'close' });
  res.end(text, () => req.socket.destroy());
}

export function buildProbesServer(opts: ProbesServerOptions): FastifyInstance {
  const app = fastify({
    logger: false,
    // Requests with a body never reach fastify (see PROBES_LIMITS).
    serverFactory: (handler) => {
      const bounds = { headersTimeout: PROBES_LIMITS.headersMs, requestTimeout: PROBES_LIMITS.requestMs, connectionsCheckingInterval: 1_000 };
      const server = createServer(bounds, (req, res) => (hasBody(req) ? refuseBody(req, res) : handler(req, res)));
      return server;
    },
    forceCloseConnections: true,
    requestTimeout: PROBES_LIMITS.requestMs,
  });
  // The same guard as the webhook's, without a TLS handshake: a request being answered is never cut.
  guardConnections(app.server, { maxConnections: PROBES_LIMITS.maxConnections, maxPerPeer: PROBES_LIMITS.maxPerPeer, tls: false });

  const live = (_req: unknown, reply: FastifyReply): FastifyReply => {
    const { ok, results } = opts.liveness.run();
    const lines = results.map((r) => (r.ok ? `[+]${r.name} ok` : `[-]${r.name} failed: ${r.reason}`));
    return reply
      .code(ok ? 200 : 500)
      .type('text/plain; charset=utf-8')
      .send(`${[...lines, ok ? 'ok' : 'healthz check failed'].join('\n')}\n`);
  };
  app.get('/healthz', live);
  app.get('/livez', live);

  app.get('/readyz', (_req, reply) => {
    const { ready, reasons } = opts.gate.status();
    return reply
      .code(ready ? 200 : 503)
      .type('text/plain; charset=utf-8')
      .send(ready ? 'ok\n' : `not ready:\n${reasons.map((r) => `[-]${r}`).join('\n')}\n`);
  });

  app.get('/metrics', async (_req, reply) => {
    try {
      const text = await opts.registry.metrics();
      return reply.type(opts.registry.contentType).send(text);
    } catch (err) {
      opts.logger.error({ [LogKey.error]: toError(err) }, 'cannot collect metrics');
      return reply.code(500).type('text/plain').send('cannot collect metrics\n');
    }
  });

  app.get('/debug/vars', (_req, reply) => reply.type('application/json').send(JSON.stringify(opts.debugVars.snapshot(), null, 2)));

  return app;
}
