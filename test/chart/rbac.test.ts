// The chart's RBAC (issue 6): least privilege, no wildcards, the exact verbs
// per resource, and `patch` only on the kinds label/annotate actions touch.
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { BUILTIN_KINDS } from '../../src/audit/kind-resources.ts';
import { allLedgerShardNames } from '../../src/audit/ledger.ts';
import { POD_TEMPLATE_KINDS } from '../../src/policy/index.ts';
import { find, helm, chartDir, NAMESPACE, RELEASE, render, withValuesFile, type Manifest } from './helm.ts';
import { rulesOf, verbsFor, type PolicyRule } from './rbac.ts';

const policiesDir = fileURLToPath(new URL('../../policies', import.meta.url));

interface ShippedRule {
  kind?: string;
  metadata: { name: string };
  spec: { match?: { kinds?: { apiGroups: string[]; kinds: string[] }[] }; podTemplates?: boolean; audit?: { actions?: { type: string }[] } };
}

async function shippedRules(dir = policiesDir): Promise<ShippedRule[]> {
  const out: ShippedRule[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await shippedRules(path)));
    else if (entry.name.endsWith('.yaml')) out.push(...parseAllDocuments(await readFile(path, 'utf8')).map((d) => d.toJS() as ShippedRule).filter((r) => r?.kind === 'PortalRule' || r?.kind === 'PortalClusterRule'));
  }
  return out;
}

/** `group/resource` of every kind a shipped rule with a label/annotate action matches, pod templates included. */
async function actionKinds(): Promise<string[]> {
  const resourceOf = new Map(BUILTIN_KINDS.map((k) => [`${k.group}/${k.kind}`, `${k.group}/${k.resource}`]));
  const out = new Set<string>();
  for (const rule of await shippedRules()) {
    if (!(rule.spec.audit?.actions ?? []).some((a) => a.type === 'label' || a.type === 'annotate')) continue;
    const kinds = rule.spec.match?.kinds ?? [];
    const add = (group: string, kind: string) => {
      const r = resourceOf.get(`${group}/${kind}`);
      assert.ok(r, `${rule.metadata.name}: ${group}/${kind} is a built-in kind`);
      out.add(r);
    };
    for (const k of kinds) for (const g of k.apiGroups) for (const kind of k.kinds) add(g, kind);
    // Pod-template rules (the default when a rule matches Pod) also match every workload kind.
    const matchesPod = kinds.some((k) => k.apiGroups.includes('') && k.kinds.includes('Pod'));
    if (matchesPod && rule.spec.podTemplates !== false) for (const w of POD_TEMPLATE_KINDS) add(w.group, w.kind);
  }
  return [...out].sort();
}

/** `group/resource` of every ClusterRole rule granting patch on a whole kind (not a subresource). */
/** The report kinds of both APIs, which the chart lets the leader write whatever the actions. */
const isReportKind = (k: string): boolean => k.startsWith('wgpolicyk8s.io/') || k.startsWith('openreports.io/');

const patchedKinds = (rules: PolicyRule[]): string[] =>
  rules.filter((r) => r.verbs.includes('patch')).flatMap((r) => r.apiGroups.flatMap((g) => r.resources.filter((x) => !x.includes('/')).map((x) => `${g}/${x}`))).sort();

