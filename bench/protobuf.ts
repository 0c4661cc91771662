/**
 * Protobuf codec cost per object against JSON for the same object (issue 11):
 * encode = JSON.stringify vs encodeObject (k8s\0 envelope + message), decode
 * = JSON.parse vs decodeObject, for a Pod, a Deployment, a ConfigMap and a
 * PodList of 100 Pods, plus the bytes on the wire. Ratios are against JSON
 * measured in the same run (V8's JSON is native code; the codec is JS).
 *
 * Run: node --import tsx bench/protobuf.ts [--ms 1000]
 */
import { parseArgs } from 'node:util';
import { decodeObject, encodeObject } from '../packages/devcluster/src/apiserver/protobuf/codec.ts';

const { values } = parseArgs({ options: { ms: { type: 'string', default: '1000' } } });
const MS = Number(values.ms);

const meta = (name: string): Record<string, unknown> => ({
  name, namespace: 'shop', uid: '2fc8fd74-aab4-45f7-be22-dd8fc1ea5507', resourceVersion: '123456', creationTimestamp: '2026-11-25T03:13:34Z',
  labels: { app: 'web', 'app.kubernetes.io/part-of': 'shop', 'pod-template-hash': '5d78c9b8b' },
  ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d78c9b8b', uid: '0f1e2d3c-0000-4000-8000-000000000001', controller: true, blockOwnerDeletion: true }],
});
const podSpec = {
  serviceAccountName: 'web', restartPolicy: 'Always', terminationGracePeriodSeconds: 30, dnsPolicy: 'ClusterFirst',
  securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
  containers: [{
    name: 'app', image: 'registry.example.com/shop/web:1.27.3', args: ['--port=8080', '--log-level=info'],
    ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }],
    env: [{ name: 'A', value: '1' }, { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
    resources: { limits: { cpu: '500m', memory: '128Mi' }, requests: { cpu: '250m', memory: '64Mi' } },
    readinessProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 5 },
    securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, readOnlyRootFilesystem: true },
    volumeMounts: [{ name: 'cfg', mountPath: '/etc/app', readOnly: true }],
  }],
  volumes: [{ name: 'cfg', configMap: { name: 'web' } }],
};
const pod = (i: number): Record<string, unknown> => ({ apiVersion: 'v1', kind: 'Pod', metadata: meta(`web-${i}`), spec: podSpec,
  status: { phase: 'Running', qosClass: 'Burstable', podIP: '10.0.0.12', startTime: '2026-11-25T03:13:35Z',
    conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: '2026-11-25T03:13:40Z' }],
    containerStatuses: [{ name: 'app', ready: true, restartCount: 0, image: 'registry.example.com/shop/web:1.27.3', imageID: '', started: true, state: { running: { startedAt: '2026-11-25T03:13:36Z' } } }] } });
const objects: Record<string, Record<string, unknown>> = {
  pod: pod(0),
  deployment: { apiVersion: 'apps/v1', kind: 'Deployment', metadata: meta('web'), spec: { replicas: 3, selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } }, spec: podSpec }, strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: '25%', maxUnavailable: '25%' } } }, status: { replicas: 3, readyReplicas: 3 } },
  configmap: { apiVersion: 'v1', kind: 'ConfigMap', metadata: meta('web'), data: Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`key-${i}`, `value ${i} `.repeat(8)])) },
  podList100: { apiVersion: 'v1', kind: 'PodList', metadata: { resourceVersion: '123456' }, items: Array.from({ length: 100 }, (_, i) => { const { apiVersion: _a, kind: _k, ...rest } = pod(i); return rest; }) },
};

/** ns per call of `fn`, over about MS milliseconds after a warm-up. */
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
  return ((now - start) * 1e6) / n;
}

const results: Record<string, unknown> = {};
for (const [name, o] of Object.entries(objects)) {
  const json = JSON.stringify(o);
  const proto = encodeObject(o)!;
  const jsonBuf = Buffer.from(json);
  const encJson = time(() => Buffer.from(JSON.stringify(o)));
  const encProto = time(() => encodeObject(o));
  const decJson = time(() => JSON.parse(jsonBuf.toString('utf8')));
  const decProto = time(() => decodeObject(proto));
  results[name] = {
    bytes: { json: jsonBuf.length, protobuf: proto.length },
    encodeUs: { json: +(encJson / 1000).toFixed(2), protobuf: +(encProto / 1000).toFixed(2), ratio: +(encProto / encJson).toFixed(2) },
    decodeUs: { json: +(decJson / 1000).toFixed(2), protobuf: +(decProto / 1000).toFixed(2), ratio: +(decProto / decJson).toFixed(2) },
  };
}
console.log(JSON.stringify({ benchmark: 'protobuf', msPerMeasurement: MS, node: process.version, results }, null, 2));
