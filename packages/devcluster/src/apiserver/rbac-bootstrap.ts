/**
 * The bootstrap RBAC policy a fresh cluster has (a subset of kube's
 * plugin/pkg/auth/authorizer/rbac/bootstrappolicy, same names and
 * structure): cluster-admin for system:masters; system:discovery,
 * system:basic-user and system:public-info-viewer for every authenticated
 * user; and the user-facing admin / edit / view roles, aggregated from the
 * system:aggregate-to-* ClusterRoles by label as on a real cluster.
 */
import type { Obj } from './types.ts';

const BOOTSTRAP_LABELS = { 'kubernetes.io/bootstrapping': 'rbac-defaults' };
const AUTO = { 'rbac.authorization.kubernetes.io/autoupdate': 'true' };

const READ = ['get', 'list', 'watch'];
const WRITE = ['create', 'delete', 'deletecollection', 'patch', 'update'];

function clusterRole(name: string, rules: Obj[], extra: Obj = {}): [string, Obj] {
  return ['clusterroles', { metadata: { name, labels: { ...BOOTSTRAP_LABELS, ...((extra['labels'] ?? {}) as Obj) }, annotations: AUTO }, rules, ...(extra['aggregationRule'] ? { aggregationRule: extra['aggregationRule'] } : {}) }];
}

function binding(name: string, role: string, subjects: Obj[]): [string, Obj] {
  return ['clusterrolebindings', {
    metadata: { name, labels: BOOTSTRAP_LABELS, annotations: AUTO },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role }, subjects,
  }];
}

const group = (name: string): Obj => ({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name });
const aggregate = (to: string): Obj => ({ clusterRoleSelectors: [{ matchLabels: { [`rbac.authorization.k8s.io/aggregate-to-${to}`]: 'true' } }] });

const VIEWABLE: [string, string[]][] = [
  ['', ['configmaps', 'endpoints', 'persistentvolumeclaims', 'persistentvolumeclaims/status', 'pods', 'pods/status', 'replicationcontrollers', 'replicationcontrollers/scale', 'replicationcontrollers/status', 'serviceaccounts', 'services', 'services/status', 'bindings', 'events', 'limitranges', 'namespaces', 'namespaces/status', 'resourcequotas', 'resourcequotas/status', 'pods/log']],
  ['apps', ['controllerrevisions', 'daemonsets', 'daemonsets/status', 'deployments', 'deployments/scale', 'deployments/status', 'replicasets', 'replicasets/scale', 'replicasets/status', 'statefulsets', 'statefulsets/scale', 'statefulsets/status']],
  ['autoscaling', ['horizontalpodautoscalers', 'horizontalpodautoscalers/status']],
  ['batch', ['cronjobs', 'cronjobs/status', 'jobs', 'jobs/status']],
  ['policy', ['poddisruptionbudgets', 'poddisruptionbudgets/status']],
  ['networking.k8s.io', ['ingresses', 'ingresses/status', 'networkpolicies']],
  ['discovery.k8s.io', ['endpointslices']],
];

const EDITABLE: [string, string[]][] = [
  ['', ['pods', 'pods/attach', 'pods/exec', 'pods/portforward', 'pods/proxy', 'pods/eviction', 'configmaps', 'endpoints', 'persistentvolumeclaims', 'replicationcontrollers', 'replicationcontrollers/scale', 'secrets', 'serviceaccounts', 'services', 'services/proxy', 'events']],
  ['apps', ['daemonsets', 'deployments', 'deployments/rollback', 'deployments/scale', 'replicasets', 'replicasets/scale', 'statefulsets', 'statefulsets/scale']],
  ['autoscaling', ['horizontalpodautoscalers']],
  ['batch', ['cronjobs', 'jobs']],
  ['policy', ['poddisruptionbudgets']],
  ['networking.k8s.io', ['ingresses', 'networkpolicies']],
  ['coordination.k8s.io', ['leases']],
];

export function bootstrapPolicy(): [string, Obj][] {
  const discoveryUrls = ['/api', '/api/*', '/apis', '/apis/*', '/healthz', '/livez', '/openapi', '/openapi/*', '/readyz', '/version', '/version/'];
  return [
    clusterRole('cluster-admin', [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }, { nonResourceURLs: ['*'], verbs: ['*'] }]),
    clusterRole('system:discovery', [{ nonResourceURLs: discoveryUrls, verbs: ['get'] }]),
    clusterRole('system:public-info-viewer', [{ nonResourceURLs: ['/healthz', '/livez', '/readyz', '/version', '/version/'], verbs: ['get'] }]),
    clusterRole('system:basic-user', [
      { apiGroups: ['authorization.k8s.io'], resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'], verbs: ['create'] },
      { apiGroups: ['authentication.k8s.io'], resources: ['selfsubjectreviews'], verbs: ['create'] },
    ]),
    clusterRole('admin', [], { aggregationRule: aggregate('admin') }),
    clusterRole('edit', [], { aggregationRule: aggregate('edit'), labels: { 'rbac.authorization.k8s.io/aggregate-to-admin': 'true' } }),
    clusterRole('view', [], { aggregationRule: aggregate('view'), labels: { 'rbac.authorization.k8s.io/aggregate-to-edit': 'true' } }),
    clusterRole('system:aggregate-to-view', VIEWABLE.map(([g, r]) => ({ apiGroups: [g], resources: r, verbs: READ })),
      { labels: { 'rbac.authorization.k8s.io/aggregate-to-view': 'true' } }),
    clusterRole('system:aggregate-to-edit', [
      ...EDITABLE.map(([g, r]) => ({ apiGroups: [g], resources: r, verbs: WRITE })),
      { apiGroups: [''], resources: ['secrets'], verbs: READ },
      { apiGroups: [''], resources: ['serviceaccounts'], verbs: ['impersonate'] },
    ], { labels: { 'rbac.authorization.k8s.io/aggregate-to-edit': 'true' } }),
    clusterRole('system:aggregate-to-admin', [
      { apiGroups: ['rbac.authorization.k8s.io'], resources: ['rolebindings', 'roles'], verbs: [...READ, ...WRITE] },
      { apiGroups: ['authorization.k8s.io'], resources: ['localsubjectaccessreviews'], verbs: ['create'] },
    ], { labels: { 'rbac.authorization.k8s.io/aggregate-to-admin': 'true' } }),
    binding('cluster-admin', 'cluster-admin', [group('system:masters')]),
    binding('system:discovery', 'system:discovery', [group('system:authenticated')]),
    binding('system:basic-user', 'system:basic-user', [group('system:authenticated')]),
    binding('system:public-info-viewer', 'system:public-info-viewer', [group('system:authenticated'), group('system:unauthenticated')]),
  ];
}
