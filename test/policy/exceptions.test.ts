// PortalException (issue 18): validation, the one coverage judgement
// (exceptionCovers) with its scope rules, the RuleSet's index, and how
// evaluate()/decideAdmission() report an exemption.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  decideAdmission,
  evaluate,
  exceptionCovers,
  exemptVerdicts,
  parseRfc3339,
  RuleSet,
  validateExceptionShape,
  type CompiledException,
  type EvaluationInput,
  type PortalExceptionObject,
  type RuleVerdict,
} from '../../src/policy/index.ts';
import { compileException, unresolvedRules } from '../../src/policy/exceptions.ts';
import { exceptionConditions } from '../../src/policy/exception-conditions.ts';
import { clusterRule, exception, input, namespacedRule, pod } from './support.ts';

const NOW = Date.parse('2026-06-01T00:00:00Z');
const DAY = 86_400_000;

function compiled(ex: PortalExceptionObject, privileged: string[] = ['portal-system']): CompiledException {
  const v = validateExceptionShape(ex);
  assert.ok(v.ok, JSON.stringify(v));
  return compileException(ex, new Set(privileged));
}

const ctx = { now: NOW, maxLifetimeMs: undefined };
const rule = { kind: 'rule' as const, display: 'no-priv' };
const privilegedPod = (o: { namespace?: string; name?: string; labels?: Record<string, string> } = {}): EvaluationInput =>
  input(pod({ privileged: true, namespace: o.namespace ?? 'monitoring', name: o.name ?? 'node-agent-x', ...(o.labels ? { labels: o.labels } : {}) }), { now: NOW });

void describe('PortalException validation', () => {
  void it('accepts a complete exception', () => {
    const v = validateExceptionShape(
      exception('monitoring', 'agent', {
        match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: ['node-agent-*'], objectSelector: { matchLabels: { app: 'agent' } } },
        matchConditions: [{ name: 'agent-only', expression: "object.spec.containers.all(c, c.name == 'agent')" }],
        expiresAt: '2026-12-31T00:00:00Z',
      }),
    );
    assert.deepEqual(v.ok, true);
  });

  void it('reports every problem at once, each naming its field', () => {
    const bad = exception('monitoring', 'agent', {
      rules: ['Not A Rule'],
      match: { kinds: [{ apiGroups: ['*', 'apps'], kinds: ['Pod'] }], names: ['a*b'], namespaces: ['bad glob'] },
      expiresAt: '2026-02-30T00:00:00Z',
      reason: '   ',
      matchConditions: [
        { name: 'x', expression: 'object.spec.containers.all(c, ' },
        { name: 'x', expression: 'true' },
      ],
    });
    const v = validateExceptionShape(bad);
    assert.equal(v.ok, false);
    const problems = (v as { problems: string[] }).problems.join('\n');
    for (const field of ['spec.rules[0]', 'spec.match.names[0]', 'spec.match.namespaces[0]', 'spec.match.kinds[0].apiGroups', 'spec.reason', 'spec.expiresAt', 'spec.matchConditions[1].name']) {
      assert.ok(problems.includes(field), `${field} in:\n${problems}`);
    }
  });

  void it('reports the CEL compile error with its position', () => {
    const v = validateExceptionShape(exception('monitoring', 'agent', { matchConditions: [{ name: 'x', expression: 'object.spec.containers.all(c, ' }] }));
    assert.equal(v.ok, false);
    assert.match((v as { problems: string[] }).problems.join('\n'), /spec\.matchConditions\[0\]\.expression \(line 1, column \d+\)/);
  });

  void it('needs a reason, rules, a match with kinds, a namespace; refuses unknown fields', () => {
    const v = validateExceptionShape({ apiVersion: 'portal.dev/v1alpha1', kind: 'PortalException', metadata: { name: 'x' }, spec: { rulez: [] } });
    assert.equal(v.ok, false);
    const p = (v as { problems: string[] }).problems.join('\n');
    assert.match(p, /metadata\.namespace is required/);
    assert.match(p, /spec\.rulez: unknown field/);
    assert.match(p, /reason/);
    assert.match(p, /rules/);
    assert.match(p, /match/);
  });

  void it('--max-exception-lifetime refuses one that never expires or lives too long, measured from its creation', () => {
    const max = 30 * DAY;
    const never = validateExceptionShape(exception('monitoring', 'a'), { maxLifetimeMs: max, now: NOW });
    assert.equal(never.ok, false);
    assert.match((never as { problems: string[] }).problems[0] ?? '', /never expires.*720h/);
    const tooLong = validateExceptionShape(exception('monitoring', 'a', { expiresAt: new Date(NOW + 31 * DAY).toISOString() }), { maxLifetimeMs: max, now: NOW });
    assert.equal(tooLong.ok, false);
    assert.match((tooLong as { problems: string[] }).problems[0] ?? '', /more than --max-exception-lifetime \(720h\)/);
    assert.equal(validateExceptionShape(exception('monitoring', 'a', { expiresAt: new Date(NOW + 29 * DAY).toISOString() }), { maxLifetimeMs: max, now: NOW }).ok, true);
    // Created 10 days ago, expiring in 25 days: 35 days of lifetime.
    const old = exception('monitoring', 'a', { expiresAt: new Date(NOW + 25 * DAY).toISOString() }, { creationTimestamp: new Date(NOW - 10 * DAY).toISOString() });
    assert.equal(validateExceptionShape(old, { maxLifetimeMs: max, now: NOW }).ok, false);
  });

  void it('parses RFC 3339 as Go does: offsets, fractions; no rolled-over dates', () => {
    assert.equal(parseRfc3339('2026-12-31T00:00:00Z'), Date.parse('2026-12-31T00:00:00Z'));
    assert.equal(parseRfc3339('2026-12-31T02:00:00.5+02:00'), Date.parse('2026-12-31T00:00:00.500Z'));
    assert.equal(parseRfc3339('2026-02-29T00:00:00Z'), undefined);
    assert.equal(parseRfc3339('2028-02-29T00:00:00Z'), Date.parse('2028-02-29T00:00:00Z'));
    for (const bad of ['2026-12-31', '2026-12-31 00:00:00Z', '2026-13-01T00:00:00Z', '2026-12-31T24:00:00Z', 'tomorrow', '2026-12-31T00:00:00']) assert.equal(parseRfc3339(bad), undefined, bad);
  });
});

