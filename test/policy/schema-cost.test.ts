/**
 * The cost estimate of rule schemas (schema-cost.ts): keywords × the values
 * they can apply to. Every shipped rule, and every rule of the test
 * fixtures and docs, is within the bound; the figures the docs and the
 * bound's comment quote are checked here.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { MAX_ELEMENTS, MAX_SCHEMA_COST, schemaCost, schemaExpandedSize } from '../../src/policy/index.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

function ruleSchemas(dir: string): { file: string; schema: unknown }[] {
  const out: { file: string; schema: unknown }[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...ruleSchemas(path));
    else if (/\.ya?ml$/.test(name)) {
      for (const doc of parseAllDocuments(readFileSync(path, 'utf8'))) {
        const o = doc.toJS() as { kind?: string; spec?: { validate?: { schema?: unknown } } } | null;
        const schema = o?.spec?.validate?.schema;
        if (schema !== undefined && (o?.kind === 'PortalRule' || o?.kind === 'PortalClusterRule')) out.push({ file: path.slice(ROOT.length), schema });
      }
    }
  }
  return out;
}

describe('schema cost estimate', () => {
  it('every shipped rule and fixture is within the bound; the largest is disallow-host-probes at 2.4e8', () => {
    const all = [...ruleSchemas(join(ROOT, 'policies')), ...ruleSchemas(join(ROOT, 'test/fixtures'))];
    assert.ok(all.length >= 22, `found ${all.length}`);
    let max = { file: '', cost: 0 };
    for (const { file, schema } of all) {
      const { cost } = schemaCost(schema);
      assert.ok(cost <= MAX_SCHEMA_COST, `${file}: ${cost}`);
      if (cost > max.cost) max = { file, cost };
    }
    assert.equal(max.file, 'policies/pod-security/disallow-host-probes.yaml');
    assert.ok(max.cost > 2e8 && max.cost < 2.5e8 && MAX_SCHEMA_COST / max.cost > 4, String(max.cost));
  });

  it('counts a keyword once per value it applies to: properties once, items per element, nested items not squared', () => {
    assert.equal(schemaCost({ properties: { a: { minLength: 1 } } }).cost, 2);
    const items = schemaCost({ items: { minLength: 1 } });
    assert.equal(items.cost, 1 + MAX_ELEMENTS);
    assert.deepEqual(items.heaviest, { path: '[]', cost: MAX_ELEMENTS, keywords: 1, values: MAX_ELEMENTS });
    // All elements of all lists of one object together fit in it: nested lists do not multiply past that.
    assert.equal(schemaCost({ items: { items: { minLength: 1 } } }).cost, 1 + 2 * MAX_ELEMENTS);
    // maxItems lowers the count, and nested bounded lists multiply.
    assert.equal(schemaCost({ maxItems: 10, items: { maxItems: 3, items: { minLength: 1 } } }).cost, 2 + 20 + 30);
    // A $ref counts at each reference.
    assert.equal(schemaCost({ $defs: { d: { minLength: 1 } }, properties: { a: { $ref: '#/$defs/d' }, b: { $ref: '#/$defs/d' } } }).cost, 2 + 2 * 2);
    // A recursive type counts its keywords once at every value.
    const tree = { type: 'object', properties: { children: { type: 'array', items: { $ref: '#' } } } };
    assert.ok(schemaCost(tree).cost <= schemaExpandedSize(tree) * MAX_ELEMENTS + MAX_ELEMENTS * 2);
  });
});
