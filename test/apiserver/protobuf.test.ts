// Protobuf (application/vnd.kubernetes.protobuf) in the embedded API server
// (issue 11 item 1): the codec against hand-computed wire bytes and the
// special types, every served built-in kind round-tripped JSON -> proto ->
// JSON through the server, and the real kubectl 1.35 `create` commands that
// send protobuf bodies.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { Registry } from '../../packages/devcluster/src/apiserver/registry.ts';
import { decodeMessage, decodeObject, encodeMessage, encodeObject, messageFor, OMIT_ZERO, PROTOBUF_MEDIA_TYPE, ProtobufError } from '../../packages/devcluster/src/apiserver/protobuf/codec.ts';
import { messageDesc } from '../../packages/devcluster/src/apiserver/protobuf/descriptors.ts';
import { wantsProtobuf } from '../../packages/devcluster/src/apiserver/protobuf/negotiate.ts';
import { kubectlPath } from '../support/tools.ts';
import { caller, withKubectl, withServer } from './helpers.ts';

const run = promisify(execFile);
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const ascii = (s: string): string => Buffer.from(s).toString('hex');

void test('the envelope and a message have the bytes Go writes (k8s\\0 + runtime.Unknown)', () => {
  const bytes = encodeObject({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'foo' } })!;
  // magic | Unknown.typeMeta(1) {apiVersion(1) "v1", kind(2) "Namespace"} | Unknown.raw(2) {metadata(1) {name(1) "foo"}}
  const expected = `6b387300` + `0a0f` + `0a02${ascii('v1')}` + `1209${ascii('Namespace')}` + `1207` + `0a05` + `0a03${ascii('foo')}`;
  assert.equal(hex(bytes), expected);
  assert.deepEqual(decodeObject(bytes), { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'foo' } });
});

void test('special types: Time, MicroTime, Quantity, IntOrString, maps, bytes, negative and large numbers, long strings', () => {
  // Time: seconds only (field 1); 2026-01-02T03:04:05Z = 1767323045.
  assert.equal(hex(encodeMessage('apis.meta.v1.Time', '2026-01-02T03:04:05Z')), `08${varint(1767323045)}`);
  // MicroTime keeps six digits in nanos (field 2).
  const micro = encodeMessage('coordination.v1.LeaseSpec', { renewTime: '2026-01-02T03:04:05.123456Z', holderIdentity: 'a' });
  assert.deepEqual(decodeMessage('coordination.v1.LeaseSpec', micro), { renewTime: '2026-01-02T03:04:05.123456Z', holderIdentity: 'a' });
  assert.match(hex(micro), new RegExp(`10${varint(123456000)}`));
  // Quantity {string=1}; a JSON number is written in its text form.
  assert.equal(hex(encodeMessage('api.resource.Quantity', '1500m')), `0a05${ascii('1500m')}`);
  const res = decodeMessage('core.v1.ResourceRequirements', encodeMessage('core.v1.ResourceRequirements', { limits: { memory: '128Mi', cpu: 2 } }));
  assert.deepEqual(res, { limits: { cpu: '2', memory: '128Mi' } });
  // IntOrString: type 0 + intVal, type 1 + strVal.
  assert.equal(hex(encodeMessage('util.intstr.IntOrString', 8080)), `0800` + `10${varint(8080)}`);
  assert.equal(hex(encodeMessage('util.intstr.IntOrString', 'http')), `0801` + `1a04${ascii('http')}`);
  // A map entry is {key=1, value=2}, entries sorted by key.
  assert.equal(hex(encodeMessage('core.v1.ConfigMap', { data: { b: '2', a: '1' } })), `1206` + `0a01${ascii('a')}1201${ascii('1')}` + `1206` + `0a01${ascii('b')}1201${ascii('2')}`);
  // bytes are base64 in JSON.
  const secret = { data: { k: Buffer.from([0, 1, 2, 255]).toString('base64') }, type: 'Opaque' };
  assert.deepEqual(decodeMessage('core.v1.Secret', encodeMessage('core.v1.Secret', secret)), secret);
  // int64 negatives are ten-byte two's complement varints.
  assert.equal(hex(encodeMessage('apis.meta.v1.ObjectMeta', { deletionGracePeriodSeconds: -1 })), `50ffffffffffffffffff01`);
  assert.deepEqual(decodeMessage('apis.meta.v1.ObjectMeta', encodeMessage('apis.meta.v1.ObjectMeta', { deletionGracePeriodSeconds: -1, generation: 2 ** 40 })), { deletionGracePeriodSeconds: -1, generation: 2 ** 40 });
  // Lengths of 128 bytes and more take two bytes (the writer moves the value).
  const long = 'x'.repeat(300);
  const c = encodeMessage('core.v1.Container', { name: long, args: [long, 'y'] });
  assert.deepEqual(decodeMessage('core.v1.Container', c), { name: long, args: [long, 'y'] });
  assert.equal(hex(c.subarray(0, 3)), `0a${varint(300)}`);
  // RawExtension holds JSON (the object of a WatchEvent).
  const ev = { type: 'ADDED', object: { kind: 'Foo', spec: { a: [1, 'b'] } } };
  assert.deepEqual(decodeMessage('apis.meta.v1.WatchEvent', encodeMessage('apis.meta.v1.WatchEvent', ev)), ev);
  // String-list wrappers (authentication ExtraValue) are plain arrays in JSON.
  const user = { username: 'u', extra: { scopes: ['a', 'b'] } };
  assert.deepEqual(decodeMessage('authentication.v1.UserInfo', encodeMessage('authentication.v1.UserInfo', user)), user);
});

