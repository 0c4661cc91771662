/**
 * What the main thread sends with a rule to the thread that checks it
 * (src/policy/rule-check.ts): the schemas of the custom kinds its type check
 * reads, none it does not (built-in kinds are in every thread; a `*` or more
 * than MAX_CHECKED_KINDS pairs is not checked), and nothing from an object
 * no one has validated yet that it cannot read. Sent as text, they answer as
 * the main thread's source does.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { builtinSchemas, layered } from '../../src/policy/kind-schemas/catalogue.ts';
import { CrdSchemaStore } from '../../src/policy/kind-schemas/crd-schemas.ts';
import { checkRuleReview, kindSchemaText, schemasToSend } from '../../src/policy/rule-check.ts';
import { validateRuleKind } from '../../src/policy/portal-kinds.ts';
import { MAX_CHECKED_KINDS } from '../../src/policy/type-check.ts';

const CRD_FILE = join(import.meta.dirname, '..', '..', 'charts', 'portal', 'crds', 'portal.dev_portalclusterrules.yaml');
const store = new CrdSchemaStore();
store.set('portalclusterrules.portal.dev', parseYaml(readFileSync(CRD_FILE, 'utf8')) as unknown);
const schemas = layered(builtinSchemas(), store);

const rule = (kinds: unknown, expression = 'object.spec.enforcment == "Deny"'): Record<string, unknown> => ({
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalClusterRule',
  metadata: { name: 'r' },
  spec: { enforcement: 'Deny', match: { kinds }, validate: { cel: { expressions: [{ expression }] } } },
});

describe('the schemas sent with a rule', () => {
  it('the custom kinds it matches, not the built-in ones', () => {
    const sent = schemasToSend(rule([{ apiGroups: ['portal.dev', 'apps'], kinds: ['PortalClusterRule', 'Deployment'] }]), schemas);
    assert.deepEqual(sent.map((s) => `${s.group}/${s.version}/${s.kind}`), ['portal.dev/v1alpha1/PortalClusterRule']);
  });

  it('none for a wildcard, past the bound, or an object it cannot read', () => {
    assert.deepEqual(schemasToSend(rule([{ apiGroups: ['portal.dev'], kinds: ['PortalClusterRule'] }, { apiGroups: ['*'], kinds: ['Pod'] }]), schemas), []);
    const many = Array.from({ length: MAX_CHECKED_KINDS }, (_, i) => `Kind${i}`);
    assert.deepEqual(schemasToSend(rule([{ apiGroups: ['portal.dev'], kinds: ['PortalClusterRule', ...many] }]), schemas), []);
    for (const odd of [null, 'x', [{ apiGroups: 'portal.dev', kinds: ['PortalClusterRule'] }], [7]]) assert.deepEqual(schemasToSend(rule(odd), schemas), []);
    assert.deepEqual(schemasToSend(null, schemas), []);
  });

  it('as text, they give the answer the main thread gives', () => {
    const object = rule([{ apiGroups: ['portal.dev'], kinds: ['PortalClusterRule'] }]);
    const review = JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u', kind: { group: 'portal.dev', version: 'v1alpha1', kind: 'PortalClusterRule' }, name: 'r', operation: 'CREATE', object } });
    const texts = schemasToSend(object, schemas).map(kindSchemaText);
    assert.deepEqual(checkRuleReview(review, texts), validateRuleKind(object, schemas));
    assert.equal(checkRuleReview(review, texts).ok, false, 'the typo is found against the CRD sent');
    // Without them the kind is unknown on the thread: the check is not done, and the rule passes.
    assert.equal(checkRuleReview(review, []).ok, true);
  });
});
