/**
 * Pod Security version pinning in the engine (issue 9, item 3): the
 * `minPodSecurityVersion` schema keyword, the rule-level
 * `spec.podSecurity.version`, and the namespace label
 * `pod-security.kubernetes.io/enforce-version`, read as Pod Security
 * Admission reads it (FACTS-pss §4).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  compileSchema,
  decide,
  decideAdmission,
  evaluate,
  parsePodSecurityVersion,
  RuleSet,
  validateRule,
  type EvaluationInput,
  type KubeObject,
  type PortalRuleObject,
} from '../../src/policy/index.ts';
import { clusterRule } from './support.ts';

const LABEL = 'pod-security.kubernetes.io/enforce-version';

/** hostPID is forbidden only from v1.30 on (a made-up control, to see the mechanism alone). */
const SCHEMA = {
  type: 'object',
  if: { minPodSecurityVersion: 'v1.30' },
  then: { properties: { spec: { properties: { hostPID: { const: false } } } } },
};

function versionedRule(version?: string, name = 'no-host-pid-130'): PortalRuleObject {
  return clusterRule(name, {
    ...(version !== undefined ? { podSecurity: { version } } : {}),
    validate: { message: 'hostPID is not allowed', schema: SCHEMA },
  });
}

const hostPidPod: KubeObject = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'team' }, spec: { hostPID: true, containers: [{ name: 'a', image: 'a' }] } };

function input(labels: Record<string, string> | undefined, object: KubeObject = hostPidPod): EvaluationInput {
  return { operation: 'CREATE', kind: { group: '', version: 'v1', kind: 'Pod' }, subResource: '', namespace: 'team', name: 'p', object, oldObject: null, namespaceLabels: labels };
}

function verdictOf(rule: PortalRuleObject, labels: Record<string, string> | undefined): { result: string; message: string } {
  const rs = new RuleSet();
  const state = rs.upsert(rule);
  assert.equal(state.ready, true, state.message);
  const [v] = evaluate(rs, input(labels));
  assert.ok(v);
  return v;
}