void test('decoding what Go writes: zero values, packed numbers, unknown fields, bad input', () => {
  // Go writes non-pointer fields when empty: "" strings and the zero time are
  // dropped, an explicit false/0 (pointer fields) is kept.
  const meta = `0a03${ascii('foo')}` + `1200` + `1a00` + `3800` + `4200`; // name, generateName "", namespace "", generation 0, creationTimestamp {}
  assert.deepEqual(decodeMessage('apis.meta.v1.ObjectMeta', Buffer.from(meta, 'hex')), { name: 'foo' });
  const ctx = `1000` + `2000`; // SecurityContext privileged(2)=false, runAsUser(4)=0
  assert.deepEqual(decodeMessage('core.v1.SecurityContext', Buffer.from(ctx, 'hex')), { privileged: false, runAsUser: 0 });
  // Known non-pointer omitempty fields: their 0 / false is Go's "unset" (Container.stdin(16), tty(18); Probe.periodSeconds(4)).
  assert.deepEqual(decodeMessage('core.v1.Container', Buffer.from(`0a01${ascii('a')}` + `800100` + `900100`, 'hex')), { name: 'a' });
  assert.deepEqual(decodeMessage('core.v1.Probe', Buffer.from(`2000`, 'hex')), {});
  for (const key of OMIT_ZERO) {
    const at = key.lastIndexOf('.');
    assert.ok(messageDesc(key.slice(0, at))?.fields.some((f) => f.jsonName === key.slice(at + 1)), `OMIT_ZERO ${key} names a field of the descriptors`);
  }
  // Unknown fields (here field 127, varint) are skipped.
  assert.deepEqual(decodeMessage('apis.meta.v1.ObjectMeta', Buffer.from(`f8070a` + `0a03${ascii('foo')}`, 'hex')), { name: 'foo' });
  // Repeated numbers: Go writes them unpacked; packed is valid proto2 too.
  const unpacked = `0a01${ascii('c')}` + `1202${ascii('In')}` + `1801` + `1802`;
  const packed = `0a01${ascii('c')}` + `1202${ascii('In')}` + `1a020102`;
  const expected = { containerName: 'c', operator: 'In', values: [1, 2] };
  assert.deepEqual(decodeMessage('batch.v1.PodFailurePolicyOnExitCodesRequirement', Buffer.from(unpacked, 'hex')), expected);
  assert.deepEqual(decodeMessage('batch.v1.PodFailurePolicyOnExitCodesRequirement', Buffer.from(packed, 'hex')), expected);
  assert.equal(hex(encodeMessage('batch.v1.PodFailurePolicyOnExitCodesRequirement', expected)), unpacked);
  // A length running past the end of its message is an error, not a wrong object.
  assert.throws(() => decodeMessage('apis.meta.v1.ObjectMeta', Buffer.from(`0a05${ascii('ab')}`, 'hex')), ProtobufError);
  assert.throws(() => encodeMessage('apis.meta.v1.ObjectMeta', { name: 5 }), /ObjectMeta.name: expected a string/);
  assert.throws(() => decodeObject(Buffer.from('{"kind":"Namespace"}')), /does not start with the "k8s\\0" prefix/);
  assert.throws(() => decodeObject(Buffer.from('6b387300', 'hex')), /empty protobuf body/);
  assert.throws(() => decodeObject(Buffer.from('6b3873000a05', 'hex')), ProtobufError);
});

