import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  compileSchema,
  evaluate,
  MAX_PATTERN_LENGTH,
  MAX_SCHEMA_BYTES,
  regexSafetyProblem,
  RuleSet,
} from '../../src/policy/index.ts';
import { clusterRule, input, pod } from './support.ts';

function compileError(schema: Record<string, unknown> | boolean): string {
  const r = compileSchema(schema);
  assert.equal(r.ok, false, `expected ${JSON.stringify(schema).slice(0, 80)} to be refused`);
  return (r as { error: string }).error;
}

void describe('regular expressions (RE2-like safe subset)', () => {
  const unsafe: [string, RegExp][] = [
    ['(a+)+$', /nested repetition/],
    ['^(a*)*b', /nested repetition/],
    ['(\\w+\\s?)*$', /nested repetition/],
    ['(a{1,3})+', /nested repetition/],
    ['(a+){2}', /nested repetition/],
    ['(a|a)*$', /same character/],
    ['^(a|ab)+$', /same character/],
    ['(\\d|[0-9a-f])+', /same character/],
    ['(a|)*', /empty branch/],
    ['\\d*\\d*x', /adjacent unbounded/],
    ['.*.*=', /adjacent unbounded/],
    ['(a)\\1', /backreferences/],
    ['(?<x>a)\\k<x>', /backreferences/],
    ['foo(?=bar)', /lookaround/],
    ['(?<!x)y', /lookaround/],
    ['a{1,5000}', /above 1000/],
    ['x'.repeat(MAX_PATTERN_LENGTH + 1), /characters long/],
  ];
  for (const [pattern, why] of unsafe) {
    void it(`rejects /${pattern.slice(0, 30)}/`, () => {
      assert.match(regexSafetyProblem(pattern) ?? 'accepted', why);
    });
  }
  const safe = [
    '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$',
    '^(runtime/default|localhost/.+)$',
    '^(RuntimeDefault|Localhost)$',
    '^[^:]+:(?!latest$)'.replace('(?!latest$)', ''),
    '^(AUDIT_WRITE|CHOWN|DAC_OVERRIDE|FOWNER|FSETID|KILL|MKNOD|NET_BIND_SERVICE|SETFCAP|SETGID|SETPCAP|SETUID|SYS_CHROOT)$',
    '^container\\.apparmor\\.security\\.beta\\.kubernetes\\.io/',
    '^\\d{1,3}(\\.\\d{1,3}){3}$',
    '^([a-z]|[0-9])+$',
    '\\p{L}+',
  ];
  for (const pattern of safe) {
    void it(`accepts /${pattern.slice(0, 40)}/`, () => assert.equal(regexSafetyProblem(pattern), undefined));
  }
  void it('refuses a catastrophic pattern in a schema and in patternProperties', () => {
    assert.match(compileError({ properties: { name: { type: 'string', pattern: '^(a+)+$' } } }), /unsafe regular expression .*nested repetition/);
    assert.match(compileError({ patternProperties: { '(x|x)*': { type: 'string' } } }), /unsafe regular expression/);
  });
  void it('accepted patterns stay fast on adversarial input', () => {
    const r = compileSchema({ type: 'string', pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' });
    assert.ok(r.ok);
    const hostile = `${'a-'.repeat(50_000)}!`;
    const started = performance.now();
    assert.equal(r.validate(hostile).length, 1);
    // Linear here: ~1 ms. A catastrophic pattern would take far longer than a second.
    assert.ok(performance.now() - started < 1000);
  });
  void it('a safe pattern compiles and validates', () => {
    const r = compileSchema({ properties: { name: { type: 'string', pattern: '^[a-z]+$' } } });
    assert.ok(r.ok);
    assert.deepEqual(r.validate({ name: 'abc' }), []);
    assert.deepEqual(r.validate({ name: 'A' }), [{ path: 'name', message: 'must match pattern "^[a-z]+$"' }]);
  });
});

void describe('hostile schemas', () => {
  void it('rejects a schema over the size limit', () => {
    const big = { enum: Array.from({ length: 8000 }, (_, i) => `value-${i}`) };
    assert.ok(JSON.stringify(big).length > MAX_SCHEMA_BYTES);
    assert.match(compileError(big), /bytes serialized, more than the 65536 allowed/);
  });
  void it('rejects a schema nested too deep', () => {
    let s: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 40; i++) s = { properties: { a: s } };
    assert.match(compileError(s), /nests deeper than 32/);
  });
  void it('rejects unknown keywords (strict mode), so a typo cannot switch a check off', () => {
    assert.match(compileError({ properties: { a: { constt: false } } }), /does not compile: strict mode: unknown keyword: "constt"/);
  });
  void it('rejects unknown formats', () => {
    assert.match(compileError({ type: 'string', format: 'no-such-format' }), /unknown format "no-such-format"/);
  });
  void it('rejects $id and remote references', () => {
    assert.match(compileError({ $id: 'https://example.com/x', type: 'object' }), /uses "\$id"/);
    assert.match(compileError({ $ref: 'https://example.com/other.json' }), /does not compile: can't resolve reference/);
  });
  void it('accepts local $defs references', () => {
    const r = compileSchema({ $defs: { f: { const: false } }, properties: { a: { $ref: '#/$defs/f' } } });
    assert.ok(r.ok);
    assert.equal(r.validate({ a: true }).length, 1);
  });
});

void describe('compile once, last good version, never compiled', () => {
  const bad = { properties: { spec: { typo: true } } };
  void it('recompiles only on a new generation or spec', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('r'));
    const rev = rs.revision;
    rs.upsert(clusterRule('r'));
    assert.equal(rs.revision, rev, 'same generation and spec: no change');
    rs.upsert(clusterRule('r', { enforcement: 'Warn' }, 2));
    assert.equal(rs.revision, rev + 1);
    assert.equal(rs.state('PortalClusterRule/r')?.enforcement, 'Warn');
  });
  void it('keeps the last good version when a new one fails, and says why', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('r', {}, 1));
    const state = rs.upsert(clusterRule('r', { validate: { schema: bad } }, 2));
    assert.equal(state.ready, false);
    assert.equal(state.reason, 'CompileError');
    assert.equal(state.generation, 2);
    assert.equal(state.compiledGeneration, 1);
    assert.match(state.message, /generation 2 rejected, generation 1 stays in force: .*unknown keyword: "typo"/);
    const [v] = evaluate(rs, input(pod({ privileged: true })));
    assert.equal(v?.result, 'fail', 'generation 1 still enforces');
    // A later good version recovers.
    assert.equal(rs.upsert(clusterRule('r', {}, 3)).ready, true);
  });
  void it('a rule that never compiled gives error for what it matches', () => {
    const rs = new RuleSet();
    const state = rs.upsert(clusterRule('broken', { validate: { message: 'x', schema: bad } }));
    assert.equal(state.ready, false);
    assert.equal(state.compiledGeneration, undefined);
    const [v] = evaluate(rs, input(pod()));
    assert.equal(v?.result, 'error');
    assert.match(v?.message ?? '', /^rule broken could not be evaluated: it has never compiled: validate.schema does not compile/);
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'default' } };
    assert.deepEqual(evaluate(rs, input(cm)), [], 'still only what it matches');
  });
  void it('an invalid rule (not just its schema) that never compiled also fails closed', () => {
    const rs = new RuleSet();
    const rule = clusterRule('r', { enforcement: 'Block' as never });
    const state = rs.upsert(rule);
    assert.match(state.message, /invalid rule: spec.enforcement: must be one of "Deny", "Warn", "Audit"/);
    assert.equal(evaluate(rs, input(pod()))[0]?.result, 'error');
  });
  void it('remove() drops a rule and bumps the revision', () => {
    const rs = new RuleSet();
    rs.upsert(clusterRule('r'));
    const rev = rs.revision;
    assert.equal(rs.remove('PortalClusterRule/r'), true);
    assert.equal(rs.remove('PortalClusterRule/r'), false);
    assert.equal(rs.revision, rev + 1);
    assert.equal(rs.size, 0);
    assert.deepEqual(evaluate(rs, input(pod({ privileged: true }))), []);
  });
});
