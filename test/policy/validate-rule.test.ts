import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validateRule } from '../../src/policy/index.ts';
import { clusterRule, namespacedRule } from './support.ts';

function problems(obj: unknown): string[] {
  const r = validateRule(obj);
  assert.equal(r.ok, false, 'expected problems');
  return (r as { problems: string[] }).problems;
}

void describe('validateRule', () => {
  void it('accepts valid cluster and namespaced rules', () => {
    assert.equal(validateRule(clusterRule('ok')).ok, true);
    assert.equal(validateRule(namespacedRule('team-a', 'ok')).ok, true);
    const full = clusterRule('full', {
      enforcement: 'Warn',
      severity: 'critical',
      category: 'Pod Security',
      podTemplates: false,
      match: {
        operations: ['CREATE', 'UPDATE', 'DELETE'],
        namespaces: ['team-*', 'prod'],
        excludedNamespaces: ['kube-*'],
        namespaceSelector: { matchExpressions: [{ key: 'env', operator: 'In', values: ['prod'] }] },
        objectSelector: { matchLabels: { 'app.kubernetes.io/name': 'web' } },
      },
      audit: { actions: [{ type: 'label', key: 'portal.dev/violation', value: 'full' }, { type: 'annotate', key: 'portal.dev/why', value: 'any text: ok' }, { type: 'evict' }, { type: 'alert' }] },
    });
    assert.deepEqual(validateRule(full), { ok: true, rule: full });
  });
  void it('reports every problem at once', () => {
    const p = problems({ apiVersion: 'portal.dev/v1', kind: 'PortalRule', metadata: { name: 'Bad_Name' }, spec: { enforcment: 'Deny', match: { kinds: [] }, validate: {} } });
    assert.deepEqual(p, [
      'apiVersion: must be "portal.dev/v1alpha1" (got "portal.dev/v1")',
      'metadata.name "Bad_Name" is not a valid name: use lowercase letters, digits, "-" and ".", at most 253 characters',
      'metadata.namespace is required (a PortalRule is namespaced: set the namespace it applies to, or use a PortalClusterRule)',
      'spec.enforcment: unknown field; check its spelling against the PortalRule API',
      'spec.match.kinds: must NOT have fewer than 1 items',
      'spec.validate: give a schema, a cel block or both',
    ]);
  });
  void it('checks enums of the CRD', () => {
    const p = problems(clusterRule('r', { severity: 'urgent' as never, match: { operations: ['PATCH' as never] } }));
    assert.deepEqual(p, [
      'spec.severity: must be one of "critical", "high", "medium", "low", "info"',
      'spec.match.operations[0]: must be one of "CREATE", "UPDATE", "DELETE", "CONNECT"',
    ]);
  });
  void it('checks label/annotate actions, evict on non-Pod rules, selectors and globs', () => {
    const p = problems(
      clusterRule('r', {
        match: {
          kinds: [{ apiGroups: ['apps'], kinds: ['Deployment'] }],
          namespaces: ['te*am', 'Prod'],
          objectSelector: { matchLabels: { 'bad key!': 'x' }, matchExpressions: [{ key: 'a', operator: 'In' }, { key: 'b', operator: 'Exists', values: ['x'] }] },
        },
        audit: { actions: [{ type: 'label', key: 'portal.dev/v', value: 'not valid!' }, { type: 'annotate', value: 'x' }, { type: 'evict' }, { type: 'alert', key: 'k' }] },
      }),
    );
    assert.deepEqual(p, [
      'spec.match.namespaces[0]: "te*am": only a single trailing * is supported (a prefix glob such as "team-*")',
      'spec.match.namespaces[1]: "Prod": not a valid namespace name (lowercase letters, digits and "-", at most 63, starting and ending alphanumeric)',
      'spec.match.objectSelector.matchLabels: label key "bad key!": the name must be 1-63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric',
      'spec.match.objectSelector.matchExpressions[0]: operator In needs at least one entry in values',
      'spec.match.objectSelector.matchExpressions[1]: operator Exists takes no values; remove them',
      'spec.audit.actions[0].value: label value "not valid!": must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric (or empty)',
      'spec.audit.actions[1]: the annotate action needs a key',
      'spec.audit.actions[2]: evict only applies to Pods but the rule does not match Pods; list {apiGroups: [""], kinds: ["Pod"]} in match.kinds or use another action',
      'spec.audit.actions[3]: the alert action takes no key or value; remove them',
    ]);
  });
  void it('reports schemas that do not compile', () => {
    const p = problems(clusterRule('r', { validate: { schema: { properties: { a: { pattern: '(a)\\1' } } } } }));
    assert.equal(p.length, 1);
    assert.match(p[0] ?? '', /^spec.validate.schema: compilation failed: regular expression \/\(a\)\\1\/ is not valid: backreferences/);
  });
  void it('rejects non-objects', () => {
    assert.deepEqual(problems('rule'), ['a rule must be an object with apiVersion, kind, metadata and spec']);
    assert.deepEqual(problems(null), ['a rule must be an object with apiVersion, kind, metadata and spec']);
  });
});