void test('content negotiation: protobuf only when asked for first, never for tables or streams', () => {
  assert.equal(wantsProtobuf('application/vnd.kubernetes.protobuf,application/json'), true);
  assert.equal(wantsProtobuf('application/json,application/vnd.kubernetes.protobuf'), false);
  assert.equal(wantsProtobuf('application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json'), false);
  assert.equal(wantsProtobuf('application/vnd.kubernetes.protobuf;stream=watch'), false);
  assert.equal(wantsProtobuf(undefined), false);
  assert.equal(wantsProtobuf('*/*'), false);
  // meta kinds come under built-in group versions only: a CRD may have a kind "Status".
  assert.equal(messageFor('v1', 'Status'), 'apis.meta.v1.Status');
  assert.equal(messageFor('apps/v1', 'DeleteOptions'), 'apis.meta.v1.DeleteOptions');
  assert.equal(messageFor('example.com/v1', 'Status'), undefined);
});

/** One realistic object of every served built-in kind, as a client would create it. */
function fixtures(): Record<string, Record<string, unknown>> {
  const labels = { app: 'web', 'app.kubernetes.io/part-of': 'shop', empty: '' };
  const podSpec = {
    serviceAccountName: 'web',
    securityContext: { runAsNonRoot: true, runAsUser: 1000, fsGroup: 2000, seccompProfile: { type: 'RuntimeDefault' } },
    containers: [{
      name: 'app', image: 'nginx:1.27', command: ['nginx'], args: ['-g', 'daemon off;'],
      ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }],
      env: [{ name: 'A', value: '1' }, { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
      resources: { limits: { cpu: '500m', memory: '128Mi' }, requests: { cpu: '250m', memory: '64Mi' } },
      readinessProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 5 },
      livenessProbe: { tcpSocket: { port: 8080 } },
      securityContext: { allowPrivilegeEscalation: false, privileged: false, capabilities: { drop: ['ALL'] }, readOnlyRootFilesystem: true },
      volumeMounts: [{ name: 'cfg', mountPath: '/etc/app', readOnly: true }],
    }],
    volumes: [{ name: 'cfg', configMap: { name: 'web', items: [{ key: 'a', path: 'a.conf' }] } }],
    tolerations: [{ key: 'k', operator: 'Exists', effect: 'NoSchedule', tolerationSeconds: 30 }],
    affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a', 'b'] }] }] } } },
  };
  const template = { metadata: { labels }, spec: podSpec };
  const selector = { matchLabels: { app: 'web' }, matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['db'] }] };
  const ref = { kind: 'Pod', namespace: 'default', name: 'web-1', uid: '00000000-0000-0000-0000-000000000001', apiVersion: 'v1' };
  return {
    Namespace: { metadata: { name: 'shop', labels: { team: 'a' } }, spec: { finalizers: ['kubernetes'] } },
    Pod: { metadata: { name: 'web-1', labels, annotations: { note: 'x' } }, spec: podSpec },
    ConfigMap: { metadata: { name: 'web' }, data: { a: 'listen 80;', b: '' }, binaryData: { bin: Buffer.from([1, 2, 3]).toString('base64') }, immutable: false },
    Secret: { metadata: { name: 'web' }, type: 'Opaque', data: { password: Buffer.from('s3cr3t').toString('base64') } },
    Service: { metadata: { name: 'web' }, spec: { type: 'ClusterIP', selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }, { name: 'm', port: 9090, targetPort: 9090 }], sessionAffinity: 'None' } },
    ServiceAccount: { metadata: { name: 'web' }, automountServiceAccountToken: false, imagePullSecrets: [{ name: 'reg' }] },
    Event: { metadata: { name: 'web-1.abc' }, involvedObject: ref, reason: 'Started', message: 'Started container', type: 'Normal', count: 3,
      firstTimestamp: '2026-01-02T03:04:05Z', lastTimestamp: '2026-01-02T03:05:05Z', source: { component: 'kubelet', host: 'node-1' }, eventTime: '2026-01-02T03:04:05.123456Z', reportingComponent: 'kubelet', reportingInstance: 'node-1' },
    'events.k8s.io/Event': { metadata: { name: 'web-1.def' }, eventTime: '2026-01-02T03:04:05.000001Z', reportingController: 'portal', reportingInstance: 'portal-0', action: 'Audit', reason: 'Violation', regarding: ref, note: 'n', type: 'Warning' },
    Lease: { metadata: { name: 'portal-leader' }, spec: { holderIdentity: 'portal-0_abc', leaseDurationSeconds: 15, acquireTime: '2026-01-02T03:04:05.000000Z', renewTime: '2026-01-02T03:04:07.250000Z', leaseTransitions: 0 } },
    PodDisruptionBudget: { metadata: { name: 'web' }, spec: { minAvailable: 1, selector } },
    Deployment: { metadata: { name: 'web', labels }, spec: { replicas: 3, selector, template, strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: '25%', maxUnavailable: 0 } }, revisionHistoryLimit: 10, progressDeadlineSeconds: 600 } },
    StatefulSet: { metadata: { name: 'db' }, spec: { replicas: 1, serviceName: 'db', selector, template, volumeClaimTemplates: [{ metadata: { name: 'data' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } } }] } },
    DaemonSet: { metadata: { name: 'agent' }, spec: { selector, template, updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } } } },
    ReplicaSet: { metadata: { name: 'web-abc' }, spec: { replicas: 0, selector, template } },
    Job: { metadata: { name: 'once' }, spec: { backoffLimit: 2, completions: 1, parallelism: 1, template: { ...template, spec: { ...podSpec, restartPolicy: 'Never' } } } },
    CronJob: { metadata: { name: 'nightly' }, spec: { schedule: '0 3 * * *', concurrencyPolicy: 'Forbid', suspend: true, jobTemplate: { spec: { template: { ...template, spec: { ...podSpec, restartPolicy: 'OnFailure' } } } } } },
    ValidatingWebhookConfiguration: { metadata: { name: 'portal' }, webhooks: [{ name: 'validate.portal.dev', admissionReviewVersions: ['v1'], sideEffects: 'None', failurePolicy: 'Fail', timeoutSeconds: 10,
      clientConfig: { service: { name: 'portal-webhook', namespace: 'portal-system', path: '/validate', port: 443 }, caBundle: Buffer.from('pem').toString('base64') },
      rules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE', 'UPDATE'], scope: '*' }],
      namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system'] }] }, matchConditions: [{ name: 'x', expression: 'true' }] }] },
    MutatingWebhookConfiguration: { metadata: { name: 'm' }, webhooks: [{ name: 'm.example.com', admissionReviewVersions: ['v1'], sideEffects: 'None', reinvocationPolicy: 'Never', clientConfig: { url: 'https://example.com/m' } }] },
    ReplicationController: { metadata: { name: 'rc' }, spec: { replicas: 1, selector: { app: 'web' }, template } },
    Node: { metadata: { name: 'portal-dev-node' }, spec: { taints: [{ key: 'k', value: 'v', effect: 'NoSchedule' }], podCIDR: '10.0.0.0/24' } },
    Role: { metadata: { name: 'reader' }, rules: [{ apiGroups: [''], resources: ['pods', 'pods/log'], verbs: ['get', 'list', 'watch'] }, { apiGroups: ['apps'], resources: ['deployments'], resourceNames: ['web'], verbs: ['*'] }] },
    ClusterRole: { metadata: { name: 'agg' }, rules: [{ nonResourceURLs: ['/healthz'], verbs: ['get'] }], aggregationRule: { clusterRoleSelectors: [{ matchLabels: { 'rbac.example.com/aggregate': 'true' } }] } },
    RoleBinding: { metadata: { name: 'reader' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader' }, subjects: [{ kind: 'ServiceAccount', name: 'web', namespace: 'default' }, { kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'jane' }] },
    ClusterRoleBinding: { metadata: { name: 'agg' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'agg' }, subjects: [{ kind: 'Group', apiGroup: 'rbac.authorization.k8s.io', name: 'devs' }] },
    NetworkPolicy: {
      metadata: { name: 'metrics' },
      spec: {
        podSelector: { matchLabels: { app: 'portal' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }], ports: [{ protocol: 'TCP', port: 8080 }] }],
      },
    },
    ValidatingAdmissionPolicy: {
      metadata: { name: 'replicas' },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: { resourceRules: [{ apiGroups: ['apps'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['deployments'] }] },
        validations: [{ expression: 'object.spec.replicas <= 5', message: 'at most 5 replicas', reason: 'Invalid' }],
      },
    },
    ValidatingAdmissionPolicyBinding: {
      metadata: { name: 'replicas' },
      spec: { policyName: 'replicas', validationActions: ['Audit'] },
    },
  };
}

void test('every served built-in kind round-trips JSON -> protobuf -> JSON through the server (create, get, list)', { timeout: 60_000 }, () => withServer({}, async (s) => {
  const call = caller(s, s.adminToken);
  const fx = fixtures();
  const builtins = new Registry().all().filter((d) => d.builtin);
  const covered: string[] = [];
  for (const def of builtins) {
    const apiVersion = def.group ? `${def.group}/${def.version}` : def.version;
    if (def.group === 'apiextensions.k8s.io') {
      // CRDs are not in kubernetes/api: JSON only (apiextensions-apiserver has its own protos).
      assert.equal(messageFor(apiVersion, def.kind), undefined);
      continue;
    }
    // Access reviews (access.ts) are create-only and never stored: no list to round-trip; test/apiserver/rbac.test.ts covers them.
    if (def.group === 'authorization.k8s.io' || def.group === 'authentication.k8s.io') continue;
    assert.ok(messageFor(apiVersion, def.kind), `no protobuf message for ${apiVersion} ${def.kind}: re-run scripts/gen-k8s-proto.mjs`);
    assert.ok(messageFor(apiVersion, def.listKind), `no protobuf message for ${def.listKind}`);
    const fixture = fx[def.group === 'events.k8s.io' ? 'events.k8s.io/Event' : def.kind];
    assert.ok(fixture, `no fixture for ${def.kind}`);
    const obj = { apiVersion, kind: def.kind, ...fixture };
    // The codec alone: JSON -> proto -> JSON is the identity (empty map values kept).
    assert.deepEqual(decodeObject(encodeObject(obj)!), obj, `${def.kind}: codec round trip`);

    const base = `${def.group ? `/apis/${def.group}` : '/api'}/${def.version}${def.namespaced ? '/namespaces/default' : ''}/${def.resource}`;
    const created = await fetch(`${s.url}${base}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${s.adminToken}`, 'Content-Type': PROTOBUF_MEDIA_TYPE, Accept: `${PROTOBUF_MEDIA_TYPE},application/json` },
      body: encodeObject(obj)!,
    });
    const createdBytes = new Uint8Array(await created.arrayBuffer());
    assert.equal(created.status, 201, `${def.kind}: ${Buffer.from(createdBytes).toString()}`);
    assert.equal(created.headers.get('content-type'), PROTOBUF_MEDIA_TYPE);
    const name = (fixture['metadata'] as { name: string }).name;
    const json = await call('GET', `${base}/${name}`);
    assert.equal(json.status, 200);
    // The server stored what the client sent (the proto body decoded to the same JSON), plus its defaults.
    for (const [k, v] of Object.entries(fixture)) {
      if (k === 'metadata' || k === 'status') continue;
      assertContains(json.body[k], v, `${def.kind}.${k}`);
    }
    assert.deepEqual(decodeObject(createdBytes), json.body, `${def.kind}: create reply`);
    const got = await fetch(`${s.url}${base}/${name}`, { headers: { Authorization: `Bearer ${s.adminToken}`, Accept: `${PROTOBUF_MEDIA_TYPE},application/json` } });
    assert.equal(got.headers.get('content-type'), PROTOBUF_MEDIA_TYPE);
    assert.deepEqual(decodeObject(new Uint8Array(await got.arrayBuffer())), json.body, `${def.kind}: get`);
    const list = await fetch(`${s.url}${base}`, { headers: { Authorization: `Bearer ${s.adminToken}`, Accept: `${PROTOBUF_MEDIA_TYPE},application/json` } });
    const listJson = await call('GET', base);
    assert.deepEqual(decodeObject(new Uint8Array(await list.arrayBuffer())), listJson.body, `${def.kind}: list`);
    covered.push(def.kind);
  }
  assert.ok(covered.length >= 20, covered.join(' '));
}));

