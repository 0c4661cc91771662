/**
 * The chart's own RBAC (ServiceAccount, ClusterRole, Role and their
 * bindings, rendered from charts/portal with the default values for release
 * `portal` in `portal-system`), which `portal dev` applies to its embedded
 * API server so that every replica runs as the chart's ServiceAccount under
 * exactly the permissions production gives it. The rendered objects are
 * committed (chart-rbac.generated.ts, written by scripts/gen-dev-rbac.mjs) so
 * `portal dev` needs no Helm; test/dev/chart-rbac.test.ts fails when the
 * chart changes and the file was not regenerated.
 */
import { CHART_RBAC, CHART_RBAC_DENIAL_EVENTS } from './chart-rbac.generated.ts';
import { DENIAL_EVENTS_SET, generatedModule, selectRbac, type RbacObject } from './chart-rbac-render.ts';

export { DENIAL_EVENTS_SET, generatedModule, selectRbac, type RbacObject };

/** The ServiceAccount username the replicas run as (system:serviceaccount:NS:NAME). */
export function chartServiceAccount(): { namespace: string; name: string; username: string } {
  const sa = CHART_RBAC.find((o) => o.kind === 'ServiceAccount');
  if (!sa) throw new Error('chart-rbac.generated.ts has no ServiceAccount: re-run scripts/gen-dev-rbac.mjs');
  const namespace = sa.metadata.namespace ?? 'portal-system';
  return { namespace, name: sa.metadata.name, username: `system:serviceaccount:${namespace}:${sa.metadata.name}` };
}

/**
 * The chart's RBAC with each replica's own ServiceAccount added to the
 * chart's bindings: the replicas get exactly the chart's roles, under one
 * name each (as the pod-name in a bound token tells Pods apart), so the
 * audit log and fault injection can still tell replicas apart.
 * `denialEvents`: the replicas run with `--denial-events`, so the chart's
 * RBAC is the one rendered with `denials.events=true` (it adds `patch` on events).
 */
export function rbacForReplicas(replicas: readonly string[], options: { denialEvents?: boolean } = {}): RbacObject[] {
  const sa = chartServiceAccount();
  return (options.denialEvents === true ? CHART_RBAC_DENIAL_EVENTS : CHART_RBAC).map((o) => {
    if (o.kind !== 'ClusterRoleBinding' && o.kind !== 'RoleBinding') return o;
    const subjects = Array.isArray(o['subjects']) ? (o['subjects'] as Record<string, unknown>[]) : [];
    const boundToChart = subjects.some((x) => x['kind'] === 'ServiceAccount' && x['name'] === sa.name && (x['namespace'] ?? o.metadata.namespace) === sa.namespace);
    if (!boundToChart) return o;
    return { ...o, subjects: [...subjects, ...replicas.map((name) => ({ kind: 'ServiceAccount', name, namespace: sa.namespace }))] };
  });
}

export { CHART_RBAC, CHART_RBAC_DENIAL_EVENTS };
