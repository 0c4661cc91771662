// Issue 9 item 6 (adr/0009): /metrics and /debug/vars, served on the probes
// port, are reachable only from the peers in networkPolicy.metrics.from; the
// kubelet's probes (from the node) and the API server's webhook calls (from
// anywhere, often a control-plane host network) keep working. Before, the
// chart rendered no NetworkPolicy and any pod could read them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chartDir, find, helm, NAMESPACE, render, withValuesFile, type Manifest } from './helm.ts';
import { allowed, type Destination, type Source } from './netpol.ts';

interface Container {
  ports: { name: string; containerPort: number }[];
  readinessProbe: { httpGet: { path: string; port: string } };
  livenessProbe: { httpGet: { path: string; port: string } };
  args: string[];
}

function destination(ms: Manifest[]): { dst: Destination; container: Container } {
  const tpl = (find(ms, 'Deployment')['spec'] as { template: { metadata: { labels: Record<string, string> }; spec: { containers: Container[] } } }).template;
  const container = tpl.spec.containers[0]!;
  return {
    container,
    dst: { namespace: NAMESPACE, labels: tpl.metadata.labels, namedPorts: Object.fromEntries(container.ports.map((p) => [p.name, p.containerPort])) },
  };
}

const policies = (ms: Manifest[]): Manifest[] => ms.filter((m) => m.kind === 'NetworkPolicy');
const pod = (namespace: string, podLabels: Record<string, string> = { app: 'x' }): Source => ({ namespace, namespaceLabels: { 'kubernetes.io/metadata.name': namespace }, podLabels });
const KUBELET: Source = { node: true };
const APISERVER: Source = { ip: '10.0.0.5' }; // a control-plane node's host network

void test('default: metrics only from the monitoring namespace; probes from the kubelet; the webhook from anywhere', async () => {
  const ms = await render();
  const { dst, container } = destination(ms);
  const np = policies(ms);
  assert.equal(np.length, 1);
  const probes = dst.namedPorts['probes']!;
  const webhook = dst.namedPorts['webhook']!;
  // The kubelet's probes use the probes port, which the node always reaches.
  assert.equal(container.readinessProbe.httpGet.port, 'probes');
  assert.equal(container.livenessProbe.httpGet.port, 'probes');
  assert.equal(allowed(np, dst, probes, KUBELET), true);
  // Prometheus in `monitoring` scrapes; any other pod, in any namespace (its own included), cannot.
  assert.equal(allowed(np, dst, probes, pod('monitoring', { app: 'prometheus' })), true);
  for (const src of [pod('default'), pod('team-a'), pod(NAMESPACE), APISERVER]) {
    assert.equal(allowed(np, dst, probes, src), false, `probes port from ${JSON.stringify(src)}`);
  }
  // The webhook port stays open to every source (the API server's address cannot be selected).
  for (const src of [APISERVER, pod('default'), pod('monitoring'), KUBELET]) {
    assert.equal(allowed(np, dst, webhook, src), true, `webhook port from ${JSON.stringify(src)}`);
  }
  // No other port is open.
  assert.equal(allowed(np, dst, 22, pod('default')), false);
});

void test('custom ports and scrape peers follow the values; an empty list leaves only the node', async () => {
  const from = [{ namespaceSelector: { matchLabels: { team: 'observability' } }, podSelector: { matchLabels: { app: 'vmagent' } } }];
  const ms = await render({ ports: { probes: 9090, webhook: 10250 }, networkPolicy: { metrics: { from } } });
  const { dst } = destination(ms);
  const np = policies(ms);
  assert.equal(dst.namedPorts['probes'], 9090);
  const agent: Source = { namespace: 'obs', namespaceLabels: { team: 'observability' }, podLabels: { app: 'vmagent' } };
  assert.equal(allowed(np, dst, 9090, agent), true);
  assert.equal(allowed(np, dst, 9090, { ...agent, podLabels: { app: 'other' } }), false, 'both selectors must match');
  assert.equal(allowed(np, dst, 9090, pod('monitoring')), false);
  assert.equal(allowed(np, dst, 10250, APISERVER), true);

  const none = await render({ networkPolicy: { metrics: { from: [] } } });
  const d = destination(none).dst;
  assert.equal(allowed(policies(none), d, d.namedPorts['probes']!, pod('monitoring')), false);
  assert.equal(allowed(policies(none), d, d.namedPorts['probes']!, KUBELET), true);
  assert.equal(allowed(policies(none), d, d.namedPorts['webhook']!, APISERVER), true);
});

void test('extraIngress is appended; disabled renders no policy; unknown keys are refused', async () => {
  const extra = [{ ports: [{ port: 'probes', protocol: 'TCP' }], from: [{ ipBlock: { cidr: '192.168.0.0/16' } }] }];
  const ms = await render({ networkPolicy: { extraIngress: extra } });
  const { dst } = destination(ms);
  assert.equal(allowed(policies(ms), dst, dst.namedPorts['probes']!, { ip: '192.168.4.4' }), true);
  assert.equal(allowed(policies(ms), dst, dst.namedPorts['probes']!, { ip: '10.1.1.1' }), false);

  assert.deepEqual(policies(await render({ networkPolicy: { enabled: false } })), []);

  const r = await withValuesFile({ networkPolicy: { metrcs: {} } }, (file) => helm(['template', 'portal', chartDir, '--values', file]));
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /additional properties 'metrcs' not allowed/);
});

void test('issue 31: networkPolicy.webhook.controlPlaneCIDRs (and .from) name who may reach the webhook port; the probes rules are unchanged', async () => {
  const ms = await render({ networkPolicy: { webhook: { controlPlaneCIDRs: ['10.0.0.0/24', '192.168.7.10/32'], from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'konnectivity' } } }] } } });
  const { dst } = destination(ms);
  const np = policies(ms);
  const webhook = dst.namedPorts['webhook']!;
  for (const src of [APISERVER, { ip: '192.168.7.10' } as Source, pod('konnectivity')]) assert.equal(allowed(np, dst, webhook, src), true, `webhook port from ${JSON.stringify(src)}`);
  for (const src of [{ ip: '10.0.1.5' } as Source, { ip: '192.168.7.11' } as Source, pod('default'), pod('tenant-a')]) assert.equal(allowed(np, dst, webhook, src), false, `webhook port from ${JSON.stringify(src)}`);
  const probes = dst.namedPorts['probes']!;
  assert.equal(allowed(np, dst, probes, KUBELET), true);
  assert.equal(allowed(np, dst, probes, APISERVER), false);
  // Only CIDRs: the same, without the extra peers.
  const only = policies(await render({ networkPolicy: { webhook: { controlPlaneCIDRs: ['10.0.0.5/32'] } } }));
  assert.equal(allowed(only, dst, webhook, APISERVER), true);
  assert.equal(allowed(only, dst, webhook, pod('konnectivity')), false);
});
