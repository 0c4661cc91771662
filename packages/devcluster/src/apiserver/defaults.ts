/**
 * Defaulting that kube-apiserver and its built-in controllers apply and that
 * users (and policies) see (issue 11 item 5):
 * - Secret: `stringData` is merged into `data` (base64) and dropped; `type`
 *   defaults to Opaque (core/v1 conversion and defaults.go).
 * - Pod: a container's requests default to its limits, resource by
 *   resource (SetDefaults_Pod), and `status.qosClass` is computed from the
 *   result (GetPodQOS: cpu and memory only).
 * - Every namespace gets a `default` ServiceAccount and the
 *   `kube-root-ca.crt` ConfigMap (the serviceaccount and root-ca-cert
 *   publisher controllers).
 * - On create, the status an object starts with (defaultOnCreate).
 */
import { quantityValue } from 'portal/dev-api';
import type { ResourceDef } from './registry.ts';
import { clone, isPlainObject, meta, nowTimestamp, type Obj } from './types.ts';

/** Applied to the main resource on every create, update and patch. */
export function applyDefaults(def: ResourceDef, obj: Obj): void {
  if (def.group !== '') return;
  if (def.resource === 'secrets') defaultSecret(obj);
  else if (def.resource === 'pods') defaultPodRequests(obj);
  else if (def.resource === 'services') defaultService(obj);
}

/** Service spec defaults (type, sessionAffinity, port protocol and targetPort), as SetDefaults_Service. */
function defaultService(obj: Obj): void {
  const spec: Obj = isPlainObject(obj['spec']) ? obj['spec'] : {};
  obj['spec'] = spec;
  if (typeof spec['type'] !== 'string' || spec['type'] === '') spec['type'] = 'ClusterIP';
  if (spec['type'] === 'ExternalName') return;
  if (typeof spec['sessionAffinity'] !== 'string' || spec['sessionAffinity'] === '') spec['sessionAffinity'] = 'None';
  if (Array.isArray(spec['ports'])) {
    for (const p of spec['ports']) {
      if (!isPlainObject(p)) continue;
      if (typeof p['protocol'] !== 'string' || p['protocol'] === '') p['protocol'] = 'TCP';
      if (p['targetPort'] === undefined || p['targetPort'] === null || p['targetPort'] === 0 || p['targetPort'] === '') p['targetPort'] = p['port'];
    }
  }
}

/**
 * The service IP allocator: 10.96.0.0/12 as kubeadm's default range,
 * 10.96.0.1 being the `kubernetes` Service's. Sequential, never reused: a
 * dev cluster lives for minutes.
 */
export class ClusterIpAllocator {
  private next = 2;

  assign(obj: Obj): void {
    const spec = obj['spec'];
    if (!isPlainObject(spec) || spec['type'] === 'ExternalName') return;
    if (typeof spec['clusterIP'] === 'string' && spec['clusterIP'] !== '') {
      spec['clusterIPs'] ??= [spec['clusterIP']];
      return;
    }
    const n = this.next++;
    const ip = `10.${96 + Math.floor(n / 65536)}.${Math.floor(n / 256) % 256}.${n % 256}`;
    spec['clusterIP'] = ip;
    spec['clusterIPs'] = [ip];
    spec['ipFamilies'] ??= ['IPv4'];
    spec['ipFamilyPolicy'] ??= 'SingleStack';
    spec['internalTrafficPolicy'] ??= 'Cluster';
  }
}

function defaultSecret(obj: Obj): void {
  const stringData = obj['stringData'];
  if (isPlainObject(stringData)) {
    const data: Obj = isPlainObject(obj['data']) ? obj['data'] : {};
    // stringData wins over data for the same key, as in the conversion.
    for (const [k, v] of Object.entries(stringData)) data[k] = Buffer.from(String(v), 'utf8').toString('base64');
    obj['data'] = data;
  }
  delete obj['stringData'];
  if (typeof obj['type'] !== 'string' || obj['type'] === '') obj['type'] = 'Opaque';
}

function containersOf(spec: Obj): Obj[] {
  const out: Obj[] = [];
  for (const key of ['initContainers', 'containers']) {
    const list = spec[key];
    if (Array.isArray(list)) for (const c of list) if (isPlainObject(c)) out.push(c);
  }
  return out;
}

