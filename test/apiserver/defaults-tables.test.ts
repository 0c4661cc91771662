// Defaulting and tables as kube-apiserver does them (issue 11 item 5), seen
// through the real kubectl 1.35: Secret stringData, Pod requests and
// qosClass, the default ServiceAccount and kube-root-ca.crt in every
// namespace, and the printer columns (with -o wide) of the common kinds.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { podQosClass, quantityValue } from '../../packages/devcluster/src/apiserver/defaults.ts';
import { humanDurationMs } from '../../packages/devcluster/src/apiserver/age.ts';
import { withKubectl } from './helpers.ts';


/** The header of `kubectl get` output as column names (columns are separated by 2+ spaces). */
const header = (out: string): string[] => (out.split('\n')[0] ?? '').trim().split(/\s{2,}/);
/** The cells of the row whose first NAME-like cell is `name`, cut at the header's column offsets (cells may be empty). */
function rowOf(out: string, name: string): string[] {
  const lines = out.split('\n');
  const head = lines[0] ?? '';
  const starts = header(out).map((h) => head.indexOf(h));
  const line = lines.slice(1).find((l) => l.split(/\s+/).includes(name)) ?? '';
  return starts.map((st, i) => line.slice(st, starts[i + 1] ?? line.length).trim());
}

void test('Secret stringData becomes base64 data; type defaults to Opaque', { timeout: 60_000 }, () => withKubectl(async (k, dir) => {
  writeFileSync(join(dir, 's.yaml'), 'apiVersion: v1\nkind: Secret\nmetadata: {name: db}\ndata: {user: YWRtaW4=, password: b2xk}\nstringData: {password: "s3cr3t é", host: db.local}\n');
  await k('apply', '-f', join(dir, 's.yaml'));
  const s = JSON.parse(await k('get', 'secret', 'db', '-o', 'json')) as { data: Record<string, string>; stringData?: unknown; type: string };
  assert.equal(s.stringData, undefined);
  assert.equal(s.type, 'Opaque');
  assert.deepEqual(Object.fromEntries(Object.entries(s.data).map(([key, v]) => [key, Buffer.from(v, 'base64').toString('utf8')])), { user: 'admin', password: 's3cr3t é', host: 'db.local' });
  // Updates convert too (kubectl apply sends a patch with stringData).
  writeFileSync(join(dir, 's.yaml'), 'apiVersion: v1\nkind: Secret\nmetadata: {name: db}\ndata: {user: YWRtaW4=}\nstringData: {password: new}\n');
  await k('apply', '-f', join(dir, 's.yaml'));
  assert.equal(Buffer.from(await k('get', 'secret', 'db', '-o', 'jsonpath={.data.password}'), 'base64').toString(), 'new');
}));

void test('Pod requests default from limits and qosClass follows', { timeout: 60_000 }, () => withKubectl(async (k, dir) => {
  const pod = (name: string, resources: string): string => `---\napiVersion: v1\nkind: Pod\nmetadata: {name: ${name}}\nspec:\n  containers:\n  - name: app\n    image: nginx\n    resources: ${resources}\n`;
  writeFileSync(join(dir, 'pods.yaml'), [
    pod('guaranteed', '{limits: {cpu: 500m, memory: 128Mi}}'),
    pod('burstable', '{requests: {cpu: 100m}, limits: {cpu: 500m, memory: 128Mi}}'),
    pod('besteffort', '{}'),
  ].join(''));
  await k('apply', '-f', join(dir, 'pods.yaml'));
  const g = JSON.parse(await k('get', 'pod', 'guaranteed', '-o', 'json')) as { spec: { containers: { resources: { requests: Record<string, string> } }[] }; status: { qosClass: string } };
  assert.deepEqual(g.spec.containers[0]!.resources.requests, { cpu: '500m', memory: '128Mi' });
  assert.equal(g.status.qosClass, 'Guaranteed');
  const b = JSON.parse(await k('get', 'pod', 'burstable', '-o', 'json')) as typeof g;
  assert.deepEqual(b.spec.containers[0]!.resources.requests, { cpu: '100m', memory: '128Mi' });
  assert.equal(b.status.qosClass, 'Burstable');
  assert.equal(await k('get', 'pod', 'besteffort', '-o', 'jsonpath={.status.qosClass}'), 'BestEffort');
  // The QoS rules themselves, including sums over containers and unit forms.
  assert.equal(podQosClass({ spec: { containers: [{ resources: { requests: { cpu: '0.5', memory: '1Gi' }, limits: { cpu: '500m', memory: '1024Mi' } } }] } }), 'Guaranteed');
  assert.equal(podQosClass({ spec: { containers: [{ resources: { limits: { cpu: '1' } } }] } }), 'Burstable');
  assert.equal(podQosClass({ spec: { initContainers: [{ resources: { limits: { cpu: '1', memory: '1M' }, requests: { cpu: '1', memory: '1M' } } }], containers: [{}] } }), 'Burstable');
  assert.equal(quantityValue('1.5Gi'), 1.5 * 2 ** 30);
  assert.equal(quantityValue('2e3'), 2000);
  assert.equal(quantityValue('bogus'), undefined);
}));

