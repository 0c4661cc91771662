/**
 * `portal test` over ValidatingAdmissionPolicies, end to end through the real
 * executable: JSON rows (rule = the policy, result fail / warn / pass / skip /
 * error), params from files, and bad input (an expression that does not
 * compile, an unknown variable, an invalid binding, a missing param, a cost
 * overrun) exiting 2 with the file, the policy and the position.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { loadFixtures } from '../pss/fixtures.ts';
import { ROOT, runPortal } from './run-portal.ts';
import { tempDir } from '../support/temp-dir.ts';

interface Row {
  rule: string;
  kind: string;
  namespace: string;
  name: string;
  result: string;
  message: string;
}

const tmp = tempDir('portal-vap-test-');
const write = tmp.write;

const DEPLOYMENTS = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: NAME}
spec:
  FAILURE
  PARAMKIND
  matchConstraints:
    resourceRules:
      - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
    - EXPRESSION
`;
function policy(name: string, validation: string, extra: { paramKind?: boolean; failurePolicy?: string } = {}): string {
  return DEPLOYMENTS.replace('NAME', name)
    .replace('FAILURE', extra.failurePolicy ? `failurePolicy: ${extra.failurePolicy}` : '')
    .replace('PARAMKIND', extra.paramKind ? 'paramKind: {apiVersion: rules.example.com/v1, kind: ReplicaLimit}' : '')
    .replace('EXPRESSION', validation);
}
function binding(name: string, policyName: string, rest: string): string {
  return `apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: ${name}}\nspec:\n  policyName: ${policyName}\n${rest}`;
}
const deployment = (name: string, namespace: string, replicas: number, labels = '{}'): string =>
  `apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: ${name}, namespace: ${namespace}, labels: ${labels}}\nspec:\n  replicas: ${replicas}\n  template: {spec: {containers: [{name: app, image: nginx}]}}\n`;

void describe('portal test with ValidatingAdmissionPolicies', { concurrency: 3 }, () => {
  void it('--output json: fail for Deny, warn for Warn/Audit, pass, skip and error rows named after the policy', async () => {
    const dir = join(tmp.path, 'rows', 'policies');
    await write(
      'rows/policies/replica-limit.yaml',
      [
        policy('replica-limit', `{expression: "object.spec.replicas <= params.maxReplicas", messageExpression: "'replicas must be at most ' + string(params.maxReplicas)"}`, { paramKind: true }),
        binding('replica-limit-prod', 'replica-limit', '  validationActions: [Deny]\n  paramRef: {name: limits, parameterNotFoundAction: Deny}\n  matchResources: {namespaceSelector: {matchLabels: {env: prod}}}\n'),
        'apiVersion: rules.example.com/v1\nkind: ReplicaLimit\nmetadata: {name: limits, namespace: shop}\nmaxReplicas: 3\n',
      ].join('---\n'),
    );
    await write(
      'rows/policies/team-label.yaml',
      [
        policy('team-label', `{expression: "has(object.metadata.labels) && 'team' in object.metadata.labels", message: "a team label is required"}`),
        binding('team-label', 'team-label', '  validationActions: [Warn, Audit]\n'),
      ].join('---\n'),
    );
    await write(
      'rows/policies/broken.yaml',
      [policy('broken-at-runtime', `{expression: "object.spec.strategy.type == 'Recreate'"}`, { failurePolicy: 'Ignore' }), binding('broken-at-runtime', 'broken-at-runtime', '  validationActions: [Deny]\n')].join('---\n'),
    );
    const inputs = await write(
      'rows/inputs.yaml',
      [
        'apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {env: prod}}\n',
        deployment('big', 'shop', 5),
        deployment('small', 'shop', 2, '{team: a}'),
        deployment('elsewhere', 'dev', 9, '{team: a}'),
      ].join('---\n'),
    );
    const run = await runPortal(['test', '--policies', dir, '--output', 'json', inputs]);
    assert.equal(run.stderr, '');
    assert.equal(run.code, 1, 'a Deny binding fails');
    const rows = (JSON.parse(run.stdout) as Row[]).filter((r) => r.kind === 'Deployment');
    const table = rows.map((r) => `${r.name} ${r.rule} ${r.result}`);
    assert.deepEqual(table, [
      'big broken-at-runtime error',
      'big replica-limit fail',
      'big team-label warn',
      'small broken-at-runtime error',
      'small replica-limit pass',
      'small team-label pass',
      'elsewhere broken-at-runtime error',
      'elsewhere replica-limit skip',
      'elsewhere team-label pass',
    ]);
    const msg = (name: string, rule: string): string => rows.find((r) => r.name === name && r.rule === rule)?.message ?? '';
    assert.equal(msg('big', 'replica-limit'), "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-prod' denied request: replicas must be at most 3 (params shop/limits)");
    assert.equal(msg('big', 'team-label'), "Validation failed for ValidatingAdmissionPolicy 'team-label' with binding 'team-label': a team label is required");
    assert.match(msg('big', 'broken-at-runtime'), /expression 'object\.spec\.strategy\.type == 'Recreate'' resulted in error: .*\(ignored: failurePolicy Ignore\)$/);
  });

  void it('policies/pod-security-vap gives the expected verdict on every PSS fixture', async () => {
    const fixtures = join(ROOT, 'test', 'fixtures', 'pss');
    const run = await runPortal(['test', '--policies', join(ROOT, 'policies', 'pod-security-vap'), '--output', 'json', fixtures]);
    assert.equal(run.stderr, '');
    const rows = JSON.parse(run.stdout) as Row[];
    for (const fx of loadFixtures(fixtures)) {
      const mine = rows.filter((r) => r.kind === fx.object.kind && r.name === fx.object.metadata?.name);
      assert.equal(mine.length, 19, `${fx.file}: one row per control`);
      if (fx.group === 'compliant') {
        for (const r of mine) assert.equal(r.result, 'pass', `${fx.file} ${r.rule}: ${r.message}`);
        continue;
      }
      const own = mine.find((r) => r.rule === fx.group);
      assert.ok(own, `${fx.file}: a row for ${fx.group}`);
      if (fx.expect.result === 'pass') assert.equal(own.result, 'pass', `${fx.file}: ${own.message}`);
      else assert.ok(own.result === 'fail' || own.result === 'warn', `${fx.file}: ${own.message}`);
    }
  });

  void it('bad input exits 2 with the file, the policy and the position, and evaluates nothing', async () => {
    const syntax = await write('bad/syntax/p.yaml', [policy('syntax', '{expression: "object.spec.replicas <"}'), binding('b', 'syntax', '  validationActions: [Deny]\n')].join('---\n'));
    const unknownVar = await write('bad/unknown/p.yaml', [policy('unknown-variable', '{expression: "variables.nope > 1"}'), binding('b2', 'unknown-variable', '  validationActions: [Deny]\n')].join('---\n'));
    const badBinding = await write('bad/binding/p.yaml', [policy('fine', '{expression: "true"}'), binding('both', 'fine', '  validationActions: [Deny, Warn]\n')].join('---\n'));
    const input = await write('bad/inputs.yaml', deployment('d', 'default', 1));
    const run = await runPortal(['test', '-p', join(syntax, '..'), '-p', join(unknownVar, '..'), '-p', join(badBinding, '..'), '-o', 'json', input]);
    assert.equal(run.code, 2, run.stderr);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /syntax[/\\]p\.yaml: ValidatingAdmissionPolicy "syntax" is invalid:\n\s+- spec\.validations\[0\]\.expression: Invalid value: "object\.spec\.replicas <": compilation failed: ERROR: <input>:1:\d+: /);
    assert.match(run.stderr, /unknown[/\\]p\.yaml: ValidatingAdmissionPolicy "unknown-variable" is invalid:\n\s+- spec\.validations\[0\]\.expression: .*compilation failed: ERROR: <input>:1:1: undefined variable "variables\.nope"/);
    assert.match(run.stderr, /binding[/\\]p\.yaml: ValidatingAdmissionPolicyBinding "both" is invalid:\n\s+- spec\.validationActions: Invalid value: \["Deny","Warn"\]: must not contain both Deny and Warn/);
  });

  void it('a missing param (Deny) and a cost overrun exit 2, naming the policy and the expression', async () => {
    const missing = await write(
      'runtime/missing/p.yaml',
      [policy('needs-params', '{expression: "object.spec.replicas <= params.maxReplicas"}', { paramKind: true }), binding('b', 'needs-params', '  validationActions: [Deny]\n  paramRef: {name: absent, parameterNotFoundAction: Deny}\n')].join('---\n'),
    );
    const loops = '[0,1,2,3,4,5,6,7,8,9]';
    const costly = await write(
      'runtime/cost/p.yaml',
      [
        policy('costly', `{expression: "${loops}.all(a, ${loops}.all(b, ${loops}.all(c, ${loops}.all(d, ${loops}.all(e, ${loops}.all(f, true))))))"}`),
        binding('c', 'costly', '  validationActions: [Audit]\n'),
      ].join('---\n'),
    );
    const input = await write('runtime/inputs.yaml', deployment('d', 'default', 1));
    const run = await runPortal(['test', '-p', join(missing, '..'), '-p', join(costly, '..'), input]);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /missing[/\\]p\.yaml: ValidatingAdmissionPolicy "needs-params" with binding "b" on Deployment default\/d: no params found for policy binding with `Deny` parameterNotFoundAction/);
    assert.match(run.stderr, /cost[/\\]p\.yaml: ValidatingAdmissionPolicy "costly" with binding "c" on Deployment default\/d: spec\.validations\[0\]\.expression: the expression exceeded its CEL cost limit/);
  });
});