function defaultPodRequests(pod: Obj): void {
  const spec = pod['spec'];
  if (!isPlainObject(spec)) return;
  for (const c of containersOf(spec)) {
    const resources = c['resources'];
    if (!isPlainObject(resources) || !isPlainObject(resources['limits'])) continue;
    const limits = resources['limits'];
    if (Object.keys(limits).length === 0) continue;
    const requests: Obj = isPlainObject(resources['requests']) ? resources['requests'] : {};
    for (const [name, q] of Object.entries(limits)) if (requests[name] === undefined) requests[name] = q;
    resources['requests'] = requests;
  }
}

export { quantityValue };

const QOS_RESOURCES = ['cpu', 'memory'];

/** kube's GetPodQOS over containers and init containers. */
export function podQosClass(pod: Obj): 'Guaranteed' | 'Burstable' | 'BestEffort' {
  const spec = isPlainObject(pod['spec']) ? pod['spec'] : {};
  const requests = new Map<string, number>();
  const limits = new Map<string, number>();
  let guaranteed = true;
  for (const c of containersOf(spec)) {
    const r = isPlainObject(c['resources']) ? c['resources'] : {};
    const req = isPlainObject(r['requests']) ? r['requests'] : {};
    const lim = isPlainObject(r['limits']) ? r['limits'] : {};
    for (const name of QOS_RESOURCES) {
      const v = quantityValue(req[name]);
      if (v !== undefined && v !== 0) requests.set(name, (requests.get(name) ?? 0) + v);
    }
    const found = new Set<string>();
    for (const name of QOS_RESOURCES) {
      const v = quantityValue(lim[name]);
      if (v !== undefined && v !== 0) {
        found.add(name);
        limits.set(name, (limits.get(name) ?? 0) + v);
      }
    }
    if (found.size !== QOS_RESOURCES.length) guaranteed = false;
  }
  if (requests.size === 0 && limits.size === 0) return 'BestEffort';
  if (guaranteed) {
    for (const [name, v] of requests) if (limits.get(name) !== v) guaranteed = false;
    if (guaranteed && requests.size === limits.size) return 'Guaranteed';
  }
  return 'Burstable';
}

export const ROOT_CA_CONFIGMAP = 'kube-root-ca.crt';
const ROOT_CA_DESCRIPTION = 'Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.';

/** What the controllers create in a new namespace: [resource, object] pairs (core group). */
export function namespaceContents(namespace: string, rootCaCert: string): [string, Obj][] {
  return [
    ['serviceaccounts', { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default', namespace } }],
    ['configmaps', {
      apiVersion: 'v1', kind: 'ConfigMap',
      metadata: { name: ROOT_CA_CONFIGMAP, namespace, annotations: { 'kubernetes.io/description': ROOT_CA_DESCRIPTION } },
      data: { 'ca.crt': rootCaCert },
    }],
  ];
}

/** The status (and namespace finalizer, Service clusterIP) an object gets when it is created. */
export function defaultOnCreate(def: ResourceDef, obj: Obj, serviceIps: ClusterIpAllocator): void {
  const m = meta(obj);
  if (def.group === '' && def.resource === 'namespaces') {
    m.labels = { ...(m.labels ?? {}), 'kubernetes.io/metadata.name': m.name ?? '' };
    obj['spec'] = { finalizers: ['kubernetes'] };
    obj['status'] = { phase: 'Active' };
    return;
  }
  if (def.group === '' && def.resource === 'pods') {
    obj['status'] = { phase: 'Pending', qosClass: podQosClass(obj) };
    return;
  }
  if (def.group === '' && def.resource === 'services') {
    serviceIps.assign(obj);
    obj['status'] = { loadBalancer: {} };
    return;
  }
  if (def.resource === 'customresourcedefinitions') {
    const spec = (obj['spec'] ?? {}) as Obj;
    const t = nowTimestamp();
    obj['status'] = {
      acceptedNames: clone(spec['names'] ?? {}),
      conditions: [
        { type: 'NamesAccepted', status: 'True', lastTransitionTime: t, reason: 'NoConflicts', message: 'no conflicts found' },
        { type: 'Established', status: 'True', lastTransitionTime: t, reason: 'InitialNamesAccepted', message: 'the initial names have been accepted' },
      ],
      storedVersions: Array.isArray(spec['versions'])
        ? (spec['versions'] as Obj[]).filter((v) => v['storage'] === true).map((v) => String(v['name'])) : [],
    };
    return;
  }
  if (def.hasStatus) delete obj['status'];
}
