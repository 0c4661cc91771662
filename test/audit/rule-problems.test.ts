/**
 * Problems of Portal's own rules (issue 15 items 1 and 3), against the
 * embedded API server: every `error` verdict is counted in
 * portal_rule_evaluation_errors_total{rule,path} (admission and audit);
 * a runtime error becomes one Warning Event on the rule per generation, with
 * the failing field and the object that triggered it, in the rule's
 * namespace (a PortalRule) or in "default" (a PortalClusterRule: the API
 * server requires it there); a generation that does not compile becomes a
 * CompileError Event with line and column; a deadline is counted, not
 * reported as the rule's defect.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { ProblemEvents } from '../../src/audit/problem-events.ts';
import { RuleProblems } from '../../src/audit/rule-problems.ts';
import { FencedWriter } from '../../src/kube/fenced-writer.ts';
import { Term } from '../../src/leader/term.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { decideAdmission, RuleSet, type AdmissionDecision, type EvaluationInput, type PortalRuleObject, type RuleVerdict } from '../../src/policy/index.ts';
import type { KubeObject } from '../../src/policy/types.ts';
import { APP_NS, clusterWithCrds, pod, startReplica, until } from './support/controller-harness.ts';

interface Event {
  metadata: { name: string; namespace: string };
  involvedObject: { apiVersion?: string; kind?: string; name?: string; namespace?: string; uid?: string };
  reason?: string;
  message?: string;
  type?: string;
}

/** Reads `priorityClassName`, which the test Pods do not have: a runtime error ("no such key") on every Pod. */
function missingKeyRule(kind: 'PortalRule' | 'PortalClusterRule', name: string, enforcement = 'Warn'): Record<string, unknown> {
  return {
    apiVersion: 'portal.dev/v1alpha1',
    kind,
    metadata: { name, ...(kind === 'PortalRule' ? { namespace: APP_NS } : {}) },
    spec: {
      enforcement,
      match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] },
      validate: { cel: { expressions: [{ expression: "object.spec.priorityClassName == 'high'" }] } },
    },
  };
}

