/**
 * managedFields bookkeeping cost per write (managed-fields.ts `track`), for a
 * Deployment-sized object, against the server's own per-write baseline in the
 * same run: `structuredClone` of the object (the store clones every body once).
 * Cases: a create, an update changing one field, an apply of the whole object.
 *
 * Run: node --import tsx bench/managed-fields.ts [--ms 1000]
 */
import { parseArgs } from 'node:util';
import { track } from '../src/devcluster/apiserver/managed-fields.ts';

const { values } = parseArgs({ options: { ms: { type: 'string', default: '1000' } } });
const MS = Number(values.ms);

const container = (i: number): Record<string, unknown> => ({
  name: `c${i}`, image: 'registry.example.com/shop/web:1.27.3', args: ['--port=8080'],
  ports: [{ name: 'http', containerPort: 8080 + i, protocol: 'TCP' }],
  env: [{ name: 'A', value: '1' }, { name: 'B', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
  resources: { limits: { cpu: '500m', memory: '128Mi' }, requests: { cpu: '250m', memory: '64Mi' } },
  securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
});
const deployment = (image: string): Record<string, unknown> => ({
  apiVersion: 'apps/v1', kind: 'Deployment',
  metadata: { name: 'web', namespace: 'shop', labels: { app: 'web', team: 'shop' }, annotations: { note: 'x' } },
  spec: {
    replicas: 3, selector: { matchLabels: { app: 'web' } },
    template: { metadata: { labels: { app: 'web' } }, spec: { serviceAccountName: 'web', containers: [{ ...container(0), image }, container(1)] } },
  },
});

function time(fn: () => unknown): number {
  for (let i = 0; i < 200; i++) fn();
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < MS) {
    for (let i = 0; i < 50; i++) fn();
    n += 50;
    now = performance.now();
  }
  return ((now - start) * 1e3) / n; // µs
}

const base = deployment('a');
const created = structuredClone(base);
track(undefined, created, { manager: 'kubectl-create', apiVersion: 'apps/v1', subresource: '' });
const w = { apiVersion: 'apps/v1', subresource: '' };
const clone = time(() => structuredClone(base));
// Each case reuses its inputs (track only rewrites next.metadata.managedFields), so only the bookkeeping is timed.
const fresh = structuredClone(base);
const changed = deployment('b');
const same = deployment('a');
const config = deployment('a');
const create = time(() => track(undefined, fresh, { ...w, manager: 'kubectl-create' }));
const update = time(() => track(created, changed, { ...w, manager: 'kubectl-set' }));
const apply = time(() => track(created, same, { ...w, manager: 'ci', apply: { config, force: true } }));
const r = (x: number): number => +x.toFixed(1);
console.log(JSON.stringify({
  benchmark: 'managed-fields', node: process.version, msPerMeasurement: MS,
  results: {
    baselineStructuredCloneUs: r(clone),
    createUs: r(create), updateUs: r(update), applyUs: r(apply),
    ratioToClone: { create: r(create / clone), update: r(update / clone), apply: r(apply / clone) },
  },
}, null, 2));