void describe('exceptionCovers: the one judgement', () => {
  void it('covers the named rule for a matching object in its own namespace', () => {
    assert.deepEqual(exceptionCovers(compiled(exception('monitoring', 'agent')), rule, privilegedPod(), undefined, ctx), { covers: true });
  });

  void it('an exception in another namespace, or for another rule, does not cover', () => {
    const other = exceptionCovers(compiled(exception('team-b', 'agent')), rule, privilegedPod(), undefined, ctx);
    assert.equal(other.covers, false);
    assert.match((other as { why: string }).why, /exempts only objects in team-b/);
    const wrongRule = exceptionCovers(compiled(exception('monitoring', 'agent', { rules: ['other-rule'] })), rule, privilegedPod(), undefined, ctx);
    assert.deepEqual(wrongRule, { covers: false, why: 'it does not name this rule' });
  });

  void it('ends at expiresAt (the injected now)', () => {
    const ex = compiled(exception('monitoring', 'agent', { expiresAt: new Date(NOW + 1000).toISOString() }));
    assert.equal(exceptionCovers(ex, rule, privilegedPod(), undefined, { ...ctx, now: NOW + 999 }).covers, true);
    const after = exceptionCovers(ex, rule, privilegedPod(), undefined, { ...ctx, now: NOW + 1000 });
    assert.equal(after.covers, false);
    assert.match((after as { why: string }).why, /expired at/);
  });

  void it('cluster-scoped objects and other namespaces only from --exception-namespaces', () => {
    const ns = input({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'monitoring' } }, { now: NOW });
    const anyKind = { match: { kinds: [{ apiGroups: ['*'], kinds: ['*'] }] } };
    assert.equal(exceptionCovers(compiled(exception('monitoring', 'x', anyKind)), rule, ns, undefined, ctx).covers, false);
    assert.equal(exceptionCovers(compiled(exception('portal-system', 'x', anyKind)), rule, ns, undefined, ctx).covers, true);
    assert.equal(exceptionCovers(compiled(exception('portal-system', 'x')), rule, privilegedPod({ namespace: 'team-a' }), undefined, ctx).covers, true);
    // Narrowed by its own match.namespaces; namespace criteria never match a cluster-scoped object.
    const narrowed = compiled(exception('portal-system', 'x', { match: { kinds: [{ apiGroups: ['*'], kinds: ['*'] }], namespaces: ['team-*'] } }));
    assert.equal(exceptionCovers(narrowed, rule, privilegedPod({ namespace: 'team-a' }), undefined, ctx).covers, true);
    assert.equal(exceptionCovers(narrowed, rule, privilegedPod({ namespace: 'prod' }), undefined, ctx).covers, false);
    assert.equal(exceptionCovers(narrowed, rule, ns, undefined, ctx).covers, false);
    // The privileged set is the RuleSet's option, not the namespace's name.
    assert.equal(exceptionCovers(compiled(exception('portal-system', 'x'), ['ops']), rule, privilegedPod({ namespace: 'team-a' }), undefined, ctx).covers, false);
  });

  void it('names with a trailing * glob; a generateName CREATE matches on its prefix', () => {
    const ex = compiled(exception('monitoring', 'agent', { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], names: ['node-agent-*', 'exact'] } }));
    assert.equal(exceptionCovers(ex, rule, privilegedPod({ name: 'node-agent-7' }), undefined, ctx).covers, true);
    assert.equal(exceptionCovers(ex, rule, privilegedPod({ name: 'exact' }), undefined, ctx).covers, true);
    assert.equal(exceptionCovers(ex, rule, privilegedPod({ name: 'exactly' }), undefined, ctx).covers, false);
    const generated = pod({ privileged: true, namespace: 'monitoring', name: '' });
    (generated.metadata as Record<string, unknown>)['generateName'] = 'node-agent-';
    assert.equal(exceptionCovers(ex, rule, input(generated, { name: '', now: NOW }), undefined, ctx).covers, true);
    (generated.metadata as Record<string, unknown>)['generateName'] = 'exact';
    assert.equal(exceptionCovers(ex, rule, input(generated, { name: '', now: NOW }), undefined, ctx).covers, false, 'an exact name never matches a generateName');
  });

  void it('matchConditions: true covers, false or an error does not (fail closed)', () => {
    const mk = (expression: string) => compiled(exception('monitoring', 'a', { matchConditions: [{ name: 'c', expression }] }));
    assert.equal(exceptionCovers(mk("object.spec.containers.all(c, c.name == 'app')"), rule, privilegedPod(), undefined, ctx).covers, true);
    const f = exceptionCovers(mk("object.spec.containers.all(c, c.name == 'agent')"), rule, privilegedPod(), undefined, ctx);
    assert.deepEqual(f, { covers: false, why: 'matchCondition "c" is false' });
    const e = exceptionCovers(mk('object.spec.nope.size() == 0'), rule, privilegedPod(), undefined, ctx);
    assert.equal(e.covers, false);
    assert.match((e as { why: string }).why, /failed/);
    // Past the evaluation deadline no matchCondition starts.
    const late = exceptionCovers(mk('true'), rule, privilegedPod(), undefined, { ...ctx, deadline: { deadline: 0, now: () => 1 } });
    assert.equal(late.covers, false);
  });

  void it('selectors: unknown namespace labels do not exempt; objectSelector reads object or oldObject', () => {
    const ex = compiled(exception('monitoring', 'a', { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], namespaceSelector: { matchLabels: { tier: 'infra' } }, objectSelector: { matchLabels: { app: 'agent' } } } }));
    const p = privilegedPod({ labels: { app: 'agent' } });
    assert.equal(exceptionCovers(ex, rule, { ...p, namespaceLabels: { tier: 'infra' } }, undefined, ctx).covers, true);
    assert.equal(exceptionCovers(ex, rule, { ...p, namespaceLabels: undefined }, undefined, ctx).covers, false);
    assert.equal(exceptionCovers(ex, rule, { ...privilegedPod(), namespaceLabels: { tier: 'infra' } }, undefined, ctx).covers, false);
  });

  void it('subresources as in a rule match: named, or implied (pods/ephemeralcontainers)', () => {
    const ex = compiled(exception('monitoring', 'a'));
    assert.equal(exceptionCovers(ex, rule, { ...privilegedPod(), subResource: 'ephemeralcontainers' }, undefined, ctx).covers, true);
    assert.equal(exceptionCovers(ex, rule, { ...privilegedPod(), subResource: 'status' }, undefined, ctx).covers, false);
  });

  void it('operations default to all; match.operations narrows admission, never the audit', () => {
    const ex = compiled(exception('monitoring', 'a', { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], operations: ['CREATE'] } }));
    assert.equal(exceptionCovers(ex, rule, { ...privilegedPod(), operation: 'UPDATE' }, undefined, ctx).covers, false);
    assert.equal(exceptionCovers(ex, rule, { ...privilegedPod(), operation: 'AUDIT' }, undefined, ctx).covers, true);
    assert.equal(exceptionCovers(compiled(exception('monitoring', 'a')), rule, { ...privilegedPod(), operation: 'DELETE' }, undefined, ctx).covers, true);
  });

  void it('rule names: NAME, NAMESPACE/NAME for a PortalRule, POLICY and POLICY/BINDING for a VAP; the two spaces never mix', () => {
    const ns = (display: string) => ({ kind: 'rule' as const, display });
    const vap = (policy: string, binding: string) => ({ kind: 'vap' as const, policy, binding });
    const bare = compiled(exception('monitoring', 'a', { rules: ['r'] }));
    assert.equal(exceptionCovers(bare, ns('r'), privilegedPod(), undefined, ctx).covers, true, 'cluster rule r');
    assert.equal(exceptionCovers(bare, ns('monitoring/r'), privilegedPod(), undefined, ctx).covers, true, 'PortalRule r in its namespace');
    assert.equal(exceptionCovers(bare, vap('r', 'any-binding'), privilegedPod(), undefined, ctx).covers, true, 'VAP r, every binding');
    const slash = compiled(exception('monitoring', 'a', { rules: ['monitoring/r'] }));
    assert.equal(exceptionCovers(slash, ns('monitoring/r'), privilegedPod(), undefined, ctx).covers, true);
    assert.equal(exceptionCovers(slash, ns('r'), privilegedPod(), undefined, ctx).covers, false, 'not the cluster rule r');
    assert.equal(exceptionCovers(slash, vap('monitoring', 'r'), privilegedPod(), undefined, ctx).covers, true, 'VAP monitoring, binding r');
    assert.equal(exceptionCovers(slash, vap('monitoring', 'other'), privilegedPod(), undefined, ctx).covers, false);
  });

  void it('a Pod exception covers the pod template of a workload, unless podTemplates: false', () => {
    const deploy = input(
      { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'node-agent-d', namespace: 'monitoring' }, spec: { template: { spec: { containers: [{ name: 'app', image: 'x', securityContext: { privileged: true } }] } } } },
      { now: NOW },
    );
    const tpl = { path: ['spec', 'template'], prefix: 'spec.template' };
    assert.equal(exceptionCovers(compiled(exception('monitoring', 'a')), rule, deploy, tpl, ctx).covers, true);
    assert.equal(exceptionCovers(compiled(exception('monitoring', 'a', { podTemplates: false })), rule, deploy, tpl, ctx).covers, false);
    assert.equal(exceptionCovers(compiled(exception('monitoring', 'a')), rule, deploy, undefined, ctx).covers, false, 'a direct check of a Deployment needs Deployment in kinds');
  });
});

