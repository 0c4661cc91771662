/**
 * CEL is compiled to JavaScript source (src/policy/cel/codegen.ts) from
 * rule text a tenant writes: that text must never become code. Strings,
 * field names (escaped or not), map keys and comprehension variable names
 * that try to close the generated string or comment, or to call into the
 * process, evaluate as the CEL values they are, as cel-js's own
 * evaluation gives them, and leave no trace outside string literals of the
 * generated source.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compile, evaluate, type Program } from '../../src/policy/cel/index.ts';
import { interpreted } from '../../src/policy/cel/engine.ts';

const CANARY = '__portalInjected';
const PAYLOADS = [
  `"); globalThis.${CANARY} = 1; ("`,
  `'); globalThis.${CANARY} = 1; ('`,
  `\`; globalThis.${CANARY} = 1; \``,
  `\${globalThis.${CANARY} = 1}`,
  `*/ globalThis.${CANARY} = 1; /*`,
  `\\"); globalThis.${CANARY} = 1; //`,
  `\u2028globalThis.${CANARY} = 1;\u2029`,
  `</script>\n}; globalThis.${CANARY} = 1; function x() {`,
  `\ud800"); globalThis.${CANARY} = 1; ("`,
];

/** A CEL string literal holding `s` (the parser sees exactly `s`). */
function celString(s: string): string {
  return `"${[...s].map((c) => (c === '"' || c === '\\' ? `\\${c}` : c === '\n' ? '\\n' : c)).join('')}"`;
}

function program(expr: string): Program {
  const p = compile(expr, { resultType: 'any' });
  if (!p.ok) assert.fail(`${expr}: ${p.message}`);
  return p;
}

/** The generated source without its JSON string literals. */
function code(source: string): string {
  return source.replace(/"(?:[^"\\\n]|\\.)*"/g, '""');
}

function check(expr: string, object: unknown): void {
  delete (globalThis as Record<string, unknown>)[CANARY];
  const p = program(expr);
  assert.equal(p.fallback, undefined, `${expr} is compiled`);
  assert.ok(p.source !== undefined);
  assert.ok(!code(p.source).includes(CANARY), `the payload of ${JSON.stringify(expr)} is outside a string literal:\n${p.source}`);
  const got = evaluate(p, { object });
  const reference = evaluate(interpreted(p), { object });
  assert.deepEqual(got.ok ? got.value : got.message, reference.ok ? reference.value : reference.message, expr);
  assert.equal((globalThis as Record<string, unknown>)[CANARY], undefined, `${expr} ran injected code`);
}

describe('CEL compiled to JavaScript: rule text never becomes code', () => {
  it('string literals', () => {
    for (const s of PAYLOADS) {
      check(`${celString(s)} == object.s`, { s });
      check(`object.s + ${celString(s)}`, { s: 'x' });
      check(`[${celString(s)}, 'b'].exists(x, x == object.s)`, { s });
      check(`object.s in [${celString(s)}, 'b']`, { s });
      check(`object.s.startsWith(${celString(s)})`, { s });
      check(`{${celString(s)}: 1}[object.s]`, { s });
    }
  });

  it('field names, quoted and Kubernetes-escaped', () => {
    for (const s of PAYLOADS) {
      check(`object[${celString(s)}]`, { [s]: 'v' });
      check(`object[?${celString(s)}].orValue('none')`, { [s]: 'v' });
      check(`has(object.m) && object.m[${celString(s)}] == 1`, { m: { [s]: 1 } });
    }
    // __dash__ and __dot__ unescape to characters that are not identifiers.
    check('object.a__dash__b__dot__c + object.?x__slash__y.orValue("none")', { 'a-b.c': 'v' });
    check('has(object.a__dash__b) && object.?a__dash__b.?c.orValue(1) == 1', { 'a-b': { c: 1 } });
  });

  it('identifiers that are JavaScript keywords or the generated code\'s own names', () => {
    for (const name of ['constructor', '__proto__', 'prototype', 'm', 'R', 'K', 'ctx', 't0', 'eval', 'Function', 'this', 'arguments', 'return', 'await']) {
      const field = /^[a-z_][a-z0-9_]*$/i.test(name) && !['return', 'this'].includes(name) ? name : undefined;
      if (field !== undefined) {
        check(`object.?${field}.orValue('absent')`, { [name]: 'v' });
        check(`has(object.${field})`, { [name]: 'v' });
        // cel-js refuses some names as variables (`__proto__`): those cannot reach the generator.
        const loop = `[1, 2].all(${field}, ${field} > 0)`;
        if (compile(loop).ok) check(loop, {});
      }
    }
  });

  it('deeply nested and long expressions stay bounded in generated size', () => {
    const chain = Array.from({ length: 400 }, (_, i) => `object.a == ${i}`).join(' || ');
    const p = program(chain);
    assert.equal(p.fallback, undefined);
    assert.ok((p.source?.length ?? 0) < 200 * chain.length, `generated ${p.source?.length} characters for ${chain.length}`);
    const r = evaluate(p, { object: { a: 399 } });
    assert.deepEqual(r.ok && r.value, true);
  });
});