void test('every namespace gets a default ServiceAccount and the kube-root-ca.crt ConfigMap', { timeout: 60_000 }, () => withKubectl(async (k, _dir, s) => {
  await k('create', 'namespace', 'team-a');
  for (const ns of ['default', 'kube-system', 'team-a']) {
    assert.match(await k('-n', ns, 'get', 'serviceaccount', 'default', '-o', 'name'), /^serviceaccount\/default\n$/);
    assert.equal(await k('-n', ns, 'get', 'configmap', 'kube-root-ca.crt', '-o', 'jsonpath={.data.ca\\.crt}'), s.caCert);
  }
  // Deleting the namespace takes them with it.
  await k('delete', 'namespace', 'team-a');
  await assert.rejects(k('-n', 'team-a', 'get', 'serviceaccount', 'default'), /not found/);
}));

const WORKLOADS = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: nginx, image: "nginx:1.27"}, {name: side, image: "busybox:1.36"}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-rs}
spec:
  replicas: 3
  selector: {matchLabels: {app: rs}, matchExpressions: [{key: tier, operator: In, values: [b, a]}]}
  template:
    metadata: {labels: {app: rs, tier: a}}
    spec: {containers: [{name: nginx, image: "nginx:1.27"}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: pg, image: "postgres:17"}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {nodeSelector: {kubernetes.io/os: linux}, containers: [{name: agent, image: "agent:1"}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  completions: 3
  template:
    spec: {restartPolicy: Never, containers: [{name: job, image: "busybox:1.36"}]}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  timeZone: Europe/Paris
  jobTemplate:
    spec:
      template:
        spec: {restartPolicy: OnFailure, containers: [{name: job, image: "busybox:1.36"}]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}, {name: metrics, port: 9090}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web}
data: {a: "1", b: "2"}
binaryData: {c: AAE=}
---
apiVersion: v1
kind: Secret
metadata: {name: tls}
type: kubernetes.io/tls
data: {tls.crt: AA==, tls.key: AA==}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: web}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: leader}
spec: {holderIdentity: portal-0_abc}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, labels: {app: web}}
spec:
  containers: [{name: nginx, image: "nginx:1.27"}]
