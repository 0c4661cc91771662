/**
 * Resolves the `{group, kind}` pairs that rules match (RuleSet.matchedKinds())
 * to REST resources the audit can list and watch. Built-in kinds come from a
 * static table (no API call, and it works before discovery is reachable);
 * anything else (CRDs) is looked up through legacy discovery, once per group.
 * Wildcards (`*` group or kind) are not expanded: auditing "every kind in the
 * cluster" would watch Secrets, Events and Leases, which is neither cheap nor
 * what a rule author means; they are reported as unresolved instead.
 */
import type { KubeClient } from '../kube/client.ts';
import { kubeGetJson } from '../kube/raw-get.ts';
import { guessResource } from '../policy/vap/resources.ts';

export interface KindResource {
  group: string;
  version: string;
  kind: string;
  /** Plural resource name, e.g. `pods`. */
  resource: string;
  namespaced: boolean;
}

/** Collection path across all namespaces, e.g. `/api/v1/pods`, `/apis/apps/v1/deployments`. */
export function collectionPath(r: Pick<KindResource, 'group' | 'version' | 'resource'>): string {
  return r.group === '' ? `/api/${r.version}/${r.resource}` : `/apis/${r.group}/${r.version}/${r.resource}`;
}

export function apiVersionOf(r: Pick<KindResource, 'group' | 'version'>): string {
  return r.group === '' ? r.version : `${r.group}/${r.version}`;
}

/** group, version, namespaced kinds, cluster-scoped kinds; resources are the kinds' regular plurals (guessResource). */
const BUILTIN_GROUPS: readonly [group: string, version: string, namespaced: readonly string[], cluster: readonly string[]][] = [
  ['', 'v1', ['Pod', 'Service', 'ConfigMap', 'ServiceAccount', 'ReplicationController', 'PersistentVolumeClaim'], ['Namespace', 'PersistentVolume', 'Node']],
  ['apps', 'v1', ['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet'], []],
  ['batch', 'v1', ['Job', 'CronJob'], []],
  ['networking.k8s.io', 'v1', ['Ingress', 'NetworkPolicy'], []],
  ['policy', 'v1', ['PodDisruptionBudget'], []],
  ['rbac.authorization.k8s.io', 'v1', ['Role', 'RoleBinding'], ['ClusterRole', 'ClusterRoleBinding']],
];

/** The built-in kinds a Portal rule is likely to match (the workloads plus common config objects). */
export const BUILTIN_KINDS: readonly KindResource[] = Object.freeze(
  BUILTIN_GROUPS.flatMap(([group, version, namespaced, cluster]) => [
    ...namespaced.map((kind) => ({ group, version, kind, resource: guessResource(kind), namespaced: true })),
    ...cluster.map((kind) => ({ group, version, kind, resource: guessResource(kind), namespaced: false })),
  ]),
);

const builtins = new Map(BUILTIN_KINDS.map((r) => [`${r.group}/${r.kind}`, r]));

interface GroupList {
  groups?: Array<{ name: string; preferredVersion?: { version?: string }; versions?: Array<{ version: string }> }>;
}
interface ResourceList {
  resources?: Array<{ name: string; kind: string; namespaced: boolean }>;
}

export type Resolution = { ok: true; resource: KindResource } | { ok: false; reason: string };

/** Resolves kinds; discovery answers are cached per group until {@link forget}. */
export class KindResolver {
  readonly #client: KubeClient;
  readonly #groups = new Map<string, KindResource[]>();

  constructor(client: KubeClient) {
    this.#client = client;
  }

  /** Drops cached discovery (call when a kind stays unresolved: its CRD may appear later). */
  forget(): void {
    this.#groups.clear();
  }

  async resolve(group: string, kind: string, signal?: AbortSignal): Promise<Resolution> {
    if (group === '*' || kind === '*') return { ok: false, reason: `wildcard ${group}/${kind} is not audited (name the kinds)` };
    const builtin = builtins.get(`${group}/${kind}`);
    if (builtin) return { ok: true, resource: builtin };
    let resources = this.#groups.get(group);
    if (!resources) {
      resources = await this.#discover(group, signal);
      this.#groups.set(group, resources);
    }
    const found = resources.find((r) => r.kind === kind);
    return found ? { ok: true, resource: found } : { ok: false, reason: `kind ${group || 'core'}/${kind} is not served by the API server` };
  }

  async #discover(group: string, signal?: AbortSignal): Promise<KindResource[]> {
    let version: string | undefined;
    if (group === '') version = 'v1';
    else {
      const list = await kubeGetJson<GroupList>(this.#client, '/apis', signal);
      const g = list.groups?.find((x) => x.name === group);
      version = g?.preferredVersion?.version ?? g?.versions?.[0]?.version;
    }
    if (!version) return [];
    const path = group === '' ? `/api/${version}` : `/apis/${group}/${version}`;
    const list = await kubeGetJson<ResourceList>(this.#client, path, signal);
    return (list.resources ?? [])
      .filter((r) => !r.name.includes('/'))
      .map((r) => ({ group, version: version!, kind: r.kind, resource: r.name, namespaced: r.namespaced }));
  }
}