void test('protobuf bodies the server cannot use: 415 for a kind without a protobuf form, 400 for bad bytes; JSON answers for CRDs', { timeout: 30_000 }, () => withServer({}, async (s) => {
  const post = async (path: string, body: Uint8Array): Promise<{ status: number; body: Record<string, unknown> }> => {
    const r = await fetch(`${s.url}${path}`, { method: 'POST', headers: { Authorization: `Bearer ${s.adminToken}`, 'Content-Type': PROTOBUF_MEDIA_TYPE }, body });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };
  const bad = await post('/api/v1/namespaces', Buffer.from('6b3873000a05', 'hex'));
  assert.equal(bad.status, 400);
  assert.match(String(bad.body['message']), /protobuf body cannot be decoded/);
  const unsupported = await post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', encodeEnvelopeOf('apiextensions.k8s.io/v1', 'CustomResourceDefinition'));
  assert.equal(unsupported.status, 415);
  assert.equal(unsupported.body['reason'], 'UnsupportedMediaType');
  const crds = await fetch(`${s.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`, { headers: { Authorization: `Bearer ${s.adminToken}`, Accept: `${PROTOBUF_MEDIA_TYPE},application/json` } });
  assert.equal(crds.headers.get('content-type'), 'application/json');
  // Errors are Status objects in JSON, which the protobuf-first Accept allows.
  const missing = await fetch(`${s.url}/api/v1/namespaces/nope`, { headers: { Authorization: `Bearer ${s.adminToken}`, Accept: `${PROTOBUF_MEDIA_TYPE},application/json` } });
  assert.equal(missing.status, 404);
  assert.equal(missing.headers.get('content-type'), 'application/json');
}));

