// Issue 15 acceptance, as a user meets it: real kubectl 1.35 against one
// `portal dev` (two replicas) started with a --policies directory whose rules
// are installed before the webhook configuration exists — what "the rule got
// in while Portal's webhook was down" looks like.
//
// - A broken Warn rule is refused at apply (and at --dry-run=server) by the
//   webhook for Portal's own kinds, with field, line and column.
// - The broken Warn rule that got in anyway admits Pods with a warning; the
//   broken Deny rule that got in denies.
// - An Audit rule's runtime error is an `error` result in its report and
//   a Warning Event on the rule, and the Pod is admitted silently.
// - A Warn rule on ConfigMaps shows NotSentByWebhook; an Audit rule on
//   ConfigMaps shows AuditForbidden until a ClusterRole bound to
//   system:serviceaccounts:portal-system grants list/watch, then audits.
// - `portal dev` lists the rules that need attention and says so on its
//   status line.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { until } from '../support/until.ts';
import { kubectl, startDevFor } from './support.ts';

const rule = (name: string, enforcement: string, kind: string, validate: string, selector?: string): string => `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata:
  name: ${name}
spec:
  enforcement: ${enforcement}
  match:
    kinds: [{apiGroups: [""], kinds: [${kind}]}]
${selector ? `    objectSelector: {matchLabels: {test: ${selector}}}\n` : ''}  validate:
    cel:
      expressions:
        - expression: ${JSON.stringify(validate)}
`;

const SYNTAX_ERROR = "object.metadata.name == 'x' &&";
const POLICIES: Record<string, string> = {
  // Installed by portal dev before the webhook configuration: they get in although they never compile.
  'broken-warn.yaml': rule('broken-warn', 'Warn', 'Pod', SYNTAX_ERROR, 'broken-warn'),
  'broken-deny.yaml': rule('broken-deny', 'Deny', 'Pod', SYNTAX_ERROR, 'broken-deny'),
  // Compiles; fails at run time on every Pod without priorityClassName ("no such key").
  'audit-missing-key.yaml': rule('audit-missing-key', 'Audit', 'Pod', "object.spec.priorityClassName == 'high'", 'audit'),
  // The chart's webhook sends no ConfigMaps, and its RBAC grants no cluster-wide read of them.
  'cm-warn.yaml': rule('cm-warn', 'Warn', 'ConfigMap', "has(object.data)"),
  'cm-audit.yaml': rule('cm-audit', 'Audit', 'ConfigMap', "object.metadata.name != 'forbidden-name'"),
};

const pod = (name: string, label: string): string => `apiVersion: v1
kind: Pod
metadata: {name: ${name}, labels: {test: ${label}}}
spec:
  containers: [{name: app, image: nginx:1.27}]
`;

interface Condition { type: string; status: string; reason: string; message: string }

async function conditions(kubeconfig: string, name: string): Promise<Condition[]> {
  const r = await kubectl(kubeconfig, ['get', 'pcrule', name, '-o', 'json']);
  if (r.code !== 0) return [];
  return ((JSON.parse(r.stdout) as { status?: { conditions?: Condition[] } }).status?.conditions ?? []);
}

async function condition(kubeconfig: string, name: string, type: string): Promise<Condition | undefined> {
  return (await conditions(kubeconfig, name)).find((c) => c.type === type);
}

