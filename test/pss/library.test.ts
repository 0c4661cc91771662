/**
 * The Pod Security Standards and best-practices rule library: every rule is
 * valid and compiles, every good fixture passes its rule, every bad fixture
 * fails it with a violation at the right field, and the compliant "restricted"
 * workloads pass every rule. Pod Security fixtures are checked at every
 * version from v1.0 to v1.38 and latest, pinned both ways: by the namespace
 * label pod-security.kubernetes.io/enforce-version and by the rule's
 * spec.podSecurity.version.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { evaluate, RuleSet, validateRule, type PortalRuleObject } from '../../src/policy/index.ts';
import { auditInput, expectationAt, FIXTURES, loadFixtures, loadRuleFiles, pathUnder, POLICIES, type Expectation, type Fixture } from './fixtures.ts';

const BASELINE = [
  'disallow-capabilities',
  'disallow-host-namespaces',
  'disallow-host-path',
  'disallow-host-ports',
  'disallow-host-probes',
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
  'disallow-proc-mount-strict',
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

const LABEL = 'pod-security.kubernetes.io/enforce-version';
/** Every version PSA can be asked for that matters here: v1.0 to one past the newest (v1.38), and latest. */
const NEWEST = 37;
const VERSIONS: number[] = [...Array.from({ length: NEWEST + 2 }, (_, i) => i), Infinity];
const versionText = (v: number): string => (v === Infinity ? 'latest' : `v1.${v}`);

/** The PSA check IDs of FACTS-pss §1, one rule each. */
const CHECKS: Record<string, string> = {
  'disallow-privileged-containers': 'privileged',
  'disallow-host-namespaces': 'hostNamespaces',
  'disallow-host-path': 'hostPathVolumes',
  'disallow-host-ports': 'hostPorts',
  'disallow-host-process': 'windowsHostProcess',
  'disallow-capabilities': 'capabilities_baseline',
  'restrict-apparmor-profiles': 'appArmorProfile',
  'disallow-selinux': 'seLinuxOptions',
  'restrict-seccomp': 'seccompProfile_baseline',
  'restrict-sysctls': 'sysctls',
  'disallow-proc-mount': 'procMount',
  'disallow-host-probes': 'hostProbesAndHostLifecycle',
  'disallow-privilege-escalation': 'allowPrivilegeEscalation',
  'disallow-capabilities-strict': 'capabilities_restricted',
  'restrict-seccomp-strict': 'seccompProfile_restricted',
  'require-run-as-nonroot': 'runAsNonRoot',
  'require-run-as-non-root-user': 'runAsUser',
  'restrict-volume-types': 'restrictedVolumes',
  'disallow-proc-mount-strict': 'procMount_restricted',
};
/** The MinimumVersions of each check's variants (FACTS-pss §1). */
const VARIANTS: Record<string, number[]> = {
  'disallow-selinux': [0, 31],
  'restrict-seccomp': [0, 19],
  'restrict-sysctls': [0, 27, 29, 32, 37],
  'disallow-proc-mount': [0, 35],
  'disallow-host-probes': [34],
  'disallow-privilege-escalation': [8, 25],
  'disallow-capabilities-strict': [22, 25],
  'restrict-seccomp-strict': [19, 25],
  'require-run-as-nonroot': [0, 35],
  'require-run-as-non-root-user': [23, 35],
  'disallow-proc-mount-strict': [35],
};

/** The rule pinned with spec.podSecurity.version, compiled once per (rule, version). */
const pinnedSets = new Map<string, RuleSet>();
function pinned(rule: PortalRuleObject, version: number): RuleSet {
  const key = `${rule.metadata.name}@${versionText(version)}`;
  let set = pinnedSets.get(key);
  if (!set) {
    set = ruleSetOf([{ ...rule, spec: { ...rule.spec, podSecurity: { version: versionText(version) } } }]);
    pinnedSets.set(key, set);
  }
  return set;
}