void test('RBAC: no wildcards, and exactly the verbs each resource needs', async () => {
  const ms = await render();
  const cluster = rulesOf(find(ms, 'ClusterRole'));
  const role = rulesOf(find(ms, 'Role'));
  for (const r of [...cluster, ...role]) {
    for (const field of [r.apiGroups, r.resources, r.verbs, r.resourceNames ?? []]) assert.ok(!field.includes('*'), `no wildcard in ${JSON.stringify(r)}`);
  }
  const read = ['get', 'list', 'watch'];
  const expectCluster: [string, string, string[]][] = [
    ['portal.dev', 'portalrules', read],
    ['portal.dev', 'portalclusterrules', read],
    ['portal.dev', 'portalexceptions', read],
    // Status is written with a merge patch (src/audit/status-writer.ts), never replaced.
    ['portal.dev', 'portalrules/status', ['patch']],
    ['portal.dev', 'portalclusterrules/status', ['patch']],
    ['portal.dev', 'portalexceptions/status', ['patch']],
    // Events on PortalExceptions, in the exception's namespace (create only).
    ['', 'events', ['create']],
    ['events.k8s.io', 'events', ['create']],
    ['', 'namespaces', read],
    ['', 'pods/eviction', ['create']],
    // Both report APIs: reports.api is written; the other one's reports (after a switch) are deleted (adr/0012).
    ['openreports.io', 'reports', ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch']],
    ['openreports.io', 'clusterreports', ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch']],
    ['wgpolicyk8s.io', 'policyreports', ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch']],
    ['wgpolicyk8s.io', 'clusterpolicyreports', ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch']],
    ['', 'secrets', []],
    ['', 'configmaps', []],
    ['coordination.k8s.io', 'leases', []],
    // Warning Events on rules (their namespace) and on cluster-scoped policies ("default"): create only.
    ['', 'events', ['create']],
  ];
  for (const [group, resource, verbs] of expectCluster) assert.deepEqual(verbsFor(cluster, group, resource), verbs, `ClusterRole ${group}/${resource}`);
  // The webhook's kinds: read for the informers, patch for label/annotate (all of them by default).
  const hooks = find(ms, 'ValidatingWebhookConfiguration')['webhooks'] as { rules: { apiGroups: string[]; resources: string[] }[] }[];
  for (const rule of hooks[0]!.rules) {
    // A subresource the webhook receives (pods/ephemeralcontainers) needs no grant: the informers read its parent.
    for (const group of rule.apiGroups) for (const resource of rule.resources) assert.deepEqual(verbsFor(cluster, group, resource), resource.includes('/') ? [] : [...read, 'patch'].sort(), `${group}/${resource}`);
  }
  // One named rule cluster-wide: the release's own webhook configuration, read for the rules' Covered condition.
  assert.deepEqual(cluster.filter((r) => r.resourceNames).map((r) => [r.apiGroups, r.resources, r.resourceNames, [...r.verbs].sort()]), [
    [['admissionregistration.k8s.io'], ['validatingwebhookconfigurations'], [RELEASE], read],
  ]);
  assert.deepEqual(verbsFor(cluster, 'admissionregistration.k8s.io', 'validatingwebhookconfigurations'), [], 'no other webhook configuration');

  const expectRole: [string, string, string, string[]][] = [
    ['coordination.k8s.io', 'leases', 'portal-leader', ['create', 'get', 'list', 'update', 'watch']],
    ['', 'events', '', ['create', 'patch']],
    ['events.k8s.io', 'events', '', ['create', 'patch']],
    // Ledger: list/watch of the namespace (label-selected informer) and create (no name at authorization time) ...
    ['', 'configmaps', '', ['create', 'list', 'watch']],
    ['', 'configmaps', 'kube-root-ca.crt', ['create', 'list', 'watch']],
    ['', 'secrets', '', []],
  ];
  // ... and patch on the 16 shards only.
  for (const shard of allLedgerShardNames()) expectRole.push(['', 'configmaps', shard, ['create', 'get', 'list', 'patch', 'watch']]);
  for (const [group, resource, name, verbs] of expectRole) assert.deepEqual(verbsFor(role, group, resource, name), verbs, `Role ${group}/${resource} ${name}`);
  const named = role.filter((r) => r.resourceNames);
  assert.deepEqual(named.map((r) => [...r.resourceNames!].sort()), [allLedgerShardNames().sort()]);

  // No PortalException permission reaches the built-in admin/edit roles (docs/exceptions.md: granting it is a decision).
  for (const m of ms) assert.ok(!JSON.stringify(m).includes('aggregate-to-'), `${m.kind} ${m.metadata.name} aggregates into a built-in role`);

  const binding = find(ms, 'ClusterRoleBinding') as Manifest & { subjects: { name: string; namespace: string }[] };
  assert.deepEqual(binding.subjects.map((s) => [s.name, s.namespace]), [['portal', NAMESPACE]]);
  const roleBinding = find(ms, 'RoleBinding') as Manifest & { subjects: { name: string; namespace: string }[] };
  assert.deepEqual(roleBinding.subjects.map((s) => [s.name, s.namespace]), [['portal', NAMESPACE]]);
});

void test('RBAC: denials.events adds patch on core events (the count of an aggregated denial Event), nothing else; off by default', async () => {
  const off = rulesOf(find(await render(), 'ClusterRole'));
  const on = rulesOf(find(await render({ denials: { events: true } }), 'ClusterRole'));
  assert.deepEqual(verbsFor(off, '', 'events'), ['create']);
  assert.deepEqual(verbsFor(on, '', 'events'), ['create', 'patch']);
  assert.deepEqual(verbsFor(on, 'events.k8s.io', 'events'), ['create']);
  const added = on.filter((r) => !off.some((o) => JSON.stringify(o) === JSON.stringify(r)));
  assert.deepEqual(added, [{ apiGroups: [''], resources: ['events'], verbs: ['patch'] }]);
});

void test('RBAC: patch by default on exactly the kinds the shipped label/annotate rules touch', async () => {
  const expected = await actionKinds();
  assert.ok(expected.length > 0, 'some shipped rule labels or annotates');
  const ms = await render();
  assert.deepEqual(patchedKinds(rulesOf(find(ms, 'ClusterRole'))).filter((k) => !isReportKind(k)), expected);
});

void test('RBAC: patch follows rbac.actionResources, read follows webhook.rules', async () => {
  const none = rulesOf(find(await render({ rbac: { actionResources: [] } }), 'ClusterRole'));
  assert.deepEqual(patchedKinds(none), ['openreports.io/clusterreports', 'openreports.io/reports', 'wgpolicyk8s.io/clusterpolicyreports', 'wgpolicyk8s.io/policyreports']);
  assert.deepEqual(verbsFor(none, '', 'pods'), ['get', 'list', 'watch'], 'read stays');
  assert.deepEqual(verbsFor(none, '', 'pods/eviction'), ['create']);

  const ingress = rulesOf(find(await render({ rbac: { actionResources: [{ apiGroup: 'networking.k8s.io', resources: ['ingresses'] }, { apiGroup: '', resources: ['pods'] }] } }), 'ClusterRole'));
  assert.deepEqual(patchedKinds(ingress).filter((k) => !isReportKind(k)), ['/pods', 'networking.k8s.io/ingresses']);
  assert.deepEqual(verbsFor(ingress, 'apps', 'deployments'), ['get', 'list', 'watch']);
  // Not in webhook.rules: patchable (the operator asked) but not readable through this chart's read rules.
  assert.deepEqual(verbsFor(ingress, 'networking.k8s.io', 'ingresses'), ['patch']);
});

void test('RBAC: rbac.actionResources refuses wildcards and Portal\'s own or escalating groups', async () => {
  for (const [entry, message] of [
    [{ apiGroup: '*', resources: ['pods'] }, /apiGroup/],
    [{ apiGroup: '', resources: ['*'] }, /resources/],
    [{ apiGroup: '', resources: ['pods/status'] }, /resources/],
  ] as const) {
    const r = await withValuesFile({ rbac: { actionResources: [entry] } }, (file) => helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, '--values', file]));
    assert.notEqual(r.code, 0, `rejects ${JSON.stringify(entry)}`);
    assert.match(r.stderr, message);
  }
  for (const group of ['portal.dev', 'rbac.authorization.k8s.io', 'admissionregistration.k8s.io']) {
    await assert.rejects(render({ rbac: { actionResources: [{ apiGroup: group, resources: ['anything'] }] } }), new RegExp(`must never patch "${group.replaceAll('.', '\\.')}"`));
  }
});
