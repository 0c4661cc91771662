/**
 * The resource registry: what the server serves (built-ins and CRD-defined
 * resources) and the per-type rules the generic store applies.
 */
import type { Obj } from './types.ts';

export interface PrinterColumn {
  name: string; type: string; jsonPath: string; format?: string; description?: string; priority?: number;
}

export interface ResourceDef {
  group: string;
  version: string;
  resource: string;
  kind: string;
  listKind: string;
  singular: string;
  shortNames: string[];
  categories: string[];
  namespaced: boolean;
  hasStatus: boolean;
  hasEviction: boolean;
  /** Built-in types accept strategic merge patch and list items without kind. */
  builtin: boolean;
  /** metadata.generation is maintained (bumped on non-metadata, non-status changes). */
  generation: boolean;
  /** PUT without metadata.resourceVersion is 422 (Leases, custom resources). */
  putRequiresRv: boolean;
  /** PUT on a missing object creates it (Leases). */
  putCreates: boolean;
  /** DELETE answers with the object (pods, namespaces, services) instead of a Status. */
  deleteReturnsObject: boolean;
  /** Extra field selectors beyond metadata.name / metadata.namespace. */
  fieldSelectors: Record<string, (o: Obj) => string | undefined>;
  columns: PrinterColumn[];
  /** openAPIV3Schema for custom resources. */
  schema?: Obj;
  /** Name of the CRD that defines it. */
  crd?: string;
}

export function groupVersion(d: { group: string; version: string }): string {
  return d.group ? `${d.group}/${d.version}` : d.version;
}

