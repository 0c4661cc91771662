/**
 * docs/exceptions.md: every PortalException, policy and binding it shows is
 * valid, and the first worked example gives the verdicts the text promises
 * (docs that drift from the engine fail here).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { clusterRule, input, NO_PRIVILEGED_SCHEMA } from './support.ts';
import { evaluate, RuleSet, validateExceptionShape, type KubeObject, type PortalExceptionObject } from '../../src/policy/index.ts';
import { validateBinding, validatePolicy } from '../../src/policy/vap/index.ts';

const md = readFileSync(new URL('../../docs/exceptions.md', import.meta.url), 'utf8');
const docs = [...md.matchAll(/```yaml\n([\s\S]*?)```/g)].flatMap((m) => parseAllDocuments(m[1] ?? '').map((d) => d.toJS() as Record<string, unknown>));
const exceptions = docs.filter((d) => d['kind'] === 'PortalException') as unknown as PortalExceptionObject[];

void describe('docs/exceptions.md', () => {
  void it('every PortalException, ValidatingAdmissionPolicy and binding shown is valid', () => {
    assert.ok(exceptions.length >= 4, `${exceptions.length} exceptions`);
    for (const e of exceptions) {
      const v = validateExceptionShape(e);
      assert.deepEqual(v.ok ? [] : v.problems, [], e.metadata.name);
    }
    for (const d of docs) {
      if (d['kind'] === 'ValidatingAdmissionPolicy') assert.deepEqual(validatePolicy(d).ok, true, JSON.stringify(validatePolicy(d)));
      if (d['kind'] === 'ValidatingAdmissionPolicyBinding') assert.deepEqual(validateBinding(d).ok, true, JSON.stringify(validateBinding(d)));
    }
  });

  void it('example 1: the DaemonSet, its generateName Pods are exempted; a privileged sidecar and an unlabelled Pod are not', () => {
    const ex = exceptions.find((e) => e.metadata.name === 'node-agent');
    assert.ok(ex);
    const rs = new RuleSet();
    rs.upsert(clusterRule('disallow-privileged-containers', { validate: { schema: NO_PRIVILEGED_SCHEMA } }));
    rs.upsertException(ex);
    const now = Date.parse('2026-06-01T00:00:00Z');
    const labels = { 'app.kubernetes.io/name': 'node-agent' };
    const podSpec = (sidecarPrivileged: boolean) => ({
      containers: [
        { name: 'agent', image: 'agent:1', securityContext: { privileged: true } },
        { name: 'sidecar', image: 'side:1', securityContext: { privileged: sidecarPrivileged } },
      ],
    });
    const verdict = (object: KubeObject, name = object.metadata?.name ?? '') => evaluate(rs, input(object, { name, now }))[0];
    const daemonSet: KubeObject = { apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { name: 'node-agent', namespace: 'monitoring', labels }, spec: { template: { metadata: { labels }, spec: podSpec(false) } } };
    assert.equal(verdict(daemonSet)?.exception, 'monitoring/node-agent');
    const generated: KubeObject = { apiVersion: 'v1', kind: 'Pod', metadata: { generateName: 'node-agent-', namespace: 'monitoring', labels }, spec: podSpec(false) };
    assert.equal(verdict(generated, '')?.exception, 'monitoring/node-agent');
    const sidecar: KubeObject = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'node-agent-x', namespace: 'monitoring', labels }, spec: podSpec(true) };
    assert.equal(verdict(sidecar)?.result, 'fail');
    const unlabelled: KubeObject = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'node-agent-debug', namespace: 'monitoring' }, spec: podSpec(false) };
    assert.equal(verdict(unlabelled)?.result, 'fail');
    // And after expiresAt, nothing.
    assert.equal(evaluate(rs, input(daemonSet, { now: Date.parse('2027-01-01T00:00:00Z') }))[0]?.result, 'fail');
  });
});
