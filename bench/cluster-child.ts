/**
 * Child process of bench/admission.ts: the cluster a cluster-mode replica
 * runs against, alone on its own event loop as in `portal dev`. The embedded
 * API server with Portal's CRDs, the shipped rules from policies/, the
 * review's namespace (with labels) and the replica's service account; writes
 * the replica's kubeconfig to argv[2] and prints `ready` when done.
 *
 * Why not `portal dev` itself: it starts replicas detached (their own
 * session), and with the kernel's scheduler autogroups on (the default on
 * desktop and many server kernels) a process in its own session is scheduled
 * as a separate group. On a machine shared with other work the replica and
 * the load generator then get different shares of the CPU than the ceiling
 * and the standalone replica do, and the ratio measures the scheduler, not
 * Portal. Here the replica is the benchmark's own child, like the others.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startApiServer } from '../packages/devcluster/src/apiserver/index.ts';
import { DevApiClient } from '../packages/devcluster/src/dev/api-client.ts';
import { readChartCrds, readManifests } from '../packages/devcluster/src/dev/manifests.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const kubeconfigFile = process.argv[2];
const namespace = process.argv[3] ?? 'portal-system';
const user = process.argv[4] ?? 'system:serviceaccount:portal-system:portal-0';
if (!kubeconfigFile) throw new Error('usage: cluster-child.ts KUBECONFIG [NAMESPACE] [USER]');

const api = await startApiServer({ namespaces: ['default', 'kube-system', 'kube-public', 'kube-node-lease', namespace] });
const admin = new DevApiClient(api.url, api.adminToken);
// Portal's CRDs and the report CRDs the chart installs by default (as `portal dev` does): without them the
// replica's report informers retry on 404 for the whole run, which a deployed replica does not.
const crds = await readChartCrds(join(root, 'charts', 'portal'));
// policies/ also holds the Pod Security controls as ValidatingAdmissionPolicies (policies/pod-security-vap);
// like `portal dev`, install only the Portal rules (both would enforce every control twice).
const RULE_KINDS = ['PortalClusterRule', 'PortalRule'];
const rules = await readManifests(join(root, 'policies'), [...RULE_KINDS, 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
const problems = [...crds.problems, ...rules.problems];
if (problems.length > 0) throw new Error(problems.join('\n'));
for (const crd of crds.objects) await admin.apply(crd);
for (const rule of rules.objects.filter((o) => RULE_KINDS.includes(o.kind))) {
  await admin.apply(rule.kind === 'PortalRule' ? { ...rule, metadata: { ...rule.metadata, namespace: rule.metadata.namespace ?? 'default' } } : rule);
}
// The benchmark review's namespace, labelled like a team's namespace.
await admin.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop', labels: { team: 'payments' } } });
api.addUser(user, ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated']);
await writeFile(kubeconfigFile, api.kubeConfig(user), { mode: 0o600 });
process.stdout.write('ready\n');
// Exit through process.exit so --cpu-prof writes its profile.
process.on('SIGTERM', () => void api.close().then(() => process.exit(0)));