/** Storage key of a resource (all versions of a CRD share one store). */
export function storeKey(d: { group: string; resource: string }): string {
  return `${d.resource}.${d.group}`;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

interface BuiltinSpec {
  gv: string; resource: string; kind: string; namespaced?: boolean; short?: string[]; cats?: string[];
  status?: boolean; eviction?: boolean; generation?: boolean; putRequiresRv?: boolean; putCreates?: boolean;
  deleteReturnsObject?: boolean; fields?: ResourceDef['fieldSelectors']; columns?: PrinterColumn[];
}

const age: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

const BUILTINS: BuiltinSpec[] = [
  { gv: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false, short: ['ns'], status: true, deleteReturnsObject: true,
    fields: { 'status.phase': (o) => str((o['status'] as Obj | undefined)?.['phase']) },
    columns: [{ name: 'Status', type: 'string', jsonPath: '.status.phase' }] },
  { gv: 'v1', resource: 'pods', kind: 'Pod', short: ['po'], cats: ['all'], status: true, eviction: true, deleteReturnsObject: true,
    fields: {
      'status.phase': (o) => str((o['status'] as Obj | undefined)?.['phase']) ?? '',
      'spec.nodeName': (o) => str((o['spec'] as Obj | undefined)?.['nodeName']) ?? '',
      'spec.restartPolicy': (o) => str((o['spec'] as Obj | undefined)?.['restartPolicy']) ?? '',
      'spec.serviceAccountName': (o) => str((o['spec'] as Obj | undefined)?.['serviceAccountName']) ?? '',
      'status.podIP': (o) => str((o['status'] as Obj | undefined)?.['podIP']) ?? '',
    },
    columns: [{ name: 'Status', type: 'string', jsonPath: '.status.phase' }] },
  { gv: 'v1', resource: 'configmaps', kind: 'ConfigMap', short: ['cm'] },
  { gv: 'v1', resource: 'secrets', kind: 'Secret', fields: { type: (o) => str(o['type']) ?? '' } },
  { gv: 'v1', resource: 'services', kind: 'Service', short: ['svc'], cats: ['all'], status: true, deleteReturnsObject: true },
  { gv: 'v1', resource: 'serviceaccounts', kind: 'ServiceAccount', short: ['sa'] },
  { gv: 'v1', resource: 'events', kind: 'Event', short: ['ev'],
    fields: {
      'involvedObject.kind': (o) => str((o['involvedObject'] as Obj | undefined)?.['kind']) ?? '',
      'involvedObject.name': (o) => str((o['involvedObject'] as Obj | undefined)?.['name']) ?? '',
      'involvedObject.namespace': (o) => str((o['involvedObject'] as Obj | undefined)?.['namespace']) ?? '',
      'involvedObject.uid': (o) => str((o['involvedObject'] as Obj | undefined)?.['uid']) ?? '',
      reason: (o) => str(o['reason']) ?? '',
      type: (o) => str(o['type']) ?? '',
    } },
  { gv: 'events.k8s.io/v1', resource: 'events', kind: 'Event', short: ['ev'] },
  { gv: 'coordination.k8s.io/v1', resource: 'leases', kind: 'Lease', putRequiresRv: true, putCreates: true,
    columns: [{ name: 'Holder', type: 'string', jsonPath: '.spec.holderIdentity' }] },
  { gv: 'policy/v1', resource: 'poddisruptionbudgets', kind: 'PodDisruptionBudget', short: ['pdb'], status: true, generation: true },
  { gv: 'apps/v1', resource: 'deployments', kind: 'Deployment', short: ['deploy'], cats: ['all'], status: true, generation: true },
  { gv: 'apps/v1', resource: 'statefulsets', kind: 'StatefulSet', short: ['sts'], cats: ['all'], status: true, generation: true },
  { gv: 'apps/v1', resource: 'daemonsets', kind: 'DaemonSet', short: ['ds'], cats: ['all'], status: true, generation: true },
  { gv: 'apps/v1', resource: 'replicasets', kind: 'ReplicaSet', short: ['rs'], cats: ['all'], status: true, generation: true },
  { gv: 'batch/v1', resource: 'jobs', kind: 'Job', cats: ['all'], status: true, generation: true },
  { gv: 'batch/v1', resource: 'cronjobs', kind: 'CronJob', short: ['cj'], cats: ['all'], status: true, generation: true },
  { gv: 'apiextensions.k8s.io/v1', resource: 'customresourcedefinitions', kind: 'CustomResourceDefinition', namespaced: false,
    short: ['crd', 'crds'], status: true, generation: true,
    columns: [{ name: 'Created At', type: 'date', jsonPath: '.metadata.creationTimestamp' }] },
  { gv: 'admissionregistration.k8s.io/v1', resource: 'validatingwebhookconfigurations', kind: 'ValidatingWebhookConfiguration',
    namespaced: false, generation: true },
  { gv: 'v1', resource: 'replicationcontrollers', kind: 'ReplicationController', short: ['rc'], cats: ['all'], status: true, generation: true },
  { gv: 'v1', resource: 'nodes', kind: 'Node', namespaced: false, short: ['no'], status: true,
    columns: [{ name: 'Version', type: 'string', jsonPath: '.status.nodeInfo.kubeletVersion' }] },
  { gv: 'rbac.authorization.k8s.io/v1', resource: 'roles', kind: 'Role' },
  { gv: 'rbac.authorization.k8s.io/v1', resource: 'clusterroles', kind: 'ClusterRole', namespaced: false },
  { gv: 'rbac.authorization.k8s.io/v1', resource: 'rolebindings', kind: 'RoleBinding',
    columns: [{ name: 'Role', type: 'string', jsonPath: '.roleRef.name' }] },
  { gv: 'rbac.authorization.k8s.io/v1', resource: 'clusterrolebindings', kind: 'ClusterRoleBinding', namespaced: false,
    columns: [{ name: 'Role', type: 'string', jsonPath: '.roleRef.name' }] },
  // Review APIs (access.ts): answered, never stored.
  { gv: 'authorization.k8s.io/v1', resource: 'selfsubjectaccessreviews', kind: 'SelfSubjectAccessReview', namespaced: false },
  { gv: 'authorization.k8s.io/v1', resource: 'selfsubjectrulesreviews', kind: 'SelfSubjectRulesReview', namespaced: false },
  { gv: 'authorization.k8s.io/v1', resource: 'subjectaccessreviews', kind: 'SubjectAccessReview', namespaced: false },
  { gv: 'admissionregistration.k8s.io/v1', resource: 'mutatingwebhookconfigurations', kind: 'MutatingWebhookConfiguration',
    namespaced: false, generation: true },
  // The chart's NetworkPolicy (adr/0009): stored and served, not enforced (no network here).
  { gv: 'networking.k8s.io/v1', resource: 'networkpolicies', kind: 'NetworkPolicy', short: ['netpol'], generation: true },
  // The API server enforces these itself (vap-admission.ts); `.status` is written by the server, never by clients' main-resource writes.
  { gv: 'admissionregistration.k8s.io/v1', resource: 'validatingadmissionpolicies', kind: 'ValidatingAdmissionPolicy',
    namespaced: false, generation: true, status: true },
  { gv: 'admissionregistration.k8s.io/v1', resource: 'validatingadmissionpolicybindings', kind: 'ValidatingAdmissionPolicyBinding',
    namespaced: false, generation: true },
];

function builtinDef(s: BuiltinSpec): ResourceDef {
  const [group, version] = s.gv.includes('/') ? (s.gv.split('/') as [string, string]) : ['', s.gv];
  return {
    group, version, resource: s.resource, kind: s.kind, listKind: `${s.kind}List`,
    singular: s.kind.toLowerCase(), shortNames: s.short ?? [], categories: s.cats ?? [],
    namespaced: s.namespaced ?? true, hasStatus: s.status ?? false, hasEviction: s.eviction ?? false,
    builtin: true, generation: s.generation ?? false, putRequiresRv: s.putRequiresRv ?? false,
    putCreates: s.putCreates ?? false, deleteReturnsObject: s.deleteReturnsObject ?? false,
    fieldSelectors: s.fields ?? {}, columns: [...(s.columns ?? []), ...(s.resource === 'customresourcedefinitions' ? [] : [age])],
  };
}

/** Mutable set of served resources, indexed for the router and discovery. */
export class Registry {
  private readonly byGvr = new Map<string, ResourceDef>();
  private readonly crdDefs = new Map<string, ResourceDef[]>();

  constructor() {
    for (const s of BUILTINS) this.add(builtinDef(s));
  }

  private add(d: ResourceDef): void {
    this.byGvr.set(`${d.group}/${d.version}/${d.resource}`, d);
  }

  get(group: string, version: string, resource: string): ResourceDef | undefined {
    return this.byGvr.get(`${group}/${version}/${resource}`);
  }

  all(): ResourceDef[] {
    return [...this.byGvr.values()];
  }

  /** Resolve an ownerReference / kind to a served resource. */
  byKind(apiVersion: string, kind: string): ResourceDef | undefined {
    const [group, version] = apiVersion.includes('/') ? (apiVersion.split('/') as [string, string]) : ['', apiVersion];
    for (const d of this.byGvr.values()) if (d.group === group && d.version === version && d.kind === kind) return d;
    for (const d of this.byGvr.values()) if (d.group === group && d.kind === kind) return d;
    return undefined;
  }

  /** Group -> versions (preferred first), in registration order. */
  groups(): Map<string, string[]> {
    const m = new Map<string, string[]>();
    for (const d of this.byGvr.values()) {
      const vs = m.get(d.group) ?? [];
      if (!vs.includes(d.version)) vs.push(d.version);
      m.set(d.group, vs);
    }
    return m;
  }

  /** (Re)serves the resources of a CRD; returns the defs. */
  setCrd(name: string, defs: ResourceDef[]): void {
    this.removeCrd(name);
    this.crdDefs.set(name, defs);
    for (const d of defs) this.add(d);
  }

  removeCrd(name: string): ResourceDef[] {
    const old = this.crdDefs.get(name) ?? [];
    for (const d of old) this.byGvr.delete(`${d.group}/${d.version}/${d.resource}`);
    this.crdDefs.delete(name);
    return old;
  }
}

/** ResourceDefs for every served version of a CustomResourceDefinition. */
export function defsFromCrd(crd: Obj): ResourceDef[] {
  const spec = (crd['spec'] ?? {}) as Obj;
  const names = (spec['names'] ?? {}) as Obj;
  const group = String(spec['group'] ?? '');
  const kind = String(names['kind'] ?? '');
  const plural = String(names['plural'] ?? '');
  const versions = Array.isArray(spec['versions']) ? (spec['versions'] as Obj[]) : [];
  const defs: ResourceDef[] = [];
  for (const v of versions) {
    if (v['served'] === false) continue;
    const sub = (v['subresources'] ?? {}) as Obj;
    const cols = Array.isArray(v['additionalPrinterColumns']) ? (v['additionalPrinterColumns'] as PrinterColumn[]) : [];
    const schema = ((v['schema'] ?? {}) as Obj)['openAPIV3Schema'] as Obj | undefined;
    const def: ResourceDef = {
      group, version: String(v['name']), resource: plural, kind,
      listKind: typeof names['listKind'] === 'string' ? names['listKind'] : `${kind}List`,
      singular: typeof names['singular'] === 'string' ? names['singular'] : kind.toLowerCase(),
      shortNames: Array.isArray(names['shortNames']) ? (names['shortNames'] as string[]) : [],
      categories: Array.isArray(names['categories']) ? (names['categories'] as string[]) : [],
      namespaced: spec['scope'] !== 'Cluster', hasStatus: sub['status'] !== undefined, hasEviction: false,
      builtin: false, generation: true, putRequiresRv: true, putCreates: false, deleteReturnsObject: false,
      fieldSelectors: {}, columns: cols.length ? cols : [age], crd: String((crd['metadata'] as Obj | undefined)?.['name'] ?? ''),
    };
    if (schema) def.schema = schema;
    defs.push(def);
  }
  return defs;
}