void test('kubectl 1.35 create commands that send protobuf succeed (namespace, configmap, secret, deployment, serviceaccount, role, rolebinding)', { timeout: 120_000 }, () => withKubectl(async (k, dir) => {
  assert.match(await k('create', 'namespace', 'shop'), /namespace\/shop created/);
  assert.match(await k('-n', 'shop', 'create', 'configmap', 'web', '--from-literal=a=1', '--from-literal=b='), /configmap\/web created/);
  assert.match(await k('-n', 'shop', 'create', 'secret', 'generic', 'db', '--from-literal=password=s3cr3t'), /secret\/db created/);
  assert.match(await k('-n', 'shop', 'create', 'deployment', 'web', '--image=nginx:1.27', '--replicas=2', '--port=80'), /deployment.apps\/web created/);
  assert.match(await k('-n', 'shop', 'create', 'serviceaccount', 'web'), /serviceaccount\/web created/);
  assert.match(await k('-n', 'shop', 'create', 'role', 'reader', '--verb=get,list', '--resource=pods'), /role.rbac.authorization.k8s.io\/reader created/);
  assert.match(await k('-n', 'shop', 'create', 'rolebinding', 'reader', '--role=reader', '--serviceaccount=shop:web'), /rolebinding.rbac.authorization.k8s.io\/reader created/);

  const cm = JSON.parse(await k('-n', 'shop', 'get', 'configmap', 'web', '-o', 'json')) as { data: Record<string, string> };
  assert.deepEqual(cm.data, { a: '1', b: '' });
  const secret = JSON.parse(await k('-n', 'shop', 'get', 'secret', 'db', '-o', 'json')) as { data: Record<string, string>; type: string };
  assert.equal(Buffer.from(secret.data['password']!, 'base64').toString(), 's3cr3t');
  assert.equal(secret.type, 'Opaque');
  const deploy = JSON.parse(await k('-n', 'shop', 'get', 'deployment', 'web', '-o', 'json')) as { metadata: Record<string, unknown>; spec: { replicas: number; template: { spec: { containers: { image: string; ports: { containerPort: number }[] }[] } } } };
  assert.equal(deploy.spec.replicas, 2);
  assert.equal(deploy.spec.template.spec.containers[0]!.image, 'nginx:1.27');
  assert.equal(deploy.spec.template.spec.containers[0]!.ports[0]!.containerPort, 80);
  // Zero values Go writes for unset fields do not leak into the object.
  assert.equal(deploy.metadata['namespace'], 'shop');
  assert.equal(typeof deploy.metadata['creationTimestamp'], 'string');
  assert.equal(JSON.stringify(deploy).includes('""'), false, 'no empty strings from the protobuf zero values');
  for (const unset of ['"paused"', '"minReadySeconds"', '"stdin"', '"tty"', '"hostNetwork"']) assert.equal(JSON.stringify(deploy).includes(unset), false, `${unset} was not set`);
  const rb = JSON.parse(await k('-n', 'shop', 'get', 'rolebinding', 'reader', '-o', 'json')) as { subjects: unknown[]; roleRef: unknown };
  assert.deepEqual(rb.subjects, [{ kind: 'ServiceAccount', name: 'web', namespace: 'shop' }]);
  assert.deepEqual(rb.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader' });
  // kubectl describe reads through typed clients (Accept protobuf first): Go decodes our protobuf.
  const verbose = await run(kubectlPath(), ['--kubeconfig', join(dir, 'kubeconfig'), '-v=8', '-n', 'shop', 'describe', 'deployment', 'web'], { env: { PATH: process.env['PATH'] ?? '', HOME: dir } });
  assert.match(verbose.stderr, /Content-Type: application\/vnd\.kubernetes\.protobuf/);
  const described = verbose.stdout;
  assert.match(described, /Replicas:\s+2 desired \| 0 updated \| 0 total \| 0 available \| 0 unavailable/);
  assert.match(described, /Image:\s+nginx:1\.27/);
  assert.match(await k('-n', 'shop', 'describe', 'secret', 'db'), /password:\s+6 bytes/);
  assert.match(await k('-n', 'shop', 'describe', 'rolebinding', 'reader'), /ServiceAccount\s+web\s+shop/);
  // A create that fails is reported by kubectl from the JSON Status (the protobuf-first Accept allows JSON).
  await assert.rejects(k('-n', 'shop', 'create', 'configmap', 'web', '--from-literal=a=1'), /configmaps "web" already exists/);
}));

/** `actual` has everything `expected` has (objects may carry more keys: server defaults). */
function assertContains(actual: unknown, expected: unknown, path: string): void {
  if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual) && actual.length === expected.length, `${path}: ${JSON.stringify(actual)}`);
    expected.forEach((e, i) => assertContains((actual as unknown[])[i], e, `${path}[${i}]`));
  } else if (typeof expected === 'object' && expected !== null) {
    assert.ok(typeof actual === 'object' && actual !== null, `${path}: ${JSON.stringify(actual)}`);
    for (const [k, v] of Object.entries(expected)) assertContains((actual as Record<string, unknown>)[k], v, `${path}.${k}`);
  } else assert.deepEqual(actual, expected, path);
}

function encodeEnvelopeOf(apiVersion: string, kind: string): Uint8Array {
  const tm = Buffer.concat([Buffer.from([0x0a, apiVersion.length]), Buffer.from(apiVersion), Buffer.from([0x12, kind.length]), Buffer.from(kind)]);
  return Buffer.concat([Buffer.from('6b387300', 'hex'), Buffer.from([0x0a, tm.length]), tm, Buffer.from([0x12, 0])]);
}

function varint(n: number): string {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return Buffer.from(out).toString('hex');
}
