import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  compileSchema,
  evaluate,
  MAX_SCHEMA_BYTES,
  RuleSet,
} from '../../src/policy/index.ts';
import { clusterRule, input, pod } from './support.ts';

function compileError(schema: Record<string, unknown> | boolean): string {
  const r = compileSchema(schema);
  assert.equal(r.ok, false, `expected ${JSON.stringify(schema).slice(0, 80)} to be refused`);
  return (r as { error: string }).error;
}

void describe('regular expressions (RE2 semantics)', () => {
  const refused: [string, RegExp][] = [
    ['(a)\\1', /backreferences .* not supported \(RE2/],
    ['(?<x>a)\\k<x>', /backreferences/],
    ['foo(?=bar)', /lookahead and lookbehind .* not supported/],
    ['(?<!x)y', /lookahead and lookbehind/],
    ['a{1,5000}', /invalid repeat count/],
    ['([unclosed', /missing closing \]/],
    [Array.from({ length: 5 }, () => '.{1000}').join(''), /compiles to \d+ instructions, more than the 2000 allowed/],
  ];
  for (const [pattern, why] of refused) {
    void it(`refuses /${pattern.slice(0, 30)}/ with a clear compile error`, () => {
      assert.match(compileError({ properties: { name: { type: 'string', pattern } } }), why);
      assert.match(compileError({ patternProperties: { [pattern]: { type: 'string' } } }), why);
    });
  }
  const accepted: [string, string, string][] = [
    // [pattern, a value it matches, a value it does not]
    ['^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', 'web-1', '-web'],
    ['^(runtime/default|localhost/.+)$', 'localhost/p', 'runtime/x'],
    ['^(a+)+$', 'aaaa', 'aaab'],
    ['^.*a.*a.*a.*a.*b$', 'aaaab', 'aaaa'],
    ['^\\d{1,3}(\\.\\d{1,3}){3}$', '10.0.0.1', '10.0.0'],
    // JSON Schema authors write ECMAScript escapes; RE2 spells them \x{...}.
    ['^caf\\u00e9$', 'café', 'cafe'],
    ['^\\uD83D\\uDE00$', '😀', ':)'],
    ['^\\u{1F600}$', '😀', ':)'],
    // Unicode flag semantics: "." is one code point, \p classes work.
    ['^.$', '😀', 'ab'],
    ['^\\p{L}+$', 'Ωmega', 'x1'],
    ['^(?<name>[a-z]+)$', 'abc', 'ABC'],
  ];
  for (const [pattern, yes, no] of accepted) {
    void it(`/${pattern}/ compiles and matches like JSON Schema's pattern`, () => {
      const r = compileSchema({ type: 'string', pattern });
      assert.ok(r.ok, (r as { error?: string }).error);
      assert.deepEqual(r.validate(yes), [], `${yes} matches`);
      assert.equal(r.validate(no).length, 1, `${no} does not match`);
      const p = compileSchema({ type: 'object', patternProperties: { [pattern]: { type: 'integer' } } });
      assert.ok(p.ok);
      assert.equal(p.validate({ [yes]: 'x' }).length, 1, 'patternProperties applies to a matching key');
      assert.deepEqual(p.validate({ [no]: 'x' }), [], 'and not to another');
    });
  }
  void it('two schemas with different patterns do not share a compiled pattern', () => {
    const a = compileSchema({ type: 'string', pattern: '^a$' });
    const b = compileSchema({ type: 'string', pattern: '^b$' });
    assert.ok(a.ok && b.ok);
    assert.deepEqual(a.validate('a'), []);
    assert.deepEqual(b.validate('b'), []);
    assert.equal(b.validate('a').length, 1);
  });
  void it('a match over the per-test cost budget is an error, not a stall', () => {
    const r = compileSchema({ type: 'string', pattern: '[a-z]{1000}x' });
    assert.ok(r.ok);
    assert.throws(() => r.validate('a'.repeat(1 << 20)), /exceeds the matching budget/);
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
    assert.match(compileError({ properties: { a: { constt: false } } }), /compilation failed: strict mode: unknown keyword: "constt"/);
  });
  void it('rejects unknown formats', () => {
    assert.match(compileError({ type: 'string', format: 'no-such-format' }), /unknown format "no-such-format"/);
  });
  void it('rejects $id and remote references', () => {
    assert.match(compileError({ $id: 'https://example.com/x', type: 'object' }), /uses "\$id"/);
    assert.match(compileError({ $ref: 'https://example.com/other.json' }), /compilation failed: can't resolve reference/);
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
    assert.match(v?.message ?? '', /^rule broken could not be evaluated: it has never compiled: validate.schema: compilation failed/);
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
