/**
 * The Pod Security Standards and best-practices rule library: every rule is
 * valid and compiles, every good fixture passes its rule, every bad fixture
 * fails it with a violation at the right field, and the compliant "restricted"
 * workloads pass every rule.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { evaluate, RuleSet, validateRule, type PortalRuleObject } from '../../src/policy/index.ts';
import { auditInput, FIXTURES, loadFixtures, loadRuleFiles, pathUnder, POLICIES } from './fixtures.ts';

const BASELINE = [
  'disallow-capabilities',
  'disallow-host-namespaces',
  'disallow-host-path',
  'disallow-host-ports',
  'disallow-host-process',
  'disallow-privileged-containers',
  'disallow-proc-mount',
  'disallow-selinux',
  'restrict-apparmor-profiles',
  'restrict-seccomp',
  'restrict-sysctls',
];
const RESTRICTED = [
  'disallow-capabilities-strict',
  'disallow-privilege-escalation',
  'require-run-as-non-root-user',
  'require-run-as-nonroot',
  'restrict-seccomp-strict',
  'restrict-volume-types',
];
const BEST_PRACTICES = ['disallow-latest-tag', 'require-resource-limits', 'require-team-label'];

const pss = loadRuleFiles(join(POLICIES, 'pod-security'));
const bestPractices = loadRuleFiles(join(POLICIES, 'best-practices'));
const allRules = [...pss, ...bestPractices];
const byName = new Map<string, PortalRuleObject>(allRules.map((r) => [r.object.metadata.name, r.object]));

function ruleSetOf(rules: Iterable<PortalRuleObject>): RuleSet {
  const set = new RuleSet();
  for (const r of rules) {
    const state = set.upsert(r);
    assert.equal(state.ready, true, `${r.metadata.name}: ${state.message}`);
  }
  return set;
}

void describe('rule library', () => {
  void it('has exactly the Pod Security Standards controls, by name', () => {
    assert.deepEqual(pss.map((r) => r.object.metadata.name).sort(), [...BASELINE, ...RESTRICTED].sort());
    assert.deepEqual(bestPractices.map((r) => r.object.metadata.name).sort(), BEST_PRACTICES);
  });

  for (const { file, object } of allRules) {
    const name = object.metadata.name;
    void it(`${name}: is a valid rule that compiles, named after its file`, () => {
      assert.ok(file.endsWith(`/${name}.yaml`), `${file} should be named ${name}.yaml`);
      const v = validateRule(object);
      assert.ok(v.ok, v.ok ? '' : v.problems.join('\n'));
      const state = new RuleSet().upsert(object);
      assert.equal(state.ready, true, state.message);
      assert.equal(state.reason, 'Compiled');
      const a = object.metadata.annotations ?? {};
      assert.ok(a['policies.portal.dev/title'], 'policies.portal.dev/title annotation');
      assert.ok(a['policies.portal.dev/description'], 'policies.portal.dev/description annotation');
      assert.ok(object.spec.validate.message, 'validate.message');
      assert.ok(object.spec.severity, 'severity');
    });
  }

  void it('baseline rules deny, restricted rules warn, best practices audit', () => {
    for (const n of BASELINE) {
      assert.equal(byName.get(n)?.spec.enforcement, 'Deny', n);
      assert.equal(byName.get(n)?.spec.category, 'Pod Security Standards (Baseline)', n);
    }
    for (const n of RESTRICTED) {
      assert.equal(byName.get(n)?.spec.enforcement, 'Warn', n);
      assert.equal(byName.get(n)?.spec.category, 'Pod Security Standards (Restricted)', n);
    }
    for (const n of BEST_PRACTICES) assert.equal(byName.get(n)?.spec.enforcement, 'Audit', n);
    for (const n of [...BASELINE, ...RESTRICTED]) {
      assert.deepEqual(byName.get(n)?.spec.match.kinds, [{ apiGroups: [''], kinds: ['Pod'] }], n);
    }
  });
});

for (const [dirName, rulesDir] of [
  ['pss', [...BASELINE, ...RESTRICTED]],
  ['best-practices', BEST_PRACTICES],
] as const) {
  const fixtures = loadFixtures(join(FIXTURES, dirName));
  void describe(`fixtures: ${dirName}`, () => {
    void it('every rule has good fixtures and bad Pod, Deployment and CronJob fixtures', () => {
      for (const rule of rulesDir) {
        const mine = fixtures.filter((f) => f.group === rule);
        assert.ok(mine.some((f) => f.expect.result === 'pass'), `${rule}: a good fixture`);
        for (const kind of ['Pod', 'Deployment', 'CronJob']) {
          assert.ok(
            mine.some((f) => f.expect.result === 'fail' && f.object.kind === kind),
            `${rule}: a bad ${kind} fixture`,
          );
        }
      }
    });

    for (const fx of fixtures.filter((f) => f.group !== 'compliant')) {
      const label = `${fx.group}/${fx.file.split('/').pop() ?? ''}`;
      void it(`${label}: ${fx.expect.result === 'pass' ? 'passes' : `fails at ${fx.expect.path}`}`, () => {
        const rule = byName.get(fx.group);
        assert.ok(rule, `no rule named ${fx.group}`);
        const verdicts = evaluate(ruleSetOf([rule]), auditInput(fx.object));
        assert.equal(verdicts.length, 1, `one verdict expected, got ${JSON.stringify(verdicts)}`);
        const [v] = verdicts;
        assert.ok(v);
        if (fx.expect.result === 'pass') {
          assert.equal(v.result, 'pass', v.message);
          return;
        }
        // Deny rules fail; Warn and Audit rules report a violation as warn.
        assert.equal(v.result, rule.spec.enforcement === 'Deny' ? 'fail' : 'warn', v.message);
        const expected = fx.expect.path;
        assert.ok(
          v.violations.some((x) => pathUnder(x.path, expected)),
          `a violation at ${expected}; got ${JSON.stringify(v.violations)}`,
        );
        assert.ok(v.message.includes(fx.group), `message names the rule: ${v.message}`);
      });
    }
  });
}

void describe('compliant restricted workloads', () => {
  const compliant = loadFixtures(join(FIXTURES, 'pss')).filter((f) => f.group === 'compliant');
  const everything = ruleSetOf(allRules.map((r) => r.object));

  void it('covers a Pod, a Deployment and a CronJob', () => {
    assert.deepEqual(compliant.map((f) => f.object.kind).sort(), ['CronJob', 'Deployment', 'Pod']);
  });

  for (const fx of compliant) {
    void it(`${fx.object.kind} ${fx.object.metadata?.name ?? ''} passes every rule`, () => {
      const verdicts = evaluate(everything, auditInput(fx.object));
      assert.deepEqual(verdicts.map((v) => v.rule).sort(), [...byName.keys()].sort());
      for (const v of verdicts) assert.equal(v.result, 'pass', `${v.rule}: ${v.message}`);
    });
  }
});
