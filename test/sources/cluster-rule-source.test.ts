/**
 * ClusterRuleSource logs what the RuleSet made of a rule version once: a
 * status update by the leader (or a relist) changes nothing the RuleSet holds
 * and is not logged again with every replica's "rule in force" (issue 21).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import YAML from 'yaml';
import { ClusterRuleSource } from '../../src/sources/cluster-rule-source.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { apiServer, clientFor, until } from '../leader/cluster.ts';

const CRDS = ['portal.dev_portalclusterrules.yaml', 'portal.dev_portalrules.yaml', 'portal.dev_portalexceptions.yaml'].map((f) =>
  YAML.parse(readFileSync(new URL(`../../charts/portal/crds/${f}`, import.meta.url), 'utf8')),
);

const spec = (type: string) => ({ match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, validate: { schema: { type } } });

test('a rule is logged in force once per version, not again for a status update', async (t) => {
  const api = await apiServer(t);
  const admin = clientFor(api, 'admin');
  const call = async (method: string, path: string, body: unknown, type = 'application/json') => {
    const r = await fetch(`${api.url}${path}`, { method, headers: { authorization: `Bearer ${api.adminToken}`, 'content-type': type }, body: JSON.stringify(body) });
    const text = await r.text();
    assert.ok(r.ok, text);
    return JSON.parse(text) as { metadata: { resourceVersion: string } };
  };
  for (const crd of CRDS) await call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
  await admin.customObjects.createClusterCustomObject({
    group: 'portal.dev', version: 'v1alpha1', plural: 'portalclusterrules',
    body: { apiVersion: 'portal.dev/v1alpha1', kind: 'PortalClusterRule', metadata: { name: 'c1' }, spec: spec('object') },
  });

  const lines: { msg: string; name?: string; generation?: number }[] = [];
  const logger = createLogger({ level: 'info', destination: { write: (s: string) => void lines.push(JSON.parse(s) as (typeof lines)[number]) } });
  const source = new ClusterRuleSource({ client: clientFor(api, 'w'), logger });
  const controller = new AbortController();
  const done = source.start(controller.signal);
  t.after(() => {
    controller.abort();
    return done;
  });
  const inForce = () => lines.filter((l) => l.msg === 'rule in force' && l.name === 'PortalClusterRule/c1');
  await until('the rule in force', 5000, () => inForce().length === 1);

  // The leader writes the rule's status: a new resourceVersion, the same generation and spec.
  const path = '/apis/portal.dev/v1alpha1/portalclusterrules/c1';
  const patched = await call('PATCH', `${path}/status`, { status: { conditions: [{ type: 'Ready', status: 'True', reason: 'Compiled', message: 'x', lastTransitionTime: new Date().toISOString() }] } }, 'application/merge-patch+json');
  await until('the informer to see the status update', 5000, () => source.rules.clusterRules.get('c1')?.metadata?.resourceVersion === patched.metadata.resourceVersion);
  assert.equal(inForce().length, 1, 'a status update is not logged as the rule coming into force again');

  // A new spec is a new version: logged.
  await call('PATCH', path, { spec: { validate: { schema: { type: 'object', required: ['metadata'] } } } }, 'application/merge-patch+json');
  await until('the new version in force', 5000, () => inForce().length === 2);
  assert.equal(inForce()[1]?.generation, 2);
});