void test('issue 15 with real kubectl: refused at apply, errors follow enforcement, problems visible, coverage', { timeout: 300_000 }, async (t) => {
  const dev = await startDevFor(t, {
    name: 'rule-lifecycle',
    replicas: 2,
    policies: POLICIES,
    flags: ['--report-granularity', 'resource', '--report-flush', '1s'],
    readyMs: 60_000,
  });
  const kc = dev.state.kubeconfig;

  // 1. A broken Warn rule is refused at apply, dry run included, in the API server's words for a VAP.
  const broken = rule('typo', 'Warn', 'Pod', SYNTAX_ERROR);
  for (const extra of [['--dry-run=server'], []]) {
    const r = await kubectl(kc, ['apply', ...extra, '-f', '-'], broken);
    assert.equal(r.code, 1, r.stdout);
    assert.match(r.stderr, /admission webhook "validate-kinds\.portal\.dev" denied the request: PortalClusterRule "typo" is invalid: spec\.validate\.cel\.expressions\[0\]\.expression: compilation failed: line 1, column \d+: /);
  }
  assert.equal((await kubectl(kc, ['get', 'pcrule', 'typo'])).code, 1, 'not created');
  // The same rule, fixed, is accepted.
  assert.equal((await kubectl(kc, ['apply', '-f', '-'], rule('typo', 'Warn', 'Pod', 'true', 'never'))).code, 0);

  // 2. The broken rules that got in (before the webhook existed): Warn admits with a warning, Deny denies.
  const warned = await kubectl(kc, ['apply', '-f', '-'], pod('warned', 'broken-warn'));
  assert.equal(warned.code, 0, warned.stderr);
  assert.match(warned.stderr, /Warning: rule broken-warn could not be evaluated: it has never compiled/);
  const denied = await kubectl(kc, ['apply', '-f', '-'], pod('denied', 'broken-deny'));
  assert.equal(denied.code, 1);
  assert.match(denied.stderr, /admission webhook "validate\.portal\.dev" denied the request: rule broken-deny could not be evaluated: it has never compiled/);
  for (const name of ['broken-warn', 'broken-deny']) {
    const c = await until(`Ready=False on ${name}`, 30_000, async () => {
      const ready = await condition(kc, name, 'Ready');
      return ready?.status === 'False' ? ready : undefined;
    });
    assert.equal(c.reason, 'CompileError');
    assert.match(c.message, /compilation failed: line 1, column \d+/);
  }

  // 3. An Audit rule's runtime error: admitted silently, `error` in its report, an Event on the rule.
  const audited = await kubectl(kc, ['apply', '-f', '-'], pod('audited', 'audit'));
  assert.equal(audited.code, 0, audited.stderr);
  assert.doesNotMatch(audited.stderr, /Warning/);
  const result = await until('the report of the audited Pod with an error result', 60_000, async () => {
    const r = await kubectl(kc, ['get', 'reports.openreports.io', '-n', 'default', '-o', 'json']);
    if (r.code !== 0) return undefined;
    const items = (JSON.parse(r.stdout) as { items: { scope?: { name?: string }; results?: { policy: string; result: string; message?: string }[] }[] }).items;
    return items.find((i) => i.scope?.name === 'audited')?.results?.find((x) => x.policy === 'audit-missing-key' && x.result === 'error');
  });
  assert.match(result.message ?? '', /priorityClassName/);
  const event = await until('a Warning Event on audit-missing-key', 60_000, async () => {
    const r = await kubectl(kc, ['get', 'events', '-n', 'default', '--field-selector', 'involvedObject.name=audit-missing-key', '-o', 'json']);
    const items = r.code === 0 ? (JSON.parse(r.stdout) as { items: { type: string; reason: string; message: string; involvedObject: { kind: string } }[] }).items : [];
    return items.find((e) => e.reason === 'EvaluationError');
  });
  assert.equal(event.type, 'Warning');
  assert.equal(event.involvedObject.kind, 'PortalClusterRule');
  assert.match(event.message, /^PortalClusterRule audit-missing-key, spec\.validate\.cel\.expressions\[0\]\.expression: evaluation failed on Pod default\/audited .*priorityClassName/);
  const described = await kubectl(kc, ['describe', 'pcrule', 'audit-missing-key']);
  assert.match(described.stdout, /Warning\s+EvaluationError/);
  // The broken rules have their CompileError Event too.
  await until('a CompileError Event on broken-warn', 30_000, async () => {
    const r = await kubectl(kc, ['get', 'events', '-n', 'default', '--field-selector', 'involvedObject.name=broken-warn', '-o', 'jsonpath={.items[*].reason}']);
    return r.stdout.includes('CompileError');
  });

  // 4. Coverage: ConfigMaps are neither sent by the chart's webhook nor readable with its RBAC.
  const notSent = await until('cm-warn NotSentByWebhook', 60_000, async () => {
    const c = await condition(kc, 'cm-warn', 'Covered');
    return c?.reason === 'NotSentByWebhook' ? c : undefined;
  });
  assert.equal(notSent.status, 'False');
  assert.match(notSent.message, /does not send CREATE, UPDATE of configmaps to Portal.*webhook\.rules/);
  const forbidden = await until('cm-audit AuditForbidden', 60_000, async () => {
    const c = await condition(kc, 'cm-audit', 'Covered');
    return c?.reason === 'AuditForbidden' ? c : undefined;
  });
  assert.match(forbidden.message, /may not list and watch configmaps/);
  const table = await kubectl(kc, ['get', 'pcrule']);
  assert.match(table.stdout, /^NAME\s+ENFORCEMENT\s+READY\s+COVERAGE\s+VIOLATIONS\s+AGE$/m);
  assert.match(table.stdout, /^cm-warn\s+Warn\s+True\s+NotSentByWebhook\s/m);
  assert.match(table.stdout, /^cm-audit\s+Audit\s+True\s+AuditForbidden\s/m);
  assert.match(table.stdout, /^audit-missing-key\s+Audit\s+True\s+Covered\s/m);

  // portal dev listed them, and its status line does not read as "all is fine".
  await until('portal dev listing the rules that need attention', 30_000, () =>
    ['broken-deny is not Ready (CompileError)', 'broken-warn is not Ready (CompileError)', 'cm-warn is not covered (NotSentByWebhook)', 'cm-audit is not covered (AuditForbidden)'].every((s) => dev.output().includes(s)),
  );
  await until('the status line counting them', 30_000, () => /replicas ready .* · 4 rules need attention/.test(dev.output()));
  // From the start: the rules from --policies that do not compile are listed before any replica is up,
  // and no status line ever reads as "all is fine".
  assert.ok(dev.output().indexOf('broken-deny is not Ready') < dev.output().indexOf('replicas ready'), dev.output());
  for (const line of dev.output().split('\n').filter((l) => l.includes('replicas ready'))) assert.match(line, /rules? needs? attention$/, line);

  // RBAC granted the way an operator would: a ClusterRole bound to Portal's service accounts.
  const grant = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: portal-read-configmaps}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: portal-read-configmaps}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: portal-read-configmaps}
