// The chart and `portal dev` must register the same webhook: the builder in
// src/config/webhook-configuration.ts is compared with `helm template`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  buildValidatingWebhookConfiguration,
  loadChartWebhookValues,
  type WebhookValues,
} from '../../src/config/webhook-configuration.ts';
import { PORTAL_KINDS, portalKindResources } from '../../src/policy/portal-kinds.ts';
import { chartDir, find, NAMESPACE, render, type Manifest } from './helm.ts';

const portalKindsResources = portalKindResources();

interface Hook {
  name: string;
  failurePolicy: string;
  clientConfig: { caBundle?: string; service?: { path: string }; url?: string };
  namespaceSelector?: unknown;
  rules: { apiGroups: string[]; resources: string[]; operations: string[] }[];
}

function webhookOf(m: Manifest): Hook {
  const hooks = m['webhooks'] as Hook[];
  assert.equal(hooks.length, 2, 'the main webhook and the one for Portal\'s own kinds');
  return hooks[0]!;
}

function withoutHelmMetadata(m: Manifest): Manifest {
  return { ...m, metadata: { name: m.metadata.name } };
}

void test('builder output equals the rendered chart with default values', async () => {
  const values = await loadChartWebhookValues(chartDir);
  const rendered = find(await render(), 'ValidatingWebhookConfiguration');
  const caBundle = webhookOf(rendered).clientConfig.caBundle;
  assert.ok(caBundle && caBundle.length > 100, 'chart renders a caBundle by default');
  const built = buildValidatingWebhookConfiguration({
    name: 'portal',
    namespace: NAMESPACE,
    caBundle,
    clientConfig: { service: { name: 'portal', namespace: NAMESPACE, port: 443, path: values.path } },
    values,
    portalKindResources: portalKindsResources,
  });
  assert.deepEqual(built, withoutHelmMetadata(rendered));
});

void test('builder output equals the rendered chart with alternative webhook values', async () => {
  const values: WebhookValues = {
    name: 'check.example.com',
    path: '/admit',
    failurePolicy: 'Ignore',
    sideEffects: 'None',
    timeoutSeconds: 3,
    admissionReviewVersions: ['v1', 'v1beta1'],
    matchPolicy: 'Exact',
    excludedNamespaces: ['monitoring', 'kube-system', 'cert-manager'],
    rules: [
      { apiGroups: [''], apiVersions: ['v1'], resources: ['services', 'pods/ephemeralcontainers'], operations: ['CREATE', 'UPDATE', 'DELETE'] },
      { apiGroups: ['networking.k8s.io'], apiVersions: ['v1'], resources: ['ingresses'], operations: ['CREATE'], scope: 'Namespaced' },
    ],
  };
  const rendered = find(
    await render({ webhook: values, service: { port: 8443 }, fullnameOverride: 'guard' }),
    'ValidatingWebhookConfiguration',
  );
  const built = buildValidatingWebhookConfiguration({
    name: 'guard',
    namespace: NAMESPACE,
    caBundle: webhookOf(rendered).clientConfig.caBundle ?? '',
    clientConfig: { service: { name: 'guard', namespace: NAMESPACE, port: 8443, path: '/admit' } },
    values,
    portalKindResources: portalKindsResources,
  });
  assert.deepEqual(built, withoutHelmMetadata(rendered));
});

void test('with cert-manager the chart leaves caBundle to the cainjector, like the builder given ""', async () => {
  const values = await loadChartWebhookValues(chartDir);
  const rendered = find(await render({ certificates: { mode: 'certManager' } }), 'ValidatingWebhookConfiguration');
  assert.equal(rendered.metadata.annotations?.['cert-manager.io/inject-ca-from'], `${NAMESPACE}/portal`);
  const built = buildValidatingWebhookConfiguration({
    name: 'portal',
    namespace: NAMESPACE,
    caBundle: '',
    clientConfig: { service: { name: 'portal', namespace: NAMESPACE, port: 443, path: '/validate' } },
    values,
    portalKindResources: portalKindsResources,
  });
  assert.deepEqual(built, withoutHelmMetadata(rendered));
});

void test('url clientConfig (portal dev) keeps every other field', async () => {
  const values = await loadChartWebhookValues(chartDir);
  const built = buildValidatingWebhookConfiguration({
    name: 'portal',
    namespace: 'portal-dev',
    caBundle: 'Q0E=',
    clientConfig: { url: 'https://127.0.0.1:40000/validate' },
    values,
    portalKindResources: portalKindsResources,
  }) as { webhooks: { clientConfig: unknown; failurePolicy: string; namespaceSelector: unknown }[] };
  const hook = built.webhooks[0]!;
  assert.deepEqual(hook.clientConfig, { caBundle: 'Q0E=', url: 'https://127.0.0.1:40000/validate' });
  assert.equal(hook.failurePolicy, 'Fail');
  assert.deepEqual(hook.namespaceSelector, {
    matchExpressions: [
      { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'kube-public', 'kube-node-lease', 'portal-dev'] },
    ],
  });
});

