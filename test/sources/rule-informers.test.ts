/** RuleInformerSource feeds both rule kinds and PortalExceptions into a real RuleSet, ready only after all three synced. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import YAML from 'yaml';
import { RuleInformerSource } from '../../src/sources/rule-informers.ts';
import { ruleKey } from '../../src/policy/rule-entry.ts';
import { RuleSet } from '../../src/policy/rule-set.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { apiServer, clientFor, until } from '../leader/cluster.ts';

const CRDS = ['portal.dev_portalclusterrules.yaml', 'portal.dev_portalrules.yaml', 'portal.dev_portalexceptions.yaml'].map((f) =>
  YAML.parse(readFileSync(new URL(`../../charts/portal/crds/${f}`, import.meta.url), 'utf8')),
);

const spec = { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, validate: { schema: { type: 'object' } } };

test('cluster and namespaced rules reach the rule set; deletes remove them', async (t) => {
  const api = await apiServer(t);
  const admin = clientFor(api, 'admin');
  for (const crd of CRDS) {
    await fetch(`${api.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${api.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify(crd),
    }).then(async (r) => assert.ok(r.ok, await r.text()));
  }
  await admin.customObjects.createClusterCustomObject({
    group: 'portal.dev', version: 'v1alpha1', plural: 'portalclusterrules',
    body: { apiVersion: 'portal.dev/v1alpha1', kind: 'PortalClusterRule', metadata: { name: 'c1' }, spec },
  });
  const rules = new RuleSet();
  const source = new RuleInformerSource(clientFor(api, 'w'), rules, silentLogger());
  const controller = new AbortController();
  const done = source.start(controller.signal);
  t.after(() => {
    controller.abort();
    return done;
  });
  await source.waitForSync();
  assert.equal(source.hasSynced(), true);
  assert.ok(rules.state(ruleKey({ kind: 'PortalClusterRule', metadata: { name: 'c1' } })));
  await admin.customObjects.createNamespacedCustomObject({
    group: 'portal.dev', version: 'v1alpha1', namespace: 'default', plural: 'portalrules',
    body: { apiVersion: 'portal.dev/v1alpha1', kind: 'PortalRule', metadata: { name: 'r1', namespace: 'default' }, spec },
  });
  const nsKey = ruleKey({ kind: 'PortalRule', metadata: { name: 'r1', namespace: 'default' } });
  await until('the namespaced rule', 2000, () => rules.state(nsKey) !== undefined);
  await admin.customObjects.deleteClusterCustomObject({ group: 'portal.dev', version: 'v1alpha1', plural: 'portalclusterrules', name: 'c1' });
  await until('the cluster rule to be removed', 2000, () => rules.size === 1);

  // PortalExceptions: added, validated by the RuleSet, removed on delete.
  await admin.customObjects.createNamespacedCustomObject({
    group: 'portal.dev', version: 'v1alpha1', namespace: 'default', plural: 'portalexceptions',
    body: { apiVersion: 'portal.dev/v1alpha1', kind: 'PortalException', metadata: { name: 'x1', namespace: 'default' }, spec: { rules: ['c1'], match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, reason: 'test' } },
  });
  await until('the exception', 2000, () => rules.exceptionState('PortalException/default/x1')?.valid === true);
  await admin.customObjects.deleteNamespacedCustomObject({ group: 'portal.dev', version: 'v1alpha1', namespace: 'default', plural: 'portalexceptions', name: 'x1' });
  await until('the exception to be removed', 2000, () => rules.exceptionCount === 0);
});
