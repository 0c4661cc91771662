/**
 * The audit's side-effecting step is a leader-only Runnable (issue 10 item
 * 3): evaluation runs on every replica; the Manager starts the actuator with
 * the term when leadership is won and stops it when it is lost. Real Manager,
 * real embedded API server, the elector's channel scripted.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { buildAudit } from '../../src/audit/audit.ts';
import { ClusterRuleSource } from '../../src/sources/cluster-rule-source.ts';
import { createKubeClient } from '../../src/kube/client.ts';
import { FencedWriter } from '../../src/kube/fenced-writer.ts';
import { Manager } from '../../src/manager/manager.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { scriptedElection } from '../support/election.ts';
import { APP_NS, clusterWithCrds, INSTALL_NS, pod, privilegedRule, reportConfig, until, writesBy } from './support/controller-harness.ts';

test('the actuator acts only between BecameLeader and LostLeadership; evaluation never stops', async (t) => {
  const { api, admin } = await clusterWithCrds(t);
  await admin.apply(privilegedRule('no-privileged', [{ type: 'annotate', key: 'portal.dev/violation', value: 'no-privileged' }]));
  const tester = createKubeClient({ kubeconfigYaml: api.kubeConfig('tester'), qps: 100, burst: 100, userAgent: 'tester' });
  const createPod = (name: string) => tester.core.createNamespacedPod({ namespace: APP_NS, body: pod(name, true) as never });
  await createPod('first');

  const client = createKubeClient({ kubeconfigYaml: api.kubeConfig('replica'), qps: 50, burst: 100, userAgent: 'portal-test (replica)' });
  const logger = silentLogger();
  const writer = new FencedWriter({ kubeConfig: client.kubeConfig, userAgent: 'portal-test (replica)' });
  t.after(() => writer.close());
  const source = new ClusterRuleSource({ client, logger });
  const { evaluator, actuator } = buildAudit(
    {
      installNamespace: INSTALL_NS,
      exemptNamespaces: [],
      auditIntervalMs: 3_600_000,
      workers: 2,
      maxEvictionsPerMinute: 0,
      alertmanagerUrls: [],
      alertResendIntervalMs: 3_600_000,
      statusDebounceMs: 50,
      rulePollMs: 50,
      reports: reportConfig(),
    },
    { client, writer, ruleSet: source.ruleSet, namespaceLabels: (ns) => source.namespaceLabels(ns), logger, registry: new Registry() },
  );
  const election = scriptedElection();
  const manager = new Manager({ gracefulShutdownMs: 5000 }, { logger, election });
  for (const r of source.runnables()) manager.add(r, 'informers');
  manager.add(evaluator, 'others');
  const lifecycle: string[] = [];
  manager.add({
    name: actuator.name,
    needLeaderElection: () => actuator.needLeaderElection(),
    start: async (signal, term) => {
      lifecycle.push(`start ${term?.epochString}`);
      await actuator.start(signal, term);
      lifecycle.push(`stop ${term?.epochString}`);
    },
  });
  const stop = new AbortController();
  const done = manager.start(stop.signal);
  t.after(() => {
    stop.abort();
    return done;
  });
  const writes = () => writesBy(api, 'replica');

  // Follower: everything evaluated, nothing written.
  await election.started;
  await until('the follower evaluated the pod', 10_000, () => evaluator.passes > 0 && evaluator.idle() && evaluator.violations('no-privileged') === 1);
  assert.deepEqual(writes(), [], 'a follower writes nothing');
  assert.equal(actuator.leading, undefined);

  // Leadership won: the takeover acts on what the follower computed.
  const term1 = election.win();
  assert.deepEqual(lifecycle, [`start ${term1.epochString}`], 'started with the term, synchronously');
  await until('report and annotation', 10_000, () => writes().some((e) => e.resource === 'policyreports') && writes().some((e) => e.resource === 'pods'));

  // Leadership lost: the actuator stops; evaluation goes on, writing nothing.
  election.lose();
  await until('the actuator to stop', 5000, () => lifecycle.length === 2);
  assert.equal(lifecycle[1], `stop ${term1.epochString}`);
  const before = writes().length;
  await createPod('second');
  await until('the second pod evaluated', 10_000, () => evaluator.violations('no-privileged') === 2 && evaluator.idle());
  assert.equal(writes().length, before, 'no write after the actuator stopped');

  // Won again: the new term's takeover scan picks up the second pod from memory.
  election.win();
  await until('the second report', 10_000, () => writes().filter((e) => e.resource === 'policyreports').length === 2);
  assert.equal(evaluator.violations('no-privileged'), 2);
  assert.ok(
    writes().every((e) => e.resource !== 'pods' || e.name === 'first' || e.name === 'second'),
    'only the violating pods were annotated',
  );
});
