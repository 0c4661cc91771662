/**
 * The YAML composer's linear duplicate-key check and the run's input budget
 * (issue 31): the same answers as yaml's own quadratic check, and a budget
 * that names the file and the count it crossed before any node is built.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseYamlDocuments } from '../../src/config/yaml.ts';
import { InputBudget } from '../../src/config/input-budget.ts';

describe('duplicate keys', () => {
  it('reports the first repeated key of any map, at its line, as yaml did', () => {
    assert.deepEqual(parseYamlDocuments('a: 1\nb:\n  c: 1\n  d: 2\n  c: 3\na: 2\n'), [{ ok: false, message: 'invalid YAML at line 5, column 3: Map keys must be unique' }]);
    assert.deepEqual(parseYamlDocuments('l:\n- {x: 1, x: 2}\n'), [{ ok: false, message: 'invalid YAML at line 2, column 10: Map keys must be unique' }]);
    // Scalars compare by value and type: 1 and "1" are different keys; a later document is checked on its own.
    assert.deepEqual(parseYamlDocuments('1: a\n"1": b\n---\na: 1\n'), [
      { ok: true, value: { 1: 'b' } },
      { ok: true, value: { a: 1 } },
    ]);
  });

  it('40,000 distinct keys compose, and one repeated at the end is found', () => {
    const keys = Array.from({ length: 40_000 }, (_, i) => `k${i}: ${i}`);
    const [ok] = parseYamlDocuments(keys.join('\n'));
    assert.equal(ok?.ok, true);
    assert.equal(Object.keys((ok as { value: object }).value).length, 40_000);
    assert.deepEqual(parseYamlDocuments([...keys, 'k7: again'].join('\n')), [{ ok: false, message: 'invalid YAML at line 40001, column 1: Map keys must be unique' }]);
  });
});

describe('the input budget', () => {
  it('counts keys and documents across texts and refuses the one that crosses, naming the count', () => {
    const budget = new InputBudget({ maxBytes: 1000, maxDocuments: 3, maxKeys: 5 });
    assert.equal(parseYamlDocuments('a: 1\nb: {c: 2}\n', budget.allowance())[0]?.ok, true);
    assert.equal(budget.crossed, false);
    const [refused] = parseYamlDocuments('d: 1\ne: 2\nf: 3\n', budget.allowance());
    assert.equal(refused?.ok, false);
    assert.match((refused as { message: string }).message, /^holds more than 2 map keys \(after 3 in the files before it\), over what all inputs of one run may hold together \(0\.0 MiB, 3 documents, 5 map keys\)/);
    assert.equal(budget.crossed, true);
  });

  it('documents and bytes', () => {
    const docs = new InputBudget({ maxBytes: 1000, maxDocuments: 2, maxKeys: 100 });
    const [refused] = parseYamlDocuments('a: 1\n---\nb: 1\n---\nc: 1\n', docs.allowance());
    assert.match((refused as { message: string }).message, /^holds more than 2 YAML documents \(after 0 in the files before it\)/);
    const bytes = new InputBudget({ maxBytes: 2 * 1024 * 1024, maxDocuments: 2, maxKeys: 100 });
    assert.equal(bytes.chargeBytes(1024 * 1024), undefined);
    assert.match(bytes.chargeBytes(1024 * 1024 + 1) ?? '', /^brings the files read to 2\.0 MiB, over what all inputs/);
  });
});

describe('the input budget: the count of plain lines before the lexer', () => {
  const refusal = (text: string, limits: { keys: number; documents: number }): string | undefined => {
    const [first] = parseYamlDocuments(text, new InputBudget({ maxBytes: 1 << 30, maxDocuments: limits.documents, maxKeys: limits.keys }).allowance());
    return first?.ok === false ? first.message : undefined;
  };

  it('refuses a map of plain keys past the budget with the message the lexer gives', () => {
    const text = Array.from({ length: 50 }, (_, i) => `k${i}: v${i}`).join('\n');
    assert.match(refusal(text, { keys: 10, documents: 10 }) ?? '', /^holds more than 10 map keys \(after 0 in the files before it\)/);
    // Documents: a first one before `---`, then one per `---`.
    assert.match(refusal('a: 1\n---\nb: 1\n---\nc: 1\n', { keys: 100, documents: 2 }) ?? '', /^holds more than 2 YAML documents/);
  });

  it('never counts what only looks like a key: block scalars, quoted scalars, comments', () => {
    const lines = (n: number): string => Array.from({ length: n }, (_, i) => `  k${i}: v`).join('\n');
    // Each text holds 2 keys however many key-like lines follow; a budget of 3 keys admits them all.
    for (const text of [
      `a: |\n${lines(20)}\nb: 1\n`,
      `a: >-\n${lines(20)}\nb: 1\n`,
      `a: "x\n${lines(20)}\n  y"\nb: 1\n`,
      `a: 'x\n${lines(20)}\n  y'\nb: 1\n`,
      `# c: 1\n#${lines(20).replace(/\n/g, '\n#')}\na: 1\nb: 2\n`,
      `--- |\n${lines(20).replace(/^ {2}/gm, '')}\n---\na: 1\nb: 2\n`,
    ]) {
      assert.equal(refusal(text, { keys: 3, documents: 3 }), undefined, text.slice(0, 40));
    }
    // Past the budget, the lexer still refuses what the plain count stopped short of.
    assert.match(refusal(`a: "x"\n${lines(20)}\n`, { keys: 3, documents: 3 }) ?? '', /^holds more than 3 map keys/);
  });
});
