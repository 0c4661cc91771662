/**
 * The plain-HTTP probes server (separate factory, separate port):
 * `/healthz` and `/livez` (pluggable liveness checks, e.g. the leader
 * elector's health), `/readyz` (the readiness gate, 503 with reasons),
 * `/metrics` (the injected prom-client Registry) and `/debug/vars`.
 */
import { fastify, type FastifyInstance, type FastifyReply } from 'fastify';
import type { Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { DebugVars } from '../observability/debug-vars.ts';
import { LogKey } from '../observability/log-keys.ts';
import type { ReadinessGate } from './readiness.ts';

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

export function buildProbesServer(opts: ProbesServerOptions): FastifyInstance {
  const app = fastify({ logger: false, forceCloseConnections: true });

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
      opts.logger.error({ [LogKey.error]: err }, 'cannot collect metrics');
      return reply.code(500).type('text/plain').send('cannot collect metrics\n');
    }
  });

  app.get('/debug/vars', (_req, reply) => reply.type('application/json').send(JSON.stringify(opts.debugVars.snapshot(), null, 2)));

  return app;
}