void describe('Pod Security versions', () => {
  void it('parses versions exactly as PSA: latest or v1.N, no patch, no leading zero, major 1', () => {
    assert.equal(parsePodSecurityVersion('latest'), Number.POSITIVE_INFINITY);
    assert.equal(parsePodSecurityVersion('v1.0'), 0);
    assert.equal(parsePodSecurityVersion('v1.37'), 37);
    for (const bad of ['v1.030', 'v1.30.0', '1.30', 'v2.0', 'Latest', 'v1.', '', ' v1.30', 'v1.99999999999999999999']) {
      assert.equal(parsePodSecurityVersion(bad), undefined, bad);
    }
  });

  void it('minPodSecurityVersion compares with the version given to the validator (latest by default)', () => {
    const c = compileSchema(SCHEMA);
    assert.ok(c.ok);
    const obj = { spec: { hostPID: true } };
    assert.deepEqual(c.validate(obj, '', 29), []);
    assert.equal(c.validate(obj, '', 30).length, 1);
    assert.equal(c.validate(obj).length, 1, 'latest');
    c.release();
  });

  void it('a malformed keyword value is a compile error that says so', () => {
    const c = compileSchema({ if: { minPodSecurityVersion: '1.30' }, then: false });
    assert.equal(c.ok, false);
    assert.match(c.ok ? '' : c.error, /minPodSecurityVersion.*must match pattern/);
  });

  void it('latest by default; spec.podSecurity.version pins the rule; the namespace label overrides it', () => {
    assert.equal(verdictOf(versionedRule(), {}).result, 'fail');
    assert.equal(verdictOf(versionedRule('v1.29'), {}).result, 'pass');
    const pinned = verdictOf(versionedRule('v1.30'), {});
    assert.equal(pinned.result, 'fail');
    assert.match(pinned.message, /hostPID is not allowed \(checked at Pod Security Standards v1\.30, from spec\.podSecurity\.version\)/);
    assert.equal(verdictOf(versionedRule('v1.30'), { [LABEL]: 'v1.29' }).result, 'pass');
    const labelled = verdictOf(versionedRule('v1.29'), { [LABEL]: 'v1.31' });
    assert.equal(labelled.result, 'fail');
    assert.match(labelled.message, /from namespace label pod-security\.kubernetes\.io\/enforce-version/);
    assert.equal(verdictOf(versionedRule('v1.29'), { [LABEL]: 'latest' }).result, 'fail');
    // Above the newest version a schema names, everything behaves as latest.
    assert.equal(verdictOf(versionedRule(), { [LABEL]: 'v1.99' }).result, 'fail');
  });

  void it('an invalid namespace label means latest, as in PSA, and the message says why', () => {
    const v = verdictOf(versionedRule('v1.0'), { [LABEL]: 'v1.029' });
    assert.equal(v.result, 'fail');
    assert.match(v.message, /namespace label pod-security\.kubernetes\.io\/enforce-version="v1\.029" is not "latest" or "v1\.N", so latest applies/);
  });

  void it('unknown namespace labels make a versioned rule an error (fail closed); unversioned rules do not care', () => {
    const v = verdictOf(versionedRule(), undefined);
    assert.equal(v.result, 'error');
    assert.match(v.message, /labels of namespace team are unknown, so its pod-security\.kubernetes\.io\/enforce-version cannot be read/);
    const rs = new RuleSet();
    rs.upsert(clusterRule('no-priv'));
    assert.equal(evaluate(rs, input(undefined))[0]?.result, 'pass');
  });

  void it('the version applies to pod templates of workloads too', () => {
    const rs = new RuleSet();
    rs.upsert(versionedRule());
    const deployment: KubeObject = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'd', namespace: 'team' }, spec: { template: { spec: { hostPID: true, containers: [] } } } };
    const at = (labels: Record<string, string>): string | undefined =>
      evaluate(rs, { ...input(labels, deployment), kind: { group: 'apps', version: 'v1', kind: 'Deployment' } })[0]?.result;
    assert.equal(at({ [LABEL]: 'v1.29' }), 'pass');
    assert.equal(at({ [LABEL]: 'v1.30' }), 'fail');
  });

  void it('an invalid spec.podSecurity.version is rejected at load with a clear message', () => {
    for (const bad of ['v1.030', '1.30', 'v1.99999999999999999999']) {
      const v = validateRule(versionedRule(bad));
      assert.equal(v.ok, false, bad);
      assert.deepEqual(v.ok ? [] : v.problems, [`spec.podSecurity.version: "${bad}" is not a Pod Security version: use "latest" or "v1.N" (e.g. "v1.30")`]);
      const state = new RuleSet().upsert(versionedRule(bad));
      assert.equal(state.ready, false);
    }
    const typo = validateRule({ ...versionedRule('v1.30'), spec: { ...versionedRule('v1.30').spec, podSecurity: { verison: 'v1.30' } } });
    assert.equal(typo.ok, false);
    assert.match(typo.ok ? '' : typo.problems.join(), /spec\.podSecurity\.verison: unknown field/);
  });

  void it('decideAdmission equals decide(evaluate()) for versioned rules at every label', () => {
    const rs = new RuleSet();
    rs.upsert(versionedRule('v1.29', 'a'));
    rs.upsert(versionedRule(undefined, 'b'));
    rs.upsert({ ...versionedRule(undefined, 'c'), spec: { ...versionedRule(undefined, 'c').spec, enforcement: 'Warn' } });
    for (const labels of [undefined, {}, { [LABEL]: 'v1.0' }, { [LABEL]: 'v1.30' }, { [LABEL]: 'latest' }, { [LABEL]: 'bogus' }]) {
      const i = input(labels);
      assert.deepEqual(decideAdmission(rs, i), decide(evaluate(rs, i)), JSON.stringify(labels));
    }
  });
});
