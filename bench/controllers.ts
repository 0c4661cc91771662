/**
 * Cost of the workload controllers and the simulated node at 1,000 Pods
 * (issue 11): time from creating a Deployment of 1,000 replicas to
 * `rollout status` being complete (every Pod created through admission,
 * bound, Running and Ready, ReplicaSet and Deployment status current), a
 * rolling update of those 1,000 Pods (set image) and a scale to 0, each
 * against the baseline measured in the same run: a client creating 1,000
 * Pods over HTTP (16 in flight) on a server without controllers. Also the
 * store writes per Pod (resourceVersion delta / 1,000).
 *
 * Run: node --import tsx bench/controllers.ts [--pods 1000]
 */
import { parseArgs } from 'node:util';
import { startApiServer, type ApiServer } from '../packages/devcluster/src/apiserver/index.ts';

const { values } = parseArgs({ options: { pods: { type: 'string', default: '1000' } } });
const N = Number(values.pods);

async function call(s: ApiServer, method: string, path: string, body?: unknown, type = 'application/json'): Promise<Record<string, unknown>> {
  const res = await fetch(`${s.url}${path}`, { method, headers: { Authorization: `Bearer ${s.adminToken}`, 'Content-Type': type }, ...(body ? { body: JSON.stringify(body) } : {}) });
  const out = (await res.json()) as Record<string, unknown>;
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(out)}`);
  return out;
}

const rv = async (s: ApiServer): Promise<number> =>
  Number(((await call(s, 'GET', '/api/v1/namespaces?limit=1'))['metadata'] as Record<string, unknown>)['resourceVersion']);

const podSpec = { containers: [{ name: 'app', image: 'nginx:1', resources: { requests: { cpu: '10m', memory: '16Mi' } } }] };

async function baseline(): Promise<{ ms: number; writesPerPod: number }> {
  const s = await startApiServer({});
  try {
    const rv0 = await rv(s);
    const start = performance.now();
    let next = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (next < N) {
        const i = next++;
        await call(s, 'POST', '/api/v1/namespaces/default/pods', { metadata: { name: `p-${i}`, labels: { app: 'web' } }, spec: podSpec });
      }
    }));
    const ms = performance.now() - start;
    return { ms, writesPerPod: ((await rv(s)) - rv0) / N };
  } finally {
    await s.close();
  }
}

async function settle(s: ApiServer, done: (d: Record<string, unknown>) => boolean): Promise<void> {
  for (;;) {
    await s.controllersIdle();
    const d = await call(s, 'GET', '/apis/apps/v1/namespaces/default/deployments/web');
    if (done(d)) return;
  }
}

function rolledOut(replicas: number) {
  return (d: Record<string, unknown>): boolean => {
    const st = (d['status'] ?? {}) as Record<string, unknown>;
    const gen = (d['metadata'] as Record<string, unknown>)['generation'];
    return st['observedGeneration'] === gen && (st['updatedReplicas'] ?? 0) === replicas && (st['availableReplicas'] ?? 0) === replicas && (st['replicas'] ?? 0) === replicas;
  };
}

async function controllers(): Promise<Record<string, { ms: number; writesPerPod: number }>> {
  const s = await startApiServer({ controllers: true });
  const out: Record<string, { ms: number; writesPerPod: number }> = {};
  const step = async (name: string, act: () => Promise<unknown>, replicas: number): Promise<void> => {
    const rv0 = await rv(s);
    const start = performance.now();
    await act();
    await settle(s, rolledOut(replicas));
    out[name] = { ms: performance.now() - start, writesPerPod: ((await rv(s)) - rv0) / N };
  };
  try {
    const tpl = { metadata: { labels: { app: 'web' } }, spec: podSpec };
    await step('create', () => call(s, 'POST', '/apis/apps/v1/namespaces/default/deployments', {
      metadata: { name: 'web' }, spec: { replicas: N, selector: { matchLabels: { app: 'web' } }, template: tpl },
    }), N);
    await step('rollingUpdate', () => call(s, 'PATCH', '/apis/apps/v1/namespaces/default/deployments/web',
      { spec: { template: { spec: { containers: [{ name: 'app', image: 'nginx:2' }] } } } }, 'application/strategic-merge-patch+json'), N);
    await step('scaleTo0', () => call(s, 'PATCH', '/apis/apps/v1/namespaces/default/deployments/web/scale', { spec: { replicas: 0 } }, 'application/merge-patch+json'), 0);
  } finally {
    await s.close();
  }
  return out;
}

const base = await baseline();
const ctl = await controllers();
const round = (x: number): number => +x.toFixed(2);
const results: Record<string, unknown> = { baselineClientCreates: { ms: Math.round(base.ms), writesPerPod: round(base.writesPerPod) } };
for (const [k, v] of Object.entries(ctl)) results[k] = { ms: Math.round(v.ms), writesPerPod: round(v.writesPerPod), ratioToBaseline: round(v.ms / base.ms) };
console.log(JSON.stringify({ benchmark: 'controllers', pods: N, node: process.version, results }, null, 2));
