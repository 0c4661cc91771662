import assert from 'node:assert/strict';
import { chmod, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { stringify } from 'yaml';
import { readManifests } from '../../src/config/manifests.ts';
import { loadRulesFromDirectory } from '../../src/sources/rule-files.ts';
import { tempDir } from '../support/temp-dir.ts';
import { clusterRule, namespacedRule } from './support.ts';

const tmp = tempDir('portal-manifests-');
const write = tmp.write;

void describe('readManifests', () => {
  void it('reads multi-document YAML, JSON objects, arrays and Lists, recursively', async () => {
    const root = join(tmp.path, 'tree');
    await write('tree/a.yaml', 'kind: A\nmetadata: {name: a1}\n---\n# empty document next\n---\nkind: A\nmetadata: {name: a2}\n');
    await write('tree/sub/b.json', JSON.stringify({ kind: 'List', apiVersion: 'v1', items: [{ kind: 'B', metadata: { name: 'b1' } }, { kind: 'B', metadata: { name: 'b2' } }] }));
    await write('tree/sub/deeper/c.yml', 'kind: C\n');
    await write('tree/sub/d.json', JSON.stringify([{ kind: 'D' }]));
    await write('tree/notes.txt', 'ignored: true');
    const r = await readManifests([root]);
    assert.deepEqual(r.errors, []);
    assert.deepEqual(
      r.documents.map((d) => [d.source.slice(root.length + 1), d.index, d.object['kind']]),
      [
        ['a.yaml', 0, 'A'],
        ['a.yaml', 1, 'A'],
        ['sub/b.json', 0, 'B'],
        ['sub/b.json', 1, 'B'],
        ['sub/d.json', 0, 'D'],
        ['sub/deeper/c.yml', 0, 'C'],
      ],
    );
  });
  void it('reports bad YAML with its line, and keeps the good documents', async () => {
    const file = await write('bad.yaml', 'kind: Good\n---\nkind: Bad\nspec: [1, 2\n---\nkind: AlsoGood\n');
    const r = await readManifests([file]);
    assert.deepEqual(r.documents.map((d) => d.object['kind']), ['Good', 'AlsoGood']);
    assert.equal(r.errors.length, 1);
    assert.equal(r.errors[0]?.source, file);
    assert.match(r.errors[0]?.message ?? '', /^invalid YAML at line 5, column 1: /);
  });
  void it('reports bad JSON with its line', async () => {
    const file = await write('bad.json', '{\n  "kind": "X",\n  "spec": {\n    "a": \n  }\n}\n');
    const r = await readManifests([file]);
    assert.equal(r.documents.length, 0);
    assert.equal(r.errors[0]?.message, "invalid JSON at line 5, column 3: Unexpected token '}'");
    const truncated = await write('truncated.json', '{"kind": "X", "items": [1, 2');
    assert.equal((await readManifests([truncated])).errors[0]?.message, 'invalid JSON at line 1, column 29: unexpected end of input');
  });
  void it('reports missing and unreadable paths, scalars and empty directories', async () => {
    const missing = join(tmp.path, 'nope.yaml');
    const locked = await write('locked.yaml', 'kind: X\n');
    await chmod(locked, 0o000);
    const scalar = await write('scalar.yaml', 'just a string\n');
    await mkdir(join(tmp.path, 'empty'));
    const r = await readManifests([missing, locked, scalar, join(tmp.path, 'empty')]);
    const messages = r.errors.map((e) => `${e.source.slice(tmp.path.length + 1)}: ${e.message}`);
    // root can read a 000 file: then it parses fine; anyone else gets "permission denied".
    const lockedReadable = r.documents.some((d) => d.source === locked);
    assert.deepEqual(messages, [
      'nope.yaml: cannot read: no such file or directory',
      ...(lockedReadable ? [] : ['locked.yaml: cannot read: permission denied']),
      'scalar.yaml: document 1 is a string, not a Kubernetes object',
      'empty: directory holds no .yaml, .yml or .json files',
    ]);
  });
});

void describe('loadRulesFromDirectory', () => {
  void it('returns valid rules and reports invalid ones, unknown kinds and duplicates', async () => {
    const root = join(tmp.path, 'policies');
    await write('policies/good.yaml', [clusterRule('a'), namespacedRule('team', 'b')].map((r) => stringify(r)).join('---\n'));
    await write('policies/zz-dup.yaml', stringify(clusterRule('a')));
    await write('policies/invalid.yaml', stringify({ ...clusterRule('c'), spec: { match: { kinds: [] }, validate: { schema: {} } } }));
    await write('policies/other.yaml', 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n');
    const r = await loadRulesFromDirectory(root);
    assert.deepEqual(r.rules.map((x) => `${x.kind}/${x.metadata.name}`), ['PortalClusterRule/a', 'PortalRule/b']);
    const messages = r.errors.map((e) => `${e.source.slice(root.length + 1)}: ${e.message}`);
    assert.deepEqual(messages, [
      'invalid.yaml: PortalClusterRule "c" is invalid:\n  - spec.match.kinds: must NOT have fewer than 1 items',
      'other.yaml: ConfigMap "x": unexpected kind; a policy directory holds PortalRule, PortalClusterRule, PortalException, ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding objects, and the param objects of a policy\'s paramKind',
      `zz-dup.yaml: PortalClusterRule "a": duplicate of the rule already defined in ${join(root, 'good.yaml')}; rule names must be unique`,
    ]);
  });
});
