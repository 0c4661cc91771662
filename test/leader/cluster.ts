/**
 * Test helpers: a real embedded API server per test, clients for named users
 * (so faults can target one elector), and small polling utilities.
 */
import type { TestContext } from 'node:test';
import { Registry } from 'prom-client';
import { startApiServer, type ApiServer, type ApiServerOptions } from '../../packages/devcluster/src/apiserver/index.ts';
import { createKubeClient, type KubeClient } from '../../src/kube/client.ts';
import { leaderElectionConfig, type LeaderElectionConfig } from '../../src/leader/config.ts';
import { LeaderElector } from '../../src/leader/elector.ts';
import type { LeaderEventMap } from '../../src/leader/events.ts';
import { EventBus } from '../../src/observability/event-bus.ts';
import { silentLogger } from '../../src/observability/logger.ts';
export { until } from '../support/until.ts';

/** Short timings so a scenario takes about a second (validated like production ones). */
export const FAST: Partial<LeaderElectionConfig> = { leaseDurationMs: 1000, renewDeadlineMs: 600, retryPeriodMs: 200 };

export async function apiServer(t: TestContext, options: ApiServerOptions = {}): Promise<ApiServer> {
  const api = await startApiServer({ port: 0, ...options });
  t.after(() => api.close());
  return api;
}

export function clientFor(api: ApiServer, user: string): KubeClient {
  return createKubeClient({ kubeconfigYaml: api.kubeConfig(user), qps: 100, burst: 200, userAgent: `portal-test/${user}` });
}

export interface RunningElector {
  elector: LeaderElector;
  bus: EventBus<LeaderEventMap>;
  controller: AbortController;
  done: Promise<void>;
  leaders: string[];
  started: number;
  stopped: number;
  stop(): Promise<void>;
}

/** Starts an elector as user `name` (identity `<name>_test`) and stops it after the test. */
export function runElector(
  t: TestContext,
  api: ApiServer,
  name: string,
  config: Partial<LeaderElectionConfig> = {},
): RunningElector {
  const bus = new EventBus<LeaderEventMap>();
  const elector = new LeaderElector(leaderElectionConfig({ leaseNamespace: 'default', ...FAST, ...config }), {
    client: clientFor(api, name),
    identity: `${name}_test`,
    logger: silentLogger(),
    registry: new Registry(),
    bus,
  });
  const controller = new AbortController();
  const r: RunningElector = {
    elector,
    bus,
    controller,
    leaders: [],
    started: 0,
    stopped: 0,
    done: Promise.resolve(),
    async stop() {
      controller.abort();
      await r.done;
    },
  };
  // The elector's one channel: what the Manager, metrics and Events subscribe to.
  bus.on('BecameLeader', () => r.started++);
  bus.on('LostLeadership', () => r.stopped++);
  bus.on('NewLeaderObserved', (e) => r.leaders.push(e.new));
  r.done = elector.run(controller.signal);
  t.after(() => r.stop());
  return r;
}

/**
 * How many requests `user` has sent for `METHOD path` so far, from the API
 * server's own request log (/_portal/requests; reads included, counted when
 * served). The observable fact a test proves "it only read" from.
 */
export async function requestCount(api: ApiServer, user: string, request: string): Promise<number> {
  const res = await fetch(`${api.url}/_portal/requests`, { headers: { Authorization: `Bearer ${api.adminToken}` } });
  if (!res.ok) throw new Error(`/_portal/requests: HTTP ${res.status}`);
  const counts = (await res.json()) as Record<string, Record<string, number>>;
  return counts[user]?.[request] ?? 0;
}

export const LEASE_PATH = '/apis/coordination.k8s.io/v1/namespaces/default/leases/portal-leader';

/** Blocks the event loop (simulates a GC pause / SIGSTOP) for `ms`. */
export function freeze(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

export async function readLease(client: KubeClient, name = 'portal-leader', namespace = 'default') {
  return client.coordination.readNamespacedLease({ name, namespace });
}