void describe('exceptions in the RuleSet and the evaluator', () => {
  void it('an exempted Deny rule is skip naming the exception; admission allows and records it; other rules still deny', () => {
    const rs = new RuleSet({ exceptionNamespaces: ['portal-system'] });
    rs.upsert(clusterRule('no-priv'));
    rs.upsert(clusterRule('also-no-priv'));
    const p = privilegedPod();
    assert.equal(decideAdmission(rs, p).allowed, false);
    const revision = rs.revision;
    rs.upsertException(exception('monitoring', 'agent'));
    assert.ok(rs.revision > revision);
    const verdicts = evaluate(rs, p);
    const exempted = verdicts.find((v) => v.rule === 'no-priv') as RuleVerdict;
    assert.equal(exempted.result, 'skip');
    assert.equal(exempted.exception, 'monitoring/agent');
    assert.match(exempted.message, /exempted by PortalException monitoring\/agent \(node agent; ticket OPS-123\)/);
    const d = decideAdmission(rs, p);
    assert.equal(d.allowed, false, 'also-no-priv still denies');
    assert.deepEqual(d.exempted, [{ rule: 'no-priv', exception: 'monitoring/agent' }]);
    rs.upsertException(exception('monitoring', 'agent2', { rules: ['also-no-priv'] }));
    assert.deepEqual(decideAdmission(rs, p), { allowed: true, warnings: [], exempted: [{ rule: 'also-no-priv', exception: 'monitoring/agent2' }, { rule: 'no-priv', exception: 'monitoring/agent' }] });
  });

  void it('an exempted Warn rule gives no warning', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv', { enforcement: 'Warn' }));
    assert.equal(decideAdmission(rs, privilegedPod()).warnings.length, 1);
    rs.upsertException(exception('monitoring', 'agent'));
    assert.deepEqual(decideAdmission(rs, privilegedPod()), { allowed: true, warnings: [], exempted: [{ rule: 'no-priv', exception: 'monitoring/agent' }] });
  });

  void it('a PortalRule is exempted by its bare name in its own namespace', () => {
    const rs = new RuleSet();
    rs.upsert(namespacedRule('monitoring', 'no-priv'));
    rs.upsertException(exception('monitoring', 'agent'));
    assert.equal(evaluate(rs, privilegedPod())[0]?.exception, 'monitoring/agent');
  });

  void it('same object again: no new revision; removeException and an invalid edit end the exemption', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    rs.upsertException(exception('monitoring', 'agent'));
    const r = rs.revision;
    rs.upsertException(exception('monitoring', 'agent'));
    assert.equal(rs.revision, r);
    const state = rs.upsertException(exception('monitoring', 'agent', { reason: '' }, { generation: 2 }));
    assert.equal(state.valid, false);
    assert.match(state.message, /spec\.reason/);
    assert.equal(decideAdmission(rs, privilegedPod()).allowed, false, 'an invalid edit keeps no last good version');
    rs.upsertException(exception('monitoring', 'agent', {}, { generation: 3 }));
    assert.equal(decideAdmission(rs, privilegedPod()).allowed, true);
    assert.equal(rs.removeException('PortalException/monitoring/agent'), true);
    assert.equal(decideAdmission(rs, privilegedPod()).allowed, false);
    assert.equal(rs.removeException('PortalException/monitoring/agent'), false);
  });

  void it('expiry uses EvaluationInput.now; nextExpiry says when the next exemption ends', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    rs.upsertException(exception('monitoring', 'a', { expiresAt: new Date(NOW + 5000).toISOString() }));
    rs.upsertException(exception('monitoring', 'b', { rules: ['x'], expiresAt: new Date(NOW + 3000).toISOString() }));
    assert.equal(rs.nextExpiry(NOW), NOW + 3000);
    assert.equal(rs.nextExpiry(NOW + 3000), NOW + 5000);
    assert.equal(rs.nextExpiry(NOW + 5000), undefined);
    assert.equal(decideAdmission(rs, { ...privilegedPod(), now: NOW + 4999 }).allowed, true);
    assert.equal(decideAdmission(rs, { ...privilegedPod(), now: NOW + 5000 }).allowed, false);
  });

  void it('--max-exception-lifetime (RuleSet option) refuses at judgement time too', () => {
    const rs = new RuleSet({ maxLifetimeMs: DAY });
    rs.upsert(clusterRule('no-priv'));
    rs.upsertException(exception('monitoring', 'a'));
    assert.equal(decideAdmission(rs, privilegedPod()).allowed, false);
    rs.upsertException(exception('monitoring', 'a', { expiresAt: new Date(NOW + DAY / 2).toISOString() }, { creationTimestamp: new Date(NOW).toISOString() }));
    assert.equal(decideAdmission(rs, privilegedPod()).allowed, true);
  });

  void it('exemptVerdicts applies exceptions to VAP verdicts (matched ones only) and leaves Portal rules alone', () => {
    const rs = new RuleSet();
    rs.upsertException(exception('monitoring', 'a', { rules: ['vap-policy/binding-1'] }));
    const base = { ruleKind: 'ValidatingAdmissionPolicy' as const, enforcement: 'Deny' as const, severity: 'medium' as const, category: '', message: 'm', violations: [] };
    const out = exemptVerdicts(rs, privilegedPod(), [
      { ...base, rule: 'vap-policy', reportRule: 'binding-1', result: 'fail' },
      { ...base, rule: 'vap-policy', reportRule: 'binding-2', result: 'fail' },
      { ...base, rule: 'vap-policy', reportRule: 'binding-1', result: 'skip' },
    ]);
    assert.deepEqual(out.map((v) => [v.reportRule, v.result, v.exception]), [
      ['binding-1', 'skip', 'monitoring/a'],
      ['binding-2', 'fail', undefined],
      ['binding-1', 'skip', undefined],
    ]);
  });

  void it('the index: exceptions of other namespaces are not consulted; a namespace without any costs one lookup', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    for (let i = 0; i < 500; i++) rs.upsertException(exception(`team-${i}`, 'e'));
    for (let i = 0; i < 500; i++) rs.upsertException(exception('monitoring', `e${i}`, { rules: [`other-${i}`] }));
    assert.equal(rs.exceptionsIn('team-7').length, 1);
    assert.equal(rs.exceptionsIn('monitoring').length, 500);
    assert.equal(rs.mayExempt('shop'), false);
    assert.equal(rs.mayExempt('team-7'), true);
    rs.upsertException(exception('portal-system', 'p'));
    assert.equal(rs.mayExempt('shop'), false, 'portal-system is not privileged in this RuleSet');
    const privileged = new RuleSet({ exceptionNamespaces: ['portal-system'] });
    privileged.upsertException(exception('portal-system', 'p'));
    assert.equal(privileged.mayExempt('shop'), true);
    assert.equal(privileged.mayExempt(''), true, 'a privileged exception may exempt cluster-scoped objects');
    assert.equal(decideAdmission(rs, privilegedPod()).allowed, false);
    assert.equal(decideAdmission(rs, privilegedPod({ namespace: 'team-7' })).allowed, true);
  });

  void it('status conditions: Ready (Active, Invalid, Expired, LifetimeExceeded) and Expired', () => {
    const s = { valid: true, message: '', expiresAt: NOW + 1000, createdAt: NOW - 1000 };
    assert.deepEqual(exceptionConditions(s, NOW, undefined).map((c) => [c.type, c.status, c.reason]), [['Ready', 'True', 'Active'], ['Expired', 'False', 'NotExpired']]);
    assert.deepEqual(exceptionConditions(s, NOW + 1000, undefined).map((c) => [c.type, c.status, c.reason]), [['Ready', 'False', 'Expired'], ['Expired', 'True', 'Expired']]);
    assert.deepEqual(exceptionConditions({ ...s, expiresAt: undefined }, NOW, 1000).map((c) => [c.type, c.status, c.reason]), [['Ready', 'False', 'LifetimeExceeded'], ['Expired', 'False', 'NoExpiry']]);
    assert.deepEqual(exceptionConditions({ ...s, valid: false, message: 'bad' }, NOW, undefined)[0], { type: 'Ready', status: 'False', reason: 'Invalid', message: 'bad' });
  });

  void it('status: RuleNotFound while no rule it names exists, Active (naming the missing ones) when some do (issue 33 item 5)', () => {
    const known = new Set(['rule:no-priv', 'rule:team-a/local', 'vap:pss', 'vap:pss/audit']);
    assert.deepEqual(unresolvedRules(['no-priv', 'local', 'pss', 'pss/audit', 'team-a/local'], 'team-a', known), []);
    assert.deepEqual(unresolvedRules(['local', 'typo', 'team-b/local', 'pss/other'], 'team-b', known), ['local', 'typo', 'team-b/local', 'pss/other']);
    const s = { valid: true, message: '', expiresAt: NOW + 1000, createdAt: NOW - 1000, rules: ['max-replicas-typo'] };
    const [ready] = exceptionConditions(s, NOW, undefined, ['max-replicas-typo']);
    assert.equal(ready!.status, 'False');
    assert.equal(ready!.reason, 'RuleNotFound');
    assert.match(ready!.message, /"max-replicas-typo"/);
    assert.equal(exceptionConditions(s, NOW, undefined, [])[0]!.reason, 'Active', 'the rule appeared');
    assert.equal(exceptionConditions(s, NOW, undefined, undefined)[0]!.reason, 'Active', 'rules not all known yet: no verdict on them');
    const partly = exceptionConditions({ ...s, rules: ['a', 'b'] }, NOW, undefined, ['b'])[0]!;
    assert.deepEqual([partly.status, partly.reason], ['True', 'Active']);
    assert.match(partly.message, /also names "b", which no rule has/);
    // Invalid, expired and over-long say so first.
    assert.equal(exceptionConditions({ ...s, valid: false, message: 'bad' }, NOW, undefined, ['max-replicas-typo'])[0]!.reason, 'Invalid');
    assert.equal(exceptionConditions(s, NOW + 1000, undefined, ['max-replicas-typo'])[0]!.reason, 'Expired');
    // A long list is cut: the message stays bounded whatever spec.rules holds.
    const many = Array.from({ length: 64 }, (_, i) => `r${i}-${'x'.repeat(200)}`);
    const bounded = exceptionConditions({ ...s, rules: many }, NOW, undefined, many)[0]!;
    assert.ok(bounded.message.length < 1000, `${bounded.message.length}`);
    assert.match(bounded.message, /and 61 more/);
  });

  void it('an exception outside --exception-namespaces naming other namespaces is refused at apply and held invalid (issue 33 item 5)', () => {
    const reach = { exceptionNamespaces: ['portal-system'] };
    const naming = (namespace: string, m: Record<string, unknown>) => exception(namespace, 'x', { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }], ...m } });
    const refused = validateExceptionShape(naming('team-a', { namespaces: ['team-a', 'default'] }), reach);
    assert.equal(refused.ok, false);
    assert.deepEqual(!refused.ok && refused.problems, [
      'spec.match.namespaces[1]: "default" is out of reach: an exception in namespace team-a exempts only objects in team-a (only exceptions in --exception-namespaces may name other namespaces); remove it',
    ]);
    const excluded = validateExceptionShape(naming('team-a', { excludedNamespaces: ['team-*'] }), reach);
    assert.match(!excluded.ok ? excluded.problems[0]! : '', /excludes team-a, the one namespace this exception may exempt in/);
    assert.equal(validateExceptionShape(naming('team-a', { namespaces: ['team-*'], excludedNamespaces: ['team-b'] }), reach).ok, true, 'a glob that covers its own namespace');
    assert.equal(validateExceptionShape(naming('portal-system', { namespaces: ['default'] }), reach).ok, true, 'a privileged exception may name any namespace');
    assert.equal(validateExceptionShape(naming('team-a', { namespaces: ['default'] })).ok, true, 'without the options (a file), only the shape');
    const rs = new RuleSet(reach);
    const state = rs.upsertException(naming('team-a', { namespaces: ['default'] }));
    assert.equal(state.valid, false);
    assert.match(state.message, /"default" is out of reach/);
    assert.equal(exceptionConditions(state, NOW, undefined)[0]!.reason, 'Invalid');
  });
});