function check(fx: Fixture, rule: PortalRuleObject, set: RuleSet, labels: Record<string, string>, e: Expectation, at: string): void {
  const verdicts = evaluate(set, auditInput(fx.object, labels));
  assert.equal(verdicts.length, 1, `${at}: one verdict expected, got ${JSON.stringify(verdicts)}`);
  const [v] = verdicts;
  assert.ok(v);
  if (e.result === 'pass') {
    assert.equal(v.result, 'pass', `${at}: ${v.message}`);
    return;
  }
  // Deny rules fail; Warn and Audit rules report a violation as warn.
  assert.equal(v.result, rule.spec.enforcement === 'Deny' ? 'fail' : 'warn', `${at}: ${v.message}`);
  const expected = e.path ?? '';
  assert.ok(
    v.violations.some((x) => pathUnder(x.path, expected)),
    `${at}: a violation at ${expected}; got ${JSON.stringify(v.violations)}`,
  );
  assert.ok(v.message.includes(fx.group), `${at}: message names the rule: ${v.message}`);
}

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
      const versioned = fx.expectations.length > 1;
      const what = fx.expectations
        .map((e) => `${e.result === 'pass' ? 'passes' : `fails at ${e.path ?? ''}`}${versioned ? ` at ${versionText(e.from)}${e.to === Infinity ? '+' : e.to === e.from ? '' : `-${versionText(e.to)}`}` : ''}`)
        .join(', ');
      void it(`${label}: ${what}`, () => {
        const rule = byName.get(fx.group);
        assert.ok(rule, `no rule named ${fx.group}`);
        if (dirName === 'best-practices') {
          check(fx, rule, ruleSetOf([rule]), {}, expectationAt(fx, Infinity), 'latest');
          return;
        }
        const set = ruleSetOf([rule]);
        // No label: latest.
        check(fx, rule, set, {}, expectationAt(fx, Infinity), 'no label');
        for (const v of VERSIONS) {
          const e = expectationAt(fx, v);
          check(fx, rule, set, { [LABEL]: versionText(v) }, e, `namespace label ${versionText(v)}`);
          // spec.podSecurity.version at the ends of each range (and latest).
          if (v === e.from || v === e.to || v === Infinity || (e.to === Infinity && v === NEWEST)) {
            check(fx, rule, pinned(rule, v), {}, e, `spec.podSecurity.version ${versionText(v)}`);
          }
        }
        // An invalid label is latest, whatever the rule pins.
        check(fx, rule, pinned(rule, 0), { [LABEL]: 'v1.030' }, expectationAt(fx, Infinity), 'invalid label');
      });
    }
  });
}

void describe('Pod Security checks and versions', () => {
  const fixtures = loadFixtures(join(FIXTURES, 'pss'));

  void it('one rule per PSA check, annotated with the check and its variants', () => {
    assert.deepEqual(Object.keys(CHECKS).sort(), [...BASELINE, ...RESTRICTED].sort());
    for (const [name, id] of Object.entries(CHECKS)) {
      const a = byName.get(name)?.metadata.annotations ?? {};
      assert.equal(a['policies.portal.dev/pod-security-check'], id, name);
      assert.equal(a['policies.portal.dev/pod-security-versions'], (VARIANTS[name] ?? [0]).map(versionText).join(', '), name);
    }
  });

  void it('every version boundary of every check has a good and a bad fixture changing there', () => {
    for (const [name, variants] of Object.entries(VARIANTS)) {
      const mine = fixtures.filter((f) => f.group === name);
      for (const boundary of variants.filter((v) => v > 0)) {
        const changing = mine.filter((f) => f.expectations.some((e) => e.from === boundary));
        assert.ok(changing.length > 0, `${name}: a fixture whose expectation changes at ${versionText(boundary)}`);
        const latest = changing.map((f) => f.expect.result);
        assert.ok(latest.includes('pass') || latest.includes('fail'), name);
      }
      // Fixtures change only where the check has a variant.
      for (const f of mine) {
        for (const e of f.expectations.slice(1)) assert.ok(variants.includes(e.from), `${f.file}: changes at ${versionText(e.from)}, where ${name} has no variant`);
      }
    }
    for (const f of fixtures) {
      if (!(f.group in VARIANTS)) assert.equal(f.expectations.length, 1, `${f.file}: ${f.group} is the same at every version`);
    }
  });

  void it('versions above the newest behave as latest; every rule gives the same verdict at v1.37, v1.38, v1.99 and latest', () => {
    const everything = ruleSetOf(pss.map((r) => r.object));
    for (const fx of fixtures) {
      const at = (v: string): string[] => evaluate(everything, auditInput(fx.object, { [LABEL]: v })).map((x) => `${x.rule}=${x.result}`);
      const latest = at('latest');
      for (const v of ['v1.37', 'v1.38', 'v1.99']) assert.deepEqual(at(v), latest, `${fx.file} at ${v}`);
    }
  });
});

void describe('compliant restricted workloads', () => {
  const compliant = loadFixtures(join(FIXTURES, 'pss')).filter((f) => f.group === 'compliant');
  const everything = ruleSetOf(allRules.map((r) => r.object));

  void it('covers a Pod, a Deployment and a CronJob', () => {
    assert.deepEqual(compliant.map((f) => f.object.kind).sort(), ['CronJob', 'Deployment', 'Pod']);
  });

  for (const fx of compliant) {
    void it(`${fx.object.kind} ${fx.object.metadata?.name ?? ''} passes every rule at every version`, () => {
      for (const v of VERSIONS) {
        const verdicts = evaluate(everything, auditInput(fx.object, { [LABEL]: versionText(v) }));
        assert.deepEqual(verdicts.map((x) => x.rule).sort(), [...byName.keys()].sort());
        for (const x of verdicts) assert.equal(x.result, 'pass', `${versionText(v)} ${x.rule}: ${x.message}`);
      }
    });
  }
});