subjects: [{kind: Group, apiGroup: rbac.authorization.k8s.io, name: "system:serviceaccounts:portal-system"}]
`;
  assert.equal((await kubectl(kc, ['apply', '-f', '-'], grant)).code, 0);
  const cm = await kubectl(kc, ['create', 'configmap', 'settings', '-n', 'default', '--from-literal=a=b']);
  assert.equal(cm.code, 0, cm.stderr);
  // The informer retries with backoff (at most 30 s), then lists: covered, and the ConfigMap is audited.
  await until('cm-audit Covered', 90_000, async () => (await condition(kc, 'cm-audit', 'Covered'))?.reason === 'Covered');
  await until('the ConfigMap audited by cm-audit', 60_000, async () => {
    const r = await kubectl(kc, ['get', 'reports.openreports.io', '-n', 'default', '-o', 'json']);
    if (r.code !== 0) return undefined;
    const items = (JSON.parse(r.stdout) as { items: { scope?: { kind?: string; name?: string }; results?: { policy: string; result: string }[] }[] }).items;
    return items.find((i) => i.scope?.kind === 'ConfigMap' && i.scope.name === 'settings')?.results?.some((x) => x.policy === 'cm-audit' && x.result === 'pass');
  });
  // cm-warn stays NotSentByWebhook (the webhook configuration did not change); its audit works now.
  assert.equal((await condition(kc, 'cm-warn', 'Covered'))?.reason, 'NotSentByWebhook');
  await until('portal dev saying what changed', 30_000, () => /· 3 rules need attention/.test(dev.output()));

  assert.equal(await dev.stop(), 0, dev.output());
});