void test('both refuse rules that could lock the cluster out', async () => {
  const values = await loadChartWebhookValues(chartDir);
  for (const rule of [
    { apiGroups: ['coordination.k8s.io'], apiVersions: ['v1'], resources: ['leases'], operations: ['CREATE' as const] },
    { apiGroups: ['*'], apiVersions: ['*'], resources: ['deployments'], operations: ['CREATE' as const] },
    { apiGroups: [''], apiVersions: ['v1'], resources: ['*'], operations: ['CREATE' as const] },
  ]) {
    const bad = { ...values, rules: [...values.rules, rule] };
    assert.throws(
      () => buildValidatingWebhookConfiguration({ name: 'p', namespace: 'n', caBundle: '', clientConfig: { url: 'https://x' }, values: bad, portalKindResources: portalKindsResources }),
      /self-lockout|would match/,
    );
    await assert.rejects(render({ webhook: { rules: bad.rules } }), /self-lockout|would match|must never/);
  }
});

void test('by default both send pods/ephemeralcontainers updates (kubectl debug), which rules matching Pod check', async () => {
  // Issue 9 item 2: before, the subresource was never sent, so a privileged
  // debug container was admitted without Portal seeing it.
  const values = await loadChartWebhookValues(chartDir);
  const rendered = find(await render(), 'ValidatingWebhookConfiguration');
  const built = buildValidatingWebhookConfiguration({
    name: 'portal', namespace: 'portal-dev', caBundle: 'Q0E=', clientConfig: { url: 'https://127.0.0.1:40000/validate' }, values, portalKindResources: portalKindsResources,
  });
  for (const config of [rendered, built]) {
    const rules = (config['webhooks'] as { rules: { apiGroups: string[]; resources: string[]; operations: string[] }[] }[])[0]!.rules;
    const core = rules.find((r) => r.apiGroups.includes(''));
    assert.ok(core?.resources.includes('pods/ephemeralcontainers'), JSON.stringify(rules));
    assert.ok(core?.operations.includes('UPDATE'));
  }
});

void test("Portal's own kinds: a second webhook with failurePolicy Ignore on it only; the main one never matches them (docs/design.md §3)", async () => {
  const values = await loadChartWebhookValues(chartDir);
  const rendered = find(await render(), 'ValidatingWebhookConfiguration');
  const [main, kinds] = rendered['webhooks'] as Hook[];
  assert.ok(main && kinds);
  assert.equal(main.failurePolicy, 'Fail');
  assert.ok(main.rules.every((r) => !r.apiGroups.includes('portal.dev') && !r.apiGroups.includes('*')), JSON.stringify(main.rules));
  assert.equal(kinds.name, 'validate-kinds.portal.dev');
  assert.equal(kinds.failurePolicy, 'Ignore');
  assert.equal(kinds.clientConfig.service?.path, '/validate-portal-kinds');
  assert.equal(kinds.namespaceSelector, undefined, "rules in Portal's own namespace are checked too");
  assert.deepEqual(kinds.rules, [{ apiGroups: ['portal.dev'], apiVersions: ['*'], resources: portalKindsResources, operations: ['CREATE', 'UPDATE'], scope: '*' }]);
  // Every kind the validator registry knows is sent, and only those.
  assert.deepEqual(kinds.rules[0]?.resources, Object.values(PORTAL_KINDS).map((k) => k.resource));
  // portal dev's url form points the second entry at the same server's other path.
  const built = buildValidatingWebhookConfiguration({
    name: 'portal', namespace: 'portal-dev', caBundle: 'Q0E=', clientConfig: { url: 'https://127.0.0.1:40000/validate' }, values, portalKindResources: portalKindsResources,
  }) as unknown as { webhooks: Hook[] };
  assert.equal(built.webhooks[1]?.clientConfig.url, 'https://127.0.0.1:40000/validate-portal-kinds');
});

void test('webhook.portalKinds.enabled false: only the main webhook, in the chart and the builder', async () => {
  const values = { ...(await loadChartWebhookValues(chartDir)), portalKinds: { enabled: false, name: 'validate-kinds.portal.dev' } };
  const rendered = find(await render({ webhook: { portalKinds: { enabled: false } } }), 'ValidatingWebhookConfiguration');
  assert.equal((rendered['webhooks'] as unknown[]).length, 1);
  const built = buildValidatingWebhookConfiguration({
    name: 'portal',
    namespace: NAMESPACE,
    caBundle: (rendered['webhooks'] as Hook[])[0]?.clientConfig.caBundle ?? '',
    clientConfig: { service: { name: 'portal', namespace: NAMESPACE, port: 443, path: '/validate' } },
    values,
    portalKindResources: portalKindsResources,
  });
  assert.deepEqual(built, withoutHelmMetadata(rendered));
});
