/**
 * `portal test FILE|DIR...` with test suites (`*.portal-test.yaml`, issue 17),
 * end to end through the real executable: passing suites, a wrong
 * expectation (exit 1, named with file and line), malformed suites (exit 2
 * with the line), VAPs with params and bindings, UPDATE / DELETE requests and
 * userInfo, directory discovery, --strict, --output json, and JUnit XML read
 * back with a real XML parser.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { runPortal, type RunResult } from './run-portal.ts';
import { tempDir } from '../support/temp-dir.ts';

const tmp = tempDir('portal-suites-');
const write = tmp.write;

const NO_PRIVILEGED = `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata: {name: no-privileged}
spec:
  match:
    kinds: [{apiGroups: [""], kinds: [Pod]}]
  validate:
    message: Privileged containers are not allowed.
    schema:
      properties:
        spec:
          properties:
            containers:
              items:
                properties:
                  securityContext:
                    properties:
                      privileged: {const: false}
`;
const TEAM_LABEL = `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata: {name: team-label}
spec:
  enforcement: Warn
  match:
    kinds: [{apiGroups: [apps], kinds: [Deployment]}]
    namespaceSelector: {matchLabels: {env: prod}}
  validate:
    cel:
      expressions:
        - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
          message: a team label is required
`;
/** Reads the request: only admins may change a ConfigMap's "locked" key, nobody may delete a locked one. */
const CONFIG_GUARD = `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata: {name: config-guard}
spec:
  match:
    kinds: [{apiGroups: [""], kinds: [ConfigMap]}]
    operations: [CREATE, UPDATE, DELETE]
  validate:
    cel:
      expressions:
        - expression: "request.operation != 'UPDATE' || oldObject.data.locked == object.data.locked || request.userInfo.groups.exists(g, g == 'admins')"
          message: only admins may change the locked key
        - expression: "request.operation != 'DELETE' || oldObject.data.locked != 'true'"
          message: a locked ConfigMap cannot be deleted
`;
const PODS = `apiVersion: v1
kind: Pod
metadata: {name: bad, namespace: shop}
spec:
  containers: [{name: app, image: nginx, securityContext: {privileged: true}}]
---
apiVersion: v1
kind: Pod
metadata: {name: good, namespace: shop}
spec:
  containers: [{name: app, image: nginx}]
`;
const DEPLOYMENTS = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template: {spec: {containers: [{name: web, image: nginx}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop, labels: {team: a}}
spec:
  template: {spec: {containers: [{name: api, image: nginx}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: dev}
spec:
  template: {spec: {containers: [{name: web, image: nginx}]}}
`;
const CONFIGMAPS = `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {locked: "false", size: "2"}
`;

/** A suite over the rules above; `results` is YAML for the results list. */
function suite(results: string, extra = ''): string {
  return `apiVersion: cli.portal.dev/v1alpha1
kind: Test
metadata: {name: shop}
policies: [../rules]
resources: [../manifests/pods.yaml, ../manifests/deployments.yaml]
namespaces:
  - {name: shop, labels: {env: prod}}
${extra}results:
${results}`;
}

const PASSING = `  - rule: no-privileged
    kind: Pod
    namespace: shop
    resources: [bad]
    result: fail
    messageContains: privileged
  - rule: no-privileged
    kind: Pod
    resources: [good]
    result: pass
  - {rule: no-privileged, kind: Deployment, namespace: shop, resources: [web, api], result: pass}
  - {rule: no-privileged, kind: Deployment, namespace: dev, resources: [web], result: pass}
  - rule: team-label
    kind: Deployment
    namespace: shop
    resources: [web]
    result: warn
    messageContains: a team label is required
  - rule: team-label
    kind: Deployment
    namespace: shop
    resources: [api]
    result: pass
  - rule: team-label
    kind: Deployment
    namespace: dev
    resources: [web]
    result: skip
`;

function context(r: RunResult): string {
  return `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
}

interface JsonReport {
  suites: {
    file: string;
    name: string;
    problems: { line: number | null; column: number | null; message: string }[];
    expectations: { line: number; rule: string; kind: string; namespace: string; name: string; expected: string; got: string; message: string; ok: boolean }[];
    unlisted: { rule: string; kind: string; namespace: string; name: string; result: string }[];
  }[];
  problems: string[];
  summary: { suites: number; invalid: number; expectations: number; held: number; failed: number; unlisted: number; strict: boolean };
}

// The fixtures above, in place before the tests run.
before(async () => {
  await write('rules/no-privileged.yaml', NO_PRIVILEGED);
  await write('rules/team-label.yaml', TEAM_LABEL);
  await write('rules/config-guard.yaml', CONFIG_GUARD);
  await write('manifests/pods.yaml', PODS);
  await write('manifests/deployments.yaml', DEPLOYMENTS);
  await write('manifests/configmaps.yaml', CONFIGMAPS);
});

void describe('portal test with suites', { concurrency: 3 }, () => {
  void it('a passing suite: exit 0, one PASS line and the summary', async () => {
    const file = await write('pass/shop.portal-test.yaml', suite(PASSING));
    const r = await runPortal(['test', file], { cwd: tmp.path });
    assert.equal(r.code, 0, context(r));
    assert.equal(r.stderr, '');
    assert.match(r.stdout, /^PASS pass\/shop\.portal-test\.yaml \(8 expectations\)$/m);
    assert.match(r.stdout, /^1 suite; 8 expectations: 8 held, 0 failed; 0 verdicts not named by any expectation$/m);
  });

  void it('one wrong expectation: exit 1, named with file:line, expected, got and the message', async () => {
    const wrong = PASSING.replace('    resources: [good]\n    result: pass', '    resources: [good]\n    result: fail');
    const file = await write('wrong/shop.portal-test.yaml', suite(wrong));
    const r = await runPortal(['test', file], { cwd: tmp.path });
    assert.equal(r.code, 1, context(r));
    assert.equal(r.stderr, '');
    const lines = r.stdout.split('\n').filter((l) => l.startsWith('  wrong/'));
    assert.deepEqual(lines, ['  wrong/shop.portal-test.yaml:17: no-privileged on Pod shop/good: expected fail, got pass: no-privileged: passed']);
    assert.match(r.stdout, /^FAIL wrong\/shop\.portal-test\.yaml \(8 expectations, 1 failed\)$/m);
    assert.match(r.stdout, /8 expectations: 7 held, 1 failed/);
  });

  void it('a message that does not contain messageContains fails the expectation', async () => {
    const file = await write('message/shop.portal-test.yaml', suite(PASSING.replace('messageContains: privileged', 'messageContains: hostPath')));
    const r = await runPortal(['test', file], { cwd: tmp.path });
    assert.equal(r.code, 1, context(r));
    assert.match(r.stdout, /message\/shop\.portal-test\.yaml:12: no-privileged on Pod shop\/bad: expected fail with a message containing "hostPath", got fail: no-privileged: Privileged containers are not allowed\./);
  });

  void it('unlisted verdicts are listed; they fail the run only with --strict', async () => {
    const partial = PASSING.split('  - rule: team-label')[0] as string;
    const file = await write('strict/shop.portal-test.yaml', suite(partial));
    const lenient = await runPortal(['test', file], { cwd: tmp.path });
    assert.equal(lenient.code, 0, context(lenient));
    assert.match(lenient.stdout, /^ {2}not named by any expectation \(1 warn, 1 pass, 1 skip\):$/m);
    assert.match(lenient.stdout, /^ {4}team-label on Deployment shop\/web: warn: /m);
    assert.match(lenient.stdout, /^ {4}team-label on Deployment dev\/web: skip: /m);
    assert.match(lenient.stdout, /3 verdicts not named by any expectation \(not failures without --strict\)/);
    const strict = await runPortal(['test', '--strict', file], { cwd: tmp.path });
    assert.equal(strict.code, 1, context(strict));
    assert.match(strict.stdout, /^FAIL strict\/shop\.portal-test\.yaml \(5 expectations, 3 verdicts not named\)$/m);
    assert.match(strict.stdout, /not named by any expectation \(1 warn, 1 pass, 1 skip\), failures with --strict:/);
  });

  void it('--output json carries the same information', async () => {
    const wrong = PASSING.replace('    resources: [good]\n    result: pass', '    resources: [good]\n    result: fail');
    const file = await write('json/shop.portal-test.yaml', suite(wrong.split('  - rule: team-label')[0] as string));
    const r = await runPortal(['test', '--output', 'json', file], { cwd: tmp.path });
    assert.equal(r.code, 1, context(r));
    const report = JSON.parse(r.stdout) as JsonReport;
    assert.deepEqual(report.summary, { suites: 1, invalid: 0, expectations: 5, held: 4, failed: 1, unlisted: 3, strict: false });
    const [s] = report.suites;
    assert.equal(s?.name, 'shop');
    assert.deepEqual(
      s?.expectations.map((e) => `${e.line} ${e.rule} ${e.namespace}/${e.name} ${e.expected} ${e.got} ${e.ok}`),
      ['12 no-privileged shop/bad fail fail true', '17 no-privileged shop/good fail pass false', '19 no-privileged shop/web pass pass true', '19 no-privileged shop/api pass pass true', '20 no-privileged dev/web pass pass true'],
    );
    assert.deepEqual(s?.unlisted.map((u) => `${u.rule} ${u.namespace}/${u.name} ${u.result}`).sort(), ['team-label dev/web skip', 'team-label shop/api pass', 'team-label shop/web warn']);
  });

  void it('a suite over VAPs with params: per binding, the strongest verdict without one, params from the resources', async () => {
    await write(
      'vap/policies/replica-limit.yaml',
      `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replica-limit}
spec:
  paramKind: {apiVersion: rules.example.com/v1, kind: ReplicaLimit}
  matchConstraints:
    resourceRules:
      - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
    - expression: "object.spec.replicas <= params.maxReplicas"
      messageExpression: "'replicas must be at most ' + string(params.maxReplicas)"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replica-limit-prod}
spec:
  policyName: replica-limit
  validationActions: [Deny]
  paramRef: {name: prod-limits, parameterNotFoundAction: Deny}
  matchResources: {namespaceSelector: {matchLabels: {env: prod}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replica-limit-warn}
spec:
  policyName: replica-limit
  validationActions: [Warn]
  paramRef: {name: soft-limits, parameterNotFoundAction: Deny}
`,
    );
    await write(
      'vap/resources/deployments.yaml',
      [
        'apiVersion: rules.example.com/v1\nkind: ReplicaLimit\nmetadata: {name: prod-limits, namespace: shop}\nmaxReplicas: 3\n',
        'apiVersion: rules.example.com/v1\nkind: ReplicaLimit\nmetadata: {name: soft-limits, namespace: shop}\nmaxReplicas: 10\n',
        'apiVersion: rules.example.com/v1\nkind: ReplicaLimit\nmetadata: {name: soft-limits, namespace: dev}\nmaxReplicas: 1\n',
        'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: big, namespace: shop}\nspec: {replicas: 5, template: {spec: {containers: [{name: a, image: nginx}]}}}\n',
        'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: small, namespace: shop}\nspec: {replicas: 2, template: {spec: {containers: [{name: a, image: nginx}]}}}\n',
        'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: pair, namespace: dev}\nspec: {replicas: 2, template: {spec: {containers: [{name: a, image: nginx}]}}}\n',
      ].join('---\n'),
    );
    const file = await write(
      'vap/replica-limit.portal-test.yaml',
      `apiVersion: cli.portal.dev/v1alpha1
kind: Test
metadata: {name: replica-limit}
policies: [policies]
resources: [resources]
namespaces: [{name: shop, labels: {env: prod}}, {name: dev, labels: {env: dev}}]
results:
  - {rule: replica-limit, binding: replica-limit-prod, kind: Deployment, resources: [big], result: fail, messageContains: "at most 3 (params shop/prod-limits)"}
  - {rule: replica-limit, binding: replica-limit-warn, kind: Deployment, resources: [big], result: pass}
  - {rule: replica-limit, binding: replica-limit-prod, kind: Deployment, resources: [small], result: pass}
  - {rule: replica-limit, binding: replica-limit-warn, kind: Deployment, resources: [small], result: pass}
  - {rule: replica-limit, binding: replica-limit-prod, kind: Deployment, resources: [pair], result: skip}
  - {rule: replica-limit, kind: Deployment, namespace: dev, resources: [pair], result: warn, messageContains: "at most 1"}
`,
    );
    const r = await runPortal(['test', '--strict', '--output', 'json', file], { cwd: tmp.path });
    assert.equal(r.code, 0, context(r));
    const report = JSON.parse(r.stdout) as JsonReport;
    assert.deepEqual(report.summary, { suites: 1, invalid: 0, expectations: 6, held: 6, failed: 0, unlisted: 0, strict: true });
    // The ReplicaLimit objects are params, not resources to evaluate: no verdict names them.
    assert.ok(report.suites[0]?.expectations.every((e) => e.kind === 'Deployment'));
  });

  void it('operation UPDATE with old objects, DELETE, and userInfo reach CEL as request, object and oldObject', async () => {
    await write('ops/old/configmaps.yaml', CONFIGMAPS.replace('locked: "false"', 'locked: "true"'));
    const base = `apiVersion: cli.portal.dev/v1alpha1
kind: Test
policies: [../rules/config-guard.yaml]
resources: [../manifests/configmaps.yaml]
`;
    const update = await write(
      'ops/update.portal-test.yaml',
      `${base}operation: UPDATE
oldResources: [old/configmaps.yaml]
userInfo: {username: jane, groups: [developers]}
results:
  - {rule: config-guard, kind: ConfigMap, resources: [settings], result: fail, messageContains: only admins may change the locked key}
`,
    );
    const admin = await write(
      'ops/update-admin.portal-test.yaml',
      `${base}operation: UPDATE
oldResources: [old/configmaps.yaml]
userInfo: {username: root, groups: [admins]}
results:
  - {rule: config-guard, kind: ConfigMap, resources: [settings], result: pass}
`,
    );
    const create = await write('ops/create.portal-test.yaml', `${base}results:\n  - {rule: config-guard, kind: ConfigMap, resources: [settings], result: pass}\n`);
    const del = await write(
      'ops/delete.portal-test.yaml',
      `apiVersion: cli.portal.dev/v1alpha1
kind: Test
policies: [../rules/config-guard.yaml]
resources: [old/configmaps.yaml]
operation: DELETE
results:
  - {rule: config-guard, kind: ConfigMap, resources: [settings], result: fail, messageContains: cannot be deleted}
`,
    );
    const r = await runPortal(['test', '--strict', update, admin, create, del], { cwd: tmp.path });
    assert.equal(r.code, 0, context(r));
    assert.match(r.stdout, /4 suites; 4 expectations: 4 held, 0 failed/);
  });

  void it('directory discovery: *.portal-test.yaml recursively; other YAML, hidden directories and node_modules are not suites', async () => {
    const good = suite(PASSING);
    await write('tree/a.portal-test.yaml', good.replace('../rules', '../rules').replace(/\.\.\/manifests/g, '../manifests'));
    await write('tree/nested/deeper/b.portal-test.yml', good.replace('../rules', '../../../rules').replace(/\.\.\/manifests/g, '../../../manifests'));
    await write('tree/nested/not-a-suite.yaml', 'this: is not a suite\n');
    await write('tree/.hidden/c.portal-test.yaml', 'not even YAML: [\n');
    await write('tree/node_modules/dep/d.portal-test.yaml', 'not even YAML: [\n');
    const r = await runPortal(['test', 'tree'], { cwd: tmp.path });
    assert.equal(r.code, 0, context(r));
    assert.deepEqual(
      r.stdout.split('\n').filter((l) => /^(PASS|FAIL|ERROR) /.test(l)),
      ['PASS tree/a.portal-test.yaml (8 expectations)', 'PASS tree/nested/deeper/b.portal-test.yml (8 expectations)'],
    );
    // A directory without suites is bad input, and says how to evaluate manifests instead.
    const none = await runPortal(['test', 'manifests'], { cwd: tmp.path });
    assert.equal(none.code, 2, context(none));
    assert.match(none.stderr, /manifests: holds no \*\.portal-test\.yaml suite .*use 'portal test --policies DIR FILE\.\.\.'/);
  });

  void it('--junit writes XML that parses and matches the counts; hostile text in messages is escaped', async () => {
    // A rule message with XML specials and a control character, echoed into <failure>.
    await write(
      'junit/rules/hostile.yaml',
      `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata: {name: hostile}
spec:
  match:
    kinds: [{apiGroups: [""], kinds: [Pod]}]
  validate:
    message: "<script>&amp; \\"quoted\\" 'x' ]]> \\u0001 \\u001b[31m"
    schema: {properties: {metadata: {properties: {name: {const: nobody}}}}}
`,
    );
    await write('junit/rules/no-privileged.yaml', NO_PRIVILEGED);
    const wrong = `apiVersion: cli.portal.dev/v1alpha1
kind: Test
metadata: {name: "junit & <friends>"}
policies: [rules]
resources: [../manifests/pods.yaml]
results:
  - {rule: no-privileged, kind: Pod, resources: [bad, good], result: fail}
  - {rule: hostile, kind: Pod, resources: [bad], result: pass}
`;
    const file = await write('junit/j.portal-test.yaml', wrong);
    const broken = await write('junit/broken.portal-test.yaml', 'apiVersion: cli.portal.dev/v1alpha1\nkind: Test\npolicies: [rules]\nresources: [nope]\nresults: []\n');
    const out = join(tmp.path, 'junit', 'report.xml');
    const r = await runPortal(['test', '--strict', '--junit', out, file, broken], { cwd: tmp.path });
    assert.equal(r.code, 2, context(r));
    const xml = await readFile(out, 'utf8');
    assert.equal(XMLValidator.validate(xml), true, xml);
    const doc = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '', isArray: (name) => ['testsuite', 'testcase'].includes(name) }).parse(xml) as {
      testsuites: { tests: string; failures: string; errors: string; testsuite: { name: string; tests: string; failures: string; errors: string; testcase: { name: string; line?: string; failure?: { message: string; '#text': string }; error?: unknown }[] }[] };
    };
    const [j, b] = doc.testsuites.testsuite;
    assert.equal(j?.name, 'junit & <friends>');
    // 3 expectations + 1 unlisted verdict (hostile on good) under --strict; 2 failed + the unlisted one.
    assert.equal(j?.testcase.length, 4);
    assert.equal(j?.tests, '4');
    assert.equal(j?.failures, '3');
    assert.equal(j?.testcase.filter((t) => t.failure).length, 3);
    const hostile = j?.testcase.find((t) => t.name.startsWith('hostile on Pod shop/bad'));
    assert.ok(hostile?.failure?.['#text'].includes(`<script>&amp; "quoted" 'x' ]]> \\u0001 \\u001b[31m`), JSON.stringify(hostile));
    assert.equal(b?.errors, '1');
    assert.equal(b?.testcase.length, 1);
    assert.ok(b?.testcase[0]?.error);
    assert.equal(doc.testsuites.tests, '5');
    assert.equal(doc.testsuites.failures, '3');
    assert.equal(doc.testsuites.errors, '1');
  });
});

void describe('portal test with malformed suites: exit 2, file and line', { concurrency: 3 }, () => {
  async function bad(name: string, text: string, ...expected: RegExp[]): Promise<RunResult> {
    const file = await write(`bad/${name}.portal-test.yaml`, text);
    const r = await runPortal(['test', file], { cwd: tmp.path });
    assert.equal(r.code, 2, context(r));
    for (const re of expected) assert.match(r.stderr, re, context(r));
    assert.doesNotMatch(r.stderr + r.stdout, /\n\s+at .+:\d+:\d+\)?\n/, `stack trace shown:\n${context(r)}`);
    assert.match(r.stdout, /^ERROR bad\//m);
    return r;
  }

  void it('invalid YAML', async () => {
    await bad('yaml', suite(PASSING).replace('    resources: [good]', '    resources: [good'), /bad\/yaml\.portal-test\.yaml:\d+:\d+: invalid YAML: /);
  });

  void it('schema errors: each with its line, unknown fields with a suggestion, every problem at once', async () => {
    const text = suite(PASSING.replace('    result: pass', '    result: passed').replace('messageContains: a team', 'messageContain: a team'));
    await bad(
      'schema',
      text,
      /bad\/schema\.portal-test\.yaml:18:13: results\[1\]\.result must be one of pass, fail, warn, skip, error \(got "passed"\)/,
      /bad\/schema\.portal-test\.yaml:26:5: results\[4\]: unknown field "messageContain" \(did you mean "messageContains"\?\)/,
      /2 problems with the input/,
    );
  });

  void it('missing required fields, wrong types', async () => {
    await bad(
      'required',
      'apiVersion: cli.portal.dev/v1alpha1\nkind: Test\npolicies: ../rules\nresources: [../manifests/pods.yaml]\nresults:\n  - {rule: no-privileged, kind: Pod, result: fail}\n',
      /:3:11: policies must be a list \(got "\.\.\/rules"\)/,
      /:6:5: results\[0\]: missing required field "resources"/,
    );
  });

  void it('not a suite at all', async () => {
    await bad('deployment', DEPLOYMENTS.split('---')[0] as string, /:1:1: not a Portal test suite: expected apiVersion cli\.portal\.dev\/v1alpha1 and kind Test \(got apiVersion "apps\/v1", kind "Deployment"\)/);
  });

  void it('names that do not exist: a rule, a binding, a resource; an ambiguous name', async () => {
    await bad(
      'names',
      suite(`  - {rule: no-privilegd, kind: Pod, resources: [bad], result: fail}
  - {rule: no-privileged, binding: x, kind: Pod, resources: [bad], result: fail}
  - {rule: no-privileged, kind: Pod, resources: [good, missing], result: pass}
  - {rule: team-label, kind: Deployment, resources: [web], result: warn}
`),
      /:9:12: results\[0\]\.rule: no rule or ValidatingAdmissionPolicy named "no-privilegd" among the suite's policies \(known: config-guard, no-privileged, team-label\)/,
      /:10:36: results\[1\]\.binding: binding is for ValidatingAdmissionPolicies; "no-privileged" is a PortalClusterRule/,
      /:11:56: results\[2\]\.resources\[1\]: no Pod named "missing" among the resources/,
      /:12:54: results\[3\]\.resources\[0\]: Deployment "web" exists in several namespaces \(dev, shop\); set namespace in this entry/,
    );
  });

  void it('paths that do not exist, UPDATE without old objects', async () => {
    await bad(
      'paths',
      `apiVersion: cli.portal.dev/v1alpha1
kind: Test
policies: [../rules, ../no-such-rules]
resources: [../manifests/pods.yaml]
operation: UPDATE
results:
  - {rule: no-privileged, kind: Pod, resources: [bad], result: fail}
`,
      /:5:12: operation UPDATE needs oldResources/,
    );
    await bad(
      'missing-path',
      suite(PASSING).replace('policies: [../rules]', 'policies: [../rules, ../no-such-rules]'),
      /:4:22: policies\[1\]: .*no-such-rules: cannot read: no such file or directory/,
    );
  });

  void it('two documents in one file, an empty file', async () => {
    await bad('two', `${suite(PASSING)}---\n${suite(PASSING)}`, /:\d+:1: a suite file holds one Test document; this is a second one/);
    await bad('empty', '# nothing here\n', /empty\.portal-test\.yaml: holds no YAML document/);
  });

  void it('--help shows both modes', async () => {
    const r = await runPortal(['test', '--help'], { cwd: tmp.path });
    assert.equal(r.code, 0, context(r));
    assert.match(r.stdout, /^Usage: portal test --policies DIR/);
    assert.match(r.stdout, /^ {7}portal test \[--output table\|json\] \[--junit FILE\] \[--strict\] FILE\|DIR\.\.\.$/m);
    assert.match(r.stdout, /Suite exit codes: 0 every expectation holds/);
  });

  void it('bad flags are exit 2 before anything runs', async () => {
    const r = await runPortal(['test', '--output', 'policyreport', '--pod-security-version', 'v1.30', 'x'], { cwd: tmp.path });
    assert.equal(r.code, 2, context(r));
    assert.match(r.stderr, /--output "policyreport" is not supported for suites; use table or json \(policyreport is for --policies DIR FILE\.\.\.\)/);
    assert.match(r.stderr, /--pod-security-version is for --policies DIR FILE\.\.\./);
    assert.equal(r.stdout, '');
  });
});