---
apiVersion: v1
kind: Event
metadata: {name: web-0.1}
involvedObject: {kind: Pod, name: web-0, namespace: default}
reason: Scheduled
message: Successfully assigned default/web-0
type: Normal
count: 3
source: {component: default-scheduler}
firstTimestamp: "2026-01-01T00:00:00Z"
lastTimestamp: "2026-01-01T00:00:00Z"
`;

void test('kubectl get shows the real printer columns, and -o wide the wide ones', { timeout: 120_000 }, () => withKubectl(async (k, dir) => {
  writeFileSync(join(dir, 'all.yaml'), WORKLOADS);
  await k('apply', '-f', join(dir, 'all.yaml'));
  const cases: [string, string[], string[]][] = [
    ['pods', ['NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE'], ['IP', 'NODE', 'NOMINATED NODE', 'READINESS GATES']],
    ['deployments', ['NAME', 'READY', 'UP-TO-DATE', 'AVAILABLE', 'AGE'], ['CONTAINERS', 'IMAGES', 'SELECTOR']],
    ['replicasets', ['NAME', 'DESIRED', 'CURRENT', 'READY', 'AGE'], ['CONTAINERS', 'IMAGES', 'SELECTOR']],
    ['statefulsets', ['NAME', 'READY', 'AGE'], ['CONTAINERS', 'IMAGES']],
    ['daemonsets', ['NAME', 'DESIRED', 'CURRENT', 'READY', 'UP-TO-DATE', 'AVAILABLE', 'NODE SELECTOR', 'AGE'], ['CONTAINERS', 'IMAGES', 'SELECTOR']],
    ['jobs', ['NAME', 'STATUS', 'COMPLETIONS', 'DURATION', 'AGE'], ['CONTAINERS', 'IMAGES', 'SELECTOR']],
    ['cronjobs', ['NAME', 'SCHEDULE', 'TIMEZONE', 'SUSPEND', 'ACTIVE', 'LAST SCHEDULE', 'AGE'], ['CONTAINERS', 'IMAGES', 'SELECTOR']],
    ['services', ['NAME', 'TYPE', 'CLUSTER-IP', 'EXTERNAL-IP', 'PORT(S)', 'AGE'], ['SELECTOR']],
    ['configmaps', ['NAME', 'DATA', 'AGE'], []],
    ['secrets', ['NAME', 'TYPE', 'DATA', 'AGE'], []],
    ['serviceaccounts', ['NAME', 'SECRETS', 'AGE'], []],
    ['leases', ['NAME', 'HOLDER', 'AGE'], []],
    ['poddisruptionbudgets', ['NAME', 'MIN AVAILABLE', 'MAX UNAVAILABLE', 'ALLOWED DISRUPTIONS', 'AGE'], []],
  ];
  for (const [resource, columns, wide] of cases) {
    assert.deepEqual(header(await k('get', resource)), columns, `kubectl get ${resource}`);
    assert.deepEqual(header(await k('get', resource, '-o', 'wide')), [...columns, ...wide], `kubectl get ${resource} -o wide`);
  }
  // Events: no leading NAME; the wide table adds SUBOBJECT, SOURCE, FIRST SEEN, COUNT, NAME.
  assert.deepEqual(header(await k('get', 'events')), ['LAST SEEN', 'TYPE', 'REASON', 'OBJECT', 'MESSAGE']);
  assert.deepEqual(header(await k('get', 'events', '-o', 'wide')), ['LAST SEEN', 'TYPE', 'REASON', 'OBJECT', 'SUBOBJECT', 'SOURCE', 'MESSAGE', 'FIRST SEEN', 'COUNT', 'NAME']);

  // Cells computed as kube-apiserver does.
  const deploy = rowOf(await k('get', 'deployment', 'web', '-o', 'wide'), 'web');
  assert.deepEqual([deploy[1], deploy[2], deploy[3], deploy[5], deploy[6], deploy[7]], ['0/2', '0', '0', 'nginx,side', 'nginx:1.27,busybox:1.36', 'app=web']);
  assert.equal(rowOf(await k('get', 'rs', 'web-rs', '-o', 'wide'), 'web-rs')[7], 'app=rs,tier in (a,b)');
  assert.deepEqual(rowOf(await k('get', 'sts', 'db'), 'db').slice(0, 2), ['db', '0/1']);
  assert.equal(rowOf(await k('get', 'ds', 'agent'), 'agent')[6], 'kubernetes.io/os=linux');
  assert.deepEqual(rowOf(await k('get', 'job', 'once'), 'once').slice(0, 3), ['once', 'Running', '0/3']);
  assert.deepEqual(rowOf(await k('get', 'cj', 'nightly'), 'nightly').slice(0, 6), ['nightly', '0 3 * * *', 'Europe/Paris', 'False', '0', '<none>']);
  const svc = rowOf(await k('get', 'svc', 'web', '-o', 'wide'), 'web');
  assert.equal(svc[1], 'ClusterIP');
  assert.match(svc[2]!, /^10\.96\.\d+\.\d+$/);
  assert.deepEqual([svc[3], svc[4], svc[6]], ['<none>', '80/TCP,9090/TCP', 'app=web']);
  assert.equal(rowOf(await k('get', 'cm', 'web'), 'web')[1], '3');
  assert.deepEqual(rowOf(await k('get', 'secret', 'tls'), 'tls').slice(1, 3), ['kubernetes.io/tls', '2']);
  assert.equal(rowOf(await k('get', 'sa', 'web'), 'web')[1], '0');
  assert.equal(rowOf(await k('get', 'lease', 'leader'), 'leader')[1], 'portal-0_abc');
  assert.deepEqual(rowOf(await k('get', 'pdb', 'web'), 'web').slice(1, 4), ['1', 'N/A', '0']);
  const pod = rowOf(await k('get', 'pod', 'web-0', '-o', 'wide'), 'web-0');
  assert.deepEqual([pod[1], pod[2], pod[3], pod[5], pod[6], pod[7], pod[8]], ['0/1', 'Pending', '0', '<none>', '<none>', '<none>', '<none>']);
  const ev = rowOf(await k('get', 'events', '-o', 'wide'), 'web-0.1');
  assert.deepEqual([ev[1], ev[2], ev[3], ev[5], ev[6], ev[8], ev[9]], ['Normal', 'Scheduled', 'pod/web-0', 'default-scheduler', 'Successfully assigned default/web-0', '3', 'web-0.1']);
}));

void test('ages print like kubectl (duration.HumanDuration)', () => {
  const s = 1000;
  assert.equal(humanDurationMs(59 * s), '59s');
  assert.equal(humanDurationMs(119 * s), '119s');
  assert.equal(humanDurationMs(150 * s), '2m30s');
  assert.equal(humanDurationMs(600 * s), '10m');
  assert.equal(humanDurationMs(3 * 3600 * s + 5 * 60 * s), '3h5m');
  assert.equal(humanDurationMs(30 * 3600 * s), '30h');
  assert.equal(humanDurationMs(3 * 86400 * s + 4 * 3600 * s), '3d4h');
  assert.equal(humanDurationMs(40 * 86400 * s), '40d');
  assert.equal(humanDurationMs(3 * 365 * 86400 * s + 10 * 86400 * s), '3y10d');
});