function errorsOf(text: string, rule: string, path: string): number {
  const m = new RegExp(`^portal_rule_evaluation_errors_total\\{rule="${rule.replace('/', '\\/')}",path="${path}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/** The engine's admission decision as the evaluation worker makes it (policy/review/answer.ts): decideAdmission with the time budget, error verdicts to `onError`. */
function admissionDecider(rules: RuleSet, opts: { evaluationTimeoutMs: number; onRuleError: (v: RuleVerdict, input: EvaluationInput) => void }): (input: EvaluationInput) => AdmissionDecision {
  const now = (): number => performance.now();
  const ms = opts.evaluationTimeoutMs;
  return (input) => decideAdmission(rules, input, { deadline: now() + ms, now, ms }, (v) => opts.onRuleError(v, input));
}

test('a runtime error: counted on admission and audit paths, one Warning Event per rule and generation with the field and the object', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const auth = { authorization: `Bearer ${api.adminToken}` };
  const events = async (namespace: string): Promise<Event[]> =>
    ((await (await fetch(`${api.url}/api/v1/namespaces/${namespace}/events`, { headers: auth })).json()) as { items: Event[] }).items.filter((e) => e.involvedObject.kind?.startsWith('Portal'));
  await admin.apply(missingKeyRule('PortalClusterRule', 'cluster-missing-key'));
  await admin.apply(missingKeyRule('PortalRule', 'ns-missing-key'));
  await admin.request('POST', `/api/v1/namespaces/${APP_NS}/pods`, pod('web', false));

  const registry = new Registry();
  const writerClient = { kubeConfig: (await import('../../src/kube/client.ts')).createKubeClient({ kubeconfigYaml: api.kubeConfig('portal'), qps: 50, burst: 100, userAgent: 'test' }).kubeConfig };
  const writer = new FencedWriter({ kubeConfig: writerClient.kubeConfig, userAgent: 'test' });
  t.after(() => writer.close());
  const problemEvents = new ProblemEvents({ writer, logger: silentLogger(), identity: 'portal-0_test' });
  const holder: { ruleObject?: (display: string) => KubeObject | undefined } = {};
  const problems = new RuleProblems({ registry, events: problemEvents, ruleObject: (d) => holder.ruleObject?.(d) });
  const replica = await startReplica(t, api, 'replica-a', {}, { onRuleError: (v, o) => problems.verdictError('audit', v, o), registry });
  holder.ruleObject = (display) => {
    const slash = display.indexOf('/');
    return slash >= 0 ? replica.source.rules.namespacedRules.get(display.slice(slash + 1), display.slice(0, slash)) : replica.source.rules.clusterRules.get(display);
  };
  const controller = new AbortController();
  const written = problemEvents.start(controller.signal, new Term({ leaseUid: 'l', transitions: 1 }, performance.now(), Infinity));
  t.after(() => {
    controller.abort();
    return written;
  });

  // The audit evaluated the Pod against both rules: one Event each, in the right namespace.
  const [clusterEvent] = await until('the Event on the PortalClusterRule (in default)', 15_000, async () => {
    const es = await events('default');
    return es.length > 0 ? es : undefined;
  });
  const [nsEvent] = await until('the Event on the PortalRule (in its namespace)', 15_000, async () => {
    const es = await events(APP_NS);
    return es.length > 0 ? es : undefined;
  });
  assert.ok(clusterEvent && nsEvent);
  assert.equal(clusterEvent.type, 'Warning');
  assert.equal(clusterEvent.reason, 'EvaluationError');
  assert.deepEqual({ ...clusterEvent.involvedObject, uid: undefined }, { apiVersion: 'portal.dev/v1alpha1', kind: 'PortalClusterRule', name: 'cluster-missing-key', uid: undefined });
  assert.match(clusterEvent.message ?? '', /^PortalClusterRule cluster-missing-key, spec\.validate\.cel\.expressions\[0\]\.expression: evaluation failed on Pod apps\/web \(audit\): .*priorityClassName/);
  assert.equal(nsEvent.involvedObject.namespace, APP_NS);
  assert.equal(nsEvent.involvedObject.kind, 'PortalRule');
  assert.match(nsEvent.message ?? '', /^PortalRule apps\/ns-missing-key, spec\.validate\.cel\.expressions\[0\]\.expression: evaluation failed on Pod apps\/web/);

  // Admission: the same error, counted under path="admission"; a Warn rule admits with a warning.
  const decide = admissionDecider(replica.source.ruleSet, { evaluationTimeoutMs: 2000, onRuleError: (v, input) => problems.verdictError('admission', v, { kind: input.kind.kind, namespace: input.namespace, name: input.name, operation: input.operation }) });
  const podObject = pod('api', false) as unknown as KubeObject;
  const decision = await decide({ operation: 'CREATE', kind: { group: '', version: 'v1', kind: 'Pod' }, namespace: APP_NS, name: 'api', object: podObject, oldObject: null, namespaceLabels: {} });
  assert.equal(decision.allowed, true);
  assert.equal(decision.warnings.length, 2);
  const text = await registry.metrics();
  assert.equal(errorsOf(text, 'cluster-missing-key', 'admission'), 1);
  assert.equal(errorsOf(text, 'apps/ns-missing-key', 'admission'), 1);
  assert.ok(errorsOf(text, 'cluster-missing-key', 'audit') >= 1);

  // More evaluations of the same problem: counted, no second Event.
  replica.controller.fullPass();
  await until('the pass done and the note settled', 10_000, () => replica.controller.idle() && problemEvents.stats()['pending'] === 0);
  assert.equal((await events('default')).length, 1);
  assert.equal((await events(APP_NS)).length, 1);

  // A new generation that still fails is reported again.
  const edited = missingKeyRule('PortalClusterRule', 'cluster-missing-key');
  (edited['spec'] as Record<string, unknown>)['severity'] = 'high';
  await admin.apply(edited);
  await until('a second Event on the edited rule', 15_000, async () => (await events('default')).length === 2);
});

test('a generation that does not compile: a CompileError Event with line and column; a deadline is counted but is not the rule\'s defect', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  const auth = { authorization: `Bearer ${api.adminToken}` };
  const broken = { ...missingKeyRule('PortalClusterRule', 'broken-syntax'), spec: { enforcement: 'Warn', match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, validate: { cel: { expressions: [{ expression: "object.metadata.name == 'x' &&" }] } } } };
  await admin.apply(broken);
  const stored = (await admin.request('GET', '/apis/portal.dev/v1alpha1/portalclusterrules/broken-syntax')).body as PortalRuleObject;
  const writer = new FencedWriter({ kubeConfig: (await import('../../src/kube/client.ts')).createKubeClient({ kubeconfigYaml: api.kubeConfig('portal'), qps: 50, burst: 100, userAgent: 'test' }).kubeConfig, userAgent: 'test' });
  t.after(() => writer.close());
  const registry = new Registry();
  const problemEvents = new ProblemEvents({ writer, logger: silentLogger(), identity: 'portal-0_test' });
  const problems = new RuleProblems({ registry, events: problemEvents, ruleObject: () => stored as unknown as KubeObject });
  const rules = new RuleSet();
  problems.ruleState(stored, rules.upsert(stored));
  const controller = new AbortController();
  const written = problemEvents.start(controller.signal, new Term({ leaseUid: 'l', transitions: 1 }, performance.now(), Infinity));
  t.after(() => {
    controller.abort();
    return written;
  });
  const [event] = await until('the CompileError Event', 10_000, async () => {
    const es = ((await (await fetch(`${api.url}/api/v1/namespaces/default/events`, { headers: auth })).json()) as { items: Event[] }).items;
    return es.length > 0 ? es : undefined;
  });
  assert.equal(event?.reason, 'CompileError');
  assert.match(event?.message ?? '', /^PortalClusterRule broken-syntax generation 1: it has never compiled: spec\.validate\.cel\.expressions\[0\]\.expression: compilation failed: line 1, column \d+: /);

  // Its error verdicts at admission are counted; their Event is the compile error's (no second one).
  const decide = admissionDecider(rules, { evaluationTimeoutMs: 2000, onRuleError: (v, input) => problems.verdictError('admission', v, { kind: input.kind.kind, namespace: input.namespace, name: input.name, operation: input.operation }) });
  const d = await decide({ operation: 'CREATE', kind: { group: '', version: 'v1', kind: 'Pod' }, namespace: APP_NS, name: 'p', object: pod('p', false) as unknown as KubeObject, oldObject: null, namespaceLabels: {} });
  assert.equal(d.allowed, true, 'a Warn rule that never compiled admits with a warning');
  assert.match(d.warnings[0] ?? '', /rule broken-syntax could not be evaluated/);
  // A deadline: every compiled rule past it errs; counted, not an Event (not the rule's defect).
  rules.upsert({ ...missingKeyRule('PortalClusterRule', 'in-time'), metadata: { name: 'in-time', uid: 'u-in-time', generation: 1 } } as unknown as PortalRuleObject);
  const late = admissionDecider(rules, { evaluationTimeoutMs: -1, onRuleError: (v, input) => problems.verdictError('admission', v, { kind: input.kind.kind, namespace: input.namespace, name: input.name }) });
  await late({ operation: 'CREATE', kind: { group: '', version: 'v1', kind: 'Pod' }, namespace: APP_NS, name: 'p', object: pod('p', false) as unknown as KubeObject, oldObject: null, namespaceLabels: {} });
  const text = await registry.metrics();
  assert.equal(errorsOf(text, 'broken-syntax', 'admission'), 2);
  assert.equal(errorsOf(text, 'in-time', 'admission'), 1);
  await until('the writer settled', 5000, () => problemEvents.stats()['pending'] === 0);
  assert.equal(problemEvents.written, 1);
});
