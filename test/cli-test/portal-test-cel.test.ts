/**
 * `portal test` with CEL rules (`validate.cel`), end to end through the real
 * executable: verdicts (including pod templates), compile errors with file,
 * rule and position, fields no matched kind has (issue 33), and cost
 * overruns, all exit 2.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runPortal } from './run-portal.ts';
import { tempDir } from '../support/temp-dir.ts';

const tmp = tempDir('portal-cli-cel-');
const write = tmp.write;

const NO_PRIVILEGED = `apiVersion: portal.dev/v1alpha1
kind: PortalClusterRule
metadata:
  name: cel-no-privileged
spec:
  match:
    kinds: [{apiGroups: [""], kinds: [Pod]}]
  validate:
    message: Privileged containers are not allowed.
    cel:
      variables:
        - name: containers
          expression: "object.spec.containers + object.spec.?initContainers.orValue([])"
      expressions:
        - expression: "variables.containers.all(c, !c.?securityContext.?privileged.orValue(false))"
          messageExpression: "'privileged: ' + variables.containers.filter(c, c.?securityContext.?privileged.orValue(false)).map(c, c.name).join(', ')"
`;

const RESOURCES = `apiVersion: v1
kind: Pod
metadata: {name: bad}
spec:
  containers: [{name: app, image: nginx, securityContext: {privileged: true}}]
---
apiVersion: v1
kind: Pod
metadata: {name: good}
spec:
  containers: [{name: app, image: nginx}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: prod}
spec:
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, securityContext: {privileged: true}}]
`;

interface Row {
  rule: string;
  kind: string;
  namespace: string;
  name: string;
  result: string;
  message: string;
}

void describe('portal test with CEL rules', { concurrency: 3 }, () => {
  void it('gives CEL verdicts, with the template path for workloads', async () => {
    const policies = await write('ok/rules/no-priv.yaml', NO_PRIVILEGED);
    const resources = await write('ok/resources.yaml', RESOURCES);
    const run = await runPortal(['test', '--policies', policies, '--output', 'json', resources]);
    assert.equal(run.stderr, '');
    assert.equal(run.code, 1);
    const rows = JSON.parse(run.stdout) as Row[];
    const by = (name: string): Row | undefined => rows.find((r) => r.name === name);
    assert.equal(by('bad')?.result, 'fail');
    assert.equal(by('bad')?.message, 'cel-no-privileged: Privileged containers are not allowed. [privileged: app]');
    assert.equal(by('good')?.result, 'pass');
    assert.equal(by('web')?.result, 'fail');
    assert.equal(by('web')?.message, 'cel-no-privileged: Privileged containers are not allowed. [spec.template: privileged: web]');
  });

  void it('an expression that does not compile: exit 2 naming the file, the rule and the position', async () => {
    const bad = NO_PRIVILEGED.replace(
      'expression: "variables.containers.all(c, !c.?securityContext.?privileged.orValue(false))"',
      'expression: "variables.containers.all(c, !c.securityContext.privileged) && variables.nope"',
    );
    const policies = await write('compile/rules/no-priv.yaml', bad);
    const resources = await write('compile/resources.yaml', RESOURCES);
    const run = await runPortal(['test', '--policies', policies, resources]);
    assert.equal(run.code, 2);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, new RegExp(`${policies.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: PortalClusterRule "cel-no-privileged" is invalid:`));
    assert.match(run.stderr, /spec\.validate\.cel\.expressions\[0\]\.expression: compilation failed: line 1, column 63: undefined variable "variables\.nope" \(declared: containers\)/);
    assert.match(run.stderr, /Nothing was evaluated/);
  });

  void it('a type error and authorizer are refused the same way', async () => {
    const typeError = NO_PRIVILEGED.replace('"object.spec.containers + object.spec.?initContainers.orValue([])"', '"size(object.spec.containers) + \'x\'"');
    const authz = NO_PRIVILEGED.replace('name: cel-no-privileged', 'name: cel-authz').replace(
      'expression: "variables.containers.all(c, !c.?securityContext.?privileged.orValue(false))"',
      "expression: \"authorizer.group('').resource('pods').check('create').allowed()\"",
    );
    const dir = join(tmp.path, 'types', 'rules');
    await write('types/rules/a.yaml', typeError);
    await write('types/rules/b.yaml', authz);
    const resources = await write('types/resources.yaml', RESOURCES);
    const run = await runPortal(['test', '--policies', dir, resources]);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /a\.yaml: PortalClusterRule "cel-no-privileged" is invalid:\n\s+- spec\.validate\.cel\.variables\[0\]\.expression: compilation failed: line 1, column 1: no such overload: int \+ string/);
    assert.match(run.stderr, /b\.yaml: PortalClusterRule "cel-authz" is invalid:\n\s+- spec\.validate\.cel\.expressions\[0\]\.expression: compilation failed: line 1, column 1: `authorizer` is not supported/);
  });

  void it('a field no matched kind has (issue 33): exit 2 naming the field and the kind', async () => {
    const typo = NO_PRIVILEGED.replace('"object.spec.containers + ', '"object.spec.containres + ');
    const policies = await write('typecheck/rules/no-priv.yaml', typo);
    const resources = await write('typecheck/resources.yaml', RESOURCES);
    const run = await runPortal(['test', '--policies', policies, resources]);
    assert.equal(run.code, 2);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /PortalClusterRule "cel-no-privileged" is invalid:/);
    assert.match(run.stderr, /spec\.validate\.cel\.variables\[0\]\.expression: spec\.containres: no such field in v1 Pod/);
  });

  void it('an expression that exceeds its cost limit: exit 2 naming the rule and the expression', async () => {
    const hundred = `[${Array.from({ length: 100 }, (_, i) => i).join(',')}]`;
    const hostile = NO_PRIVILEGED.replace('name: cel-no-privileged', 'name: cel-hostile').replace(
      'expression: "variables.containers.all(c, !c.?securityContext.?privileged.orValue(false))"',
      `expression: "${hundred}.all(a, ${hundred}.all(b, ${hundred}.all(c, a + b + c >= 0)))"`,
    );
    const policies = await write('cost/rules/hostile.yaml', hostile);
    const resources = await write('cost/resources.yaml', RESOURCES);
    const run = await runPortal(['test', '--policies', policies, resources]);
    assert.equal(run.code, 2);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /portal test: 3 CEL cost overruns:/);
    assert.match(run.stderr, /hostile\.yaml: PortalClusterRule "cel-hostile" on Pod default\/bad: rule cel-hostile could not be evaluated: validate\.cel\.expressions\[0\] failed: evaluation exceeded the per-expression cost limit \(1000000 units\)/);
  });
});
