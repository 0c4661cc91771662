/**
 * `validate.cel` in Portal rules (docs/design.md §8): verdicts, both languages,
 * matchConditions, pod-template autogen for every workload kind, errors that
 * deny, compile errors in the rule's state.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { decideAdmission, evaluate, POD_TEMPLATE_KINDS, RuleSet, validateRule, type CelValidation, type KubeObject, type RuleSpec } from '../../src/policy/index.ts';
import { clusterRule, input, NO_PRIVILEGED_SCHEMA, pod } from './support.ts';

const NO_PRIVILEGED: CelValidation = {
  variables: [{ name: 'containers', expression: 'object.spec.containers + object.spec.?initContainers.orValue([])' }],
  expressions: [
    {
      expression: 'variables.containers.all(c, !c.?securityContext.?privileged.orValue(false))',
      messageExpression: "'privileged containers: ' + variables.containers.filter(c, c.?securityContext.?privileged.orValue(false)).map(c, c.name).join(', ')",
    },
  ],
};

function celRule(name: string, cel: CelValidation, extra: Partial<Omit<RuleSpec, 'match'>> = {}): ReturnType<typeof clusterRule> {
  return clusterRule(name, { ...extra, validate: { message: 'Privileged containers are not allowed.', cel } });
}

function set(...rules: ReturnType<typeof clusterRule>[]): RuleSet {
  const rs = new RuleSet();
  for (const r of rules) rs.upsert(r);
  return rs;
}

describe('validate.cel verdicts', () => {
  it('fails a violating Pod with the messageExpression, passes a compliant one', () => {
    const rs = set(celRule('no-priv', NO_PRIVILEGED));
    const [bad] = evaluate(rs, input(pod({ privileged: true })));
    assert.equal(bad?.result, 'fail');
    assert.equal(bad?.message, 'no-priv: Privileged containers are not allowed. [privileged containers: app]');
    assert.deepEqual(bad?.violations, [{ path: '', message: 'privileged containers: app' }]);
    const [good] = evaluate(rs, input(pod({ privileged: false })));
    assert.equal(good?.result, 'pass');
    const d = decideAdmission(rs, input(pod({ privileged: true })));
    assert.equal(d.allowed, false);
  });

  it('Warn enforcement gives a warning that carries the CEL message', () => {
    const rs = set(celRule('no-priv', NO_PRIVILEGED, { enforcement: 'Warn' }));
    const d = decideAdmission(rs, input(pod({ privileged: true })));
    assert.deepEqual(d, { allowed: true, warnings: ['no-priv: Privileged containers are not allowed. (privileged containers: app)'] });
  });

  it('with both schema and cel, both must pass', () => {
    const both = clusterRule('both', {
      validate: { schema: NO_PRIVILEGED_SCHEMA, cel: { expressions: [{ expression: "object.metadata.name != 'forbidden'", message: 'that name is taken' }] } },
    });
    const rs = set(both);
    assert.equal(evaluate(rs, input(pod({ privileged: false })))[0]?.result, 'pass');
    const celOnly = evaluate(rs, input(pod({ privileged: false, name: 'forbidden' })))[0];
    assert.equal(celOnly?.result, 'fail');
    assert.deepEqual(celOnly?.violations, [{ path: '', message: 'that name is taken' }]);
    const schemaOnly = evaluate(rs, input(pod({ privileged: true })))[0];
    assert.equal(schemaOnly?.result, 'fail');
    assert.equal(schemaOnly?.violations[0]?.path, 'spec.containers[0].securityContext.privileged');
    assert.equal(evaluate(rs, input(pod({ privileged: true, name: 'forbidden' })))[0]?.violations.length, 2);
  });

  it('a false matchCondition skips the rule', () => {
    const rs = set(celRule('no-priv', { ...NO_PRIVILEGED, matchConditions: [{ name: 'not-system', expression: "!object.metadata.name.startsWith('system-')" }] }));
    const [v] = evaluate(rs, input(pod({ privileged: true, name: 'system-x' })));
    assert.equal(v?.result, 'skip');
    assert.match(v?.message ?? '', /matchCondition "not-system" is false/);
    assert.equal(decideAdmission(rs, input(pod({ privileged: true, name: 'system-x' }))).allowed, true);
  });

  it('sees request, oldObject and namespaceObject', () => {
    const rs = set(
      celRule('ctx', {
        expressions: [
          { expression: "request.userInfo.username != 'mallory'", message: 'not mallory' },
          { expression: "namespaceObject.metadata.labels.env == 'prod'", message: 'prod only' },
          { expression: "oldObject == null || oldObject.metadata.name == object.metadata.name", message: 'no rename' },
        ],
      }),
    );
    const ok = input(pod(), { namespace: 'default', namespaceLabels: { env: 'prod' }, request: { userInfo: { username: 'alice' } } });
    assert.equal(evaluate(rs, ok)[0]?.result, 'pass');
    const bad = input(pod(), { namespace: 'default', namespaceLabels: { env: 'dev' }, request: { userInfo: { username: 'mallory' } } });
    assert.deepEqual(evaluate(rs, bad)[0]?.violations.map((v) => v.message), ['not mallory', 'prod only']);
  });
});

describe('validate.cel errors follow failurePolicy and enforcement', () => {
  const outcomes = { Deny: { allowed: false, warned: false }, Warn: { allowed: true, warned: true }, Audit: { allowed: true, warned: false } };
  for (const enforcement of ['Deny', 'Warn', 'Audit'] as const) {
    it(`a runtime error is an error verdict; with Fail, ${enforcement} ${outcomes[enforcement].allowed ? 'admits' : 'denies'}; with Ignore it admits`, () => {
      const rs = set(celRule('broken', { expressions: [{ expression: 'object.spec.nope.size() == 0' }] }, { enforcement }));
      const [v] = evaluate(rs, input(pod()));
      assert.equal(v?.result, 'error');
      assert.match(v?.message ?? '', /rule broken could not be evaluated: validate.cel.expressions\[0\] failed: .*nope/);
      const d = decideAdmission(rs, input(pod()));
      assert.equal(d.allowed, outcomes[enforcement].allowed);
      assert.equal(d.warnings.length, outcomes[enforcement].warned ? 1 : 0);
      if (outcomes[enforcement].warned) assert.match(d.warnings[0] ?? '', /^rule broken could not be evaluated: /);
      const ignored = set(celRule('broken', { expressions: [{ expression: 'object.spec.nope.size() == 0' }] }, { enforcement, failurePolicy: 'Ignore' }));
      assert.equal(evaluate(ignored, input(pod()))[0]?.result, 'error', 'the audit still reports error');
      assert.deepEqual(decideAdmission(ignored, input(pod())), { allowed: true, warnings: [] });
    });
  }

  it('a cost overrun is an error verdict that denies', () => {
    const hundred = `[${Array.from({ length: 100 }, (_, i) => i).join(',')}]`;
    const rs = set(celRule('hostile', { expressions: [{ expression: `${hundred}.all(a, ${hundred}.all(b, ${hundred}.all(c, a + b + c >= 0)))` }] }));
    const [v] = evaluate(rs, input(pod()));
    assert.equal(v?.result, 'error');
    assert.match(v?.message ?? '', /cost limit/);
    assert.equal(decideAdmission(rs, input(pod())).allowed, false);
  });

  it('the request budget is shared: many heavy rules together exceed it', () => {
    // Each rule costs ~880k units: under the 1M per-call limit, but 12 of them exceed 10M.
    const list = `[${Array.from({ length: 330 }, (_, i) => i).join(',')}]`;
    const heavy = { expressions: [{ expression: `${list}.all(a, ${list}.all(b, a + b >= 0))` }] };
    const one = set(celRule('heavy-00', heavy));
    assert.equal(evaluate(one, input(pod()))[0]?.result, 'pass');
    const many = set(...Array.from({ length: 12 }, (_, i) => celRule(`heavy-${String(i).padStart(2, '0')}`, heavy)));
    const verdicts = evaluate(many, input(pod()));
    assert.equal(verdicts[0]?.result, 'pass');
    assert.equal(verdicts.at(-1)?.result, 'error');
    assert.match(verdicts.at(-1)?.message ?? '', /request's CEL cost budget/);
  });

  it('a compile error keeps the rule not ready with the position, and a never-compiled rule denies', () => {
    const rs = new RuleSet();
    const state = rs.upsert(celRule('typo', { expressions: [{ expression: 'object.spec.containers.all(c,\n  c.securityContext.privileged = false)' }] }));
    assert.equal(state.ready, false);
    assert.equal(state.reason, 'CompileError');
    assert.match(state.message, /spec\.validate\.cel\.expressions\[0\]\.expression: compilation failed: line 2, column \d+: /);
    const [v] = evaluate(rs, input(pod()));
    assert.equal(v?.result, 'error');
    assert.equal(decideAdmission(rs, input(pod())).allowed, false);
  });

  it('a bad new generation keeps the last good one in force', () => {
    const rs = new RuleSet();
    rs.upsert(celRule('r', NO_PRIVILEGED));
    const bad = { ...celRule('r', { expressions: [{ expression: 'variables.nope' }] }), metadata: { name: 'r', generation: 2 } };
    const state = rs.upsert(bad);
    assert.equal(state.ready, false);
    assert.match(state.message, /generation 1 stays in force: spec\.validate\.cel\.expressions\[0\]\.expression: compilation failed: line 1, column 1: undefined variable "variables.nope"/);
    assert.equal(evaluate(rs, input(pod({ privileged: true })))[0]?.result, 'fail');
  });

  it('validateRule reports unknown variables, type errors and authorizer with their positions', () => {
    const r = validateRule(
      celRule('bad', {
        variables: [{ name: 'x', expression: '1' }, { name: 'x', expression: '2' }],
        expressions: [{ expression: "object.metadata.name + 1 == 'a'" }, { expression: "authorizer.path('/').check('get').allowed()" }, { expression: 'true', messageExpression: 'nope' }],
      }),
    );
    assert.equal(r.ok, false);
    if (r.ok) return;
    assert.deepEqual(r.problems, ['spec.validate.cel.variables[1].name: "x" is declared twice; variable names must be unique']);
    const r2 = validateRule(
      celRule('bad', { expressions: [{ expression: "object.metadata.name + 1 == 'a'" }, { expression: "authorizer.path('/').check('get').allowed()" }, { expression: 'true', messageExpression: 'nope' }] }),
    );
    assert.equal(r2.ok, false);
    if (r2.ok) return;
    assert.equal(r2.problems.length, 3);
    assert.match(r2.problems[0] ?? '', /^spec\.validate\.cel\.expressions\[0\]\.expression: compilation failed: line 1, column 1: no such overload/);
    assert.match(r2.problems[1] ?? '', /^spec\.validate\.cel\.expressions\[1\]\.expression: compilation failed: line 1, column 1: `authorizer` is not supported/);
    assert.match(r2.problems[2] ?? '', /^spec\.validate\.cel\.expressions\[2\]\.messageExpression: compilation failed: line 1, column 1: Unknown variable: nope/);
  });

  it('a rule needs schema or cel', () => {
    const r = validateRule(clusterRule('empty', { validate: { message: 'x' } as RuleSpec['validate'] }));
    assert.equal(r.ok, false);
    if (!r.ok) assert.deepEqual(r.problems, ['spec.validate: give a schema, a cel block or both']);
  });
});

describe('validate.cel on pod templates (autogen)', () => {
  function workload(kind: string, group: string, path: readonly string[], privileged: boolean): KubeObject {
    const template = {
      metadata: { labels: { app: 'web' } },
      spec: { containers: [{ name: 'app', image: 'nginx', securityContext: { privileged } }] },
    };
    let node: Record<string, unknown> = template;
    for (const seg of [...path].reverse()) node = { [seg]: node };
    return { apiVersion: group ? `${group}/v1` : 'v1', kind, metadata: { name: 'w', namespace: 'default' }, ...node };
  }

  for (const k of POD_TEMPLATE_KINDS) {
    it(`a Pod rule checks the template of a ${k.kind} as a Pod, with the template path`, () => {
      const rs = set(
        celRule('no-priv', {
          ...NO_PRIVILEGED,
          matchConditions: [{ name: 'is-pod', expression: "object.kind == 'Pod' && object.metadata.labels.app == 'web'" }],
        }),
      );
      const bad = evaluate(rs, input(workload(k.kind, k.group, k.path, true)))[0];
      assert.equal(bad?.result, 'fail');
      assert.deepEqual(bad?.violations, [{ path: k.path.join('.'), message: 'privileged containers: app' }]);
      assert.equal(bad?.message, `no-priv: Privileged containers are not allowed. [${k.path.join('.')}: privileged containers: app]`);
      assert.equal(evaluate(rs, input(workload(k.kind, k.group, k.path, false)))[0]?.result, 'pass');
      assert.equal(decideAdmission(rs, input(workload(k.kind, k.group, k.path, true))).allowed, false);
    });
  }

  it('podTemplates: false opts out', () => {
    const rs = set(celRule('no-priv', NO_PRIVILEGED, { podTemplates: false }));
    assert.deepEqual(evaluate(rs, input(workload('Deployment', 'apps', ['spec', 'template'], true))), []);
  });
});
