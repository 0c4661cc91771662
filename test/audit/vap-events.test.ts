/**
 * VAP problems (VapProblems over the replica's ProblemEvents) against the embedded API server: a compile error of a
 * policy (as Portal's engine reports it, with field and position) becomes one
 * Warning Event on the policy, written through the FencedWriter under the
 * term; the same problem for the same generation is not written twice; a new
 * generation is; nothing is written without a valid term; the counter counts
 * every note. (The embedded API server, like kube-apiserver, refuses a policy
 * that does not compile, so a replica sees such a policy only when the API
 * server's engine accepted what Portal's does not: this drives the writer
 * with a compile error from Portal's own engine.)
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { Registry } from 'prom-client';
import { ProblemEvents } from '../../src/audit/problem-events.ts';
import { compileProblems, eventMessage, problemsOf, VapProblems } from '../../src/audit/vap-events.ts';
import { FencedWriter } from '../../src/kube/fenced-writer.ts';
import { Term } from '../../src/leader/term.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { celEngine, compileErrors, compilePolicy, type ValidatingAdmissionPolicy } from '../../src/policy/vap/index.ts';
import { apiServer, clientFor, until } from '../leader/cluster.ts';

interface Event { involvedObject: { kind?: string; name?: string; uid?: string }; reason?: string; message?: string; type?: string; reportingComponent?: string }

const policy = (generation: number): ValidatingAdmissionPolicy =>
  ({
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: 'broken', uid: 'uid-broken', generation },
    spec: { failurePolicy: 'Fail', validations: [{ expression: 'true' }, { expression: 'object.spec.replicas <' }] },
  }) as unknown as ValidatingAdmissionPolicy;

/** The writer and the VAP front end of one replica. */
function replica(writer: FencedWriter, identity: string, registry = new Registry(), recheckMs?: number): { events: ProblemEvents; vap: VapProblems } {
  const events = new ProblemEvents({ writer, logger: silentLogger(), identity, ...(recheckMs !== undefined ? { recheckMs } : {}) });
  return { events, vap: new VapProblems({ events, registry }) };
}

function running(t: TestContext, events: ProblemEvents, term: Term): void {
  const controller = new AbortController();
  const done = events.start(controller.signal, term);
  t.after(() => {
    controller.abort();
    return done;
  });
}

test('a compile error becomes one Warning Event on the policy per generation, written only under a valid term', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'portal');
  const writer = new FencedWriter({ kubeConfig: client.kubeConfig, userAgent: client.userAgent });
  t.after(() => writer.close());
  const registry = new Registry();
  const { events, vap } = replica(writer, 'portal-0_abcd', registry);
  const list = async (): Promise<Event[]> => {
    const r = await fetch(`${api.url}/api/v1/namespaces/default/events`, { headers: { authorization: `Bearer ${api.adminToken}` } });
    return ((await r.json()) as { items: Event[] }).items.filter((e) => e.involvedObject.kind === 'ValidatingAdmissionPolicy');
  };

  const problems = compileProblems(compileErrors(compilePolicy(policy(1), celEngine())));
  assert.equal(problems.length, 1);
  const [problem] = problems;
  assert.ok(problem);
  assert.equal(problem.field, 'spec.validations[1].expression');

  // Noted before leading, and with an expired term: nothing is written.
  vap.note(policy(1), problem);
  // A term whose validity ran out (the elector ends it then, as here).
  const expired = new Term({ leaseUid: 'l', transitions: 1 }, performance.now() - 10_000, 1, (x) => x.end('validity ran out'));
  await events.start(new AbortController().signal, expired);
  assert.equal(events.written, 0);
  assert.deepEqual(await list(), []);

  const term = new Term({ leaseUid: 'l', transitions: 2 }, performance.now(), Infinity);
  running(t, events, term);
  const [event] = await until('the Event', 10_000, async () => ((await list()).length > 0 ? await list() : undefined));
  assert.ok(event);
  assert.deepEqual(event.involvedObject, { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy', name: 'broken', uid: 'uid-broken' });
  assert.equal(event.type, 'Warning');
  assert.equal(event.reason, 'CompileError');
  assert.equal(event.reportingComponent, 'portal.dev/audit');
  assert.equal(event.message, eventMessage('broken', problem));
  // The engine's position of the error is in the message.
  assert.match(event.message ?? '', /^ValidatingAdmissionPolicy broken, spec\.validations\[1\]\.expression: .*1:\d+/s);

  // The same problem again (another pass, another replica's note): no second Event.
  vap.note(policy(1), problem);
  await until('the note settled', 5000, () => events.stats()['pending'] === 0);
  assert.equal((await list()).length, 1);

  // The policy edited (generation 2) and still broken: reported again.
  vap.note(policy(2), problem);
  await until('a second Event', 10_000, async () => (await list()).length === 2);
  assert.equal(events.written, 2);

  const text = await registry.metrics();
  assert.match(text, /^portal_vap_evaluation_errors_total\{policy="broken",reason="CompileError"\} 3$/m);
});

test('a second writer (the next leader) finds the Event written and writes none', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'portal');
  const writer = new FencedWriter({ kubeConfig: client.kubeConfig, userAgent: client.userAgent });
  t.after(() => writer.close());
  const [problem] = compileProblems(compileErrors(compilePolicy(policy(1), celEngine())));
  assert.ok(problem);
  const { events: first, vap: firstVap } = replica(writer, 'portal-0_a');
  const { events: second, vap: secondVap } = replica(writer, 'portal-1_b');
  firstVap.note(policy(1), problem);
  secondVap.note(policy(1), problem);
  running(t, first, new Term({ leaseUid: 'l', transitions: 1 }, performance.now(), Infinity));
  await until('the first leader wrote it', 10_000, () => first.written === 1);
  running(t, second, new Term({ leaseUid: 'l', transitions: 2 }, performance.now(), Infinity));
  await until('the second leader settled it', 10_000, () => second.stats()['recorded'] === 1);
  assert.equal(second.written, 0);
});

test('problemsOf: the reason of each erroring binding evaluation', () => {
  const base = { param: undefined, actions: ['Audit'], failures: [], denyErrors: [], ignoredErrors: [], auditAnnotations: {}, problems: [] } as const;
  const evals = [
    { ...base, policy: 'ok', binding: 'b0', result: 'fail' as const },
    { ...base, policy: 'params', binding: 'b1', result: 'error' as const, denyErrors: ['failed to configure binding: no params found'], problems: [{ kind: 'params' as const, message: 'no params found' }] },
    { ...base, policy: 'cost', binding: 'b2', result: 'error' as const, problems: [{ kind: 'cost' as const, field: 'spec.validations[0].expression', message: 'spec.validations[0].expression: the expression exceeded its CEL cost limit' }] },
    { ...base, policy: 'eval', binding: 'b3', result: 'error' as const, failures: [{ message: 'no such key: x', reason: undefined, expressionIndex: 2, error: true }] },
    { ...base, policy: 'broken', binding: 'b4', result: 'error' as const, failures: [{ message: 'compile error', reason: undefined, expressionIndex: 0, error: true }] },
  ];
  const got = problemsOf(evals as never, (p) => p === 'broken').map(({ policy, problem }) => [policy, problem.reason, problem.binding, problem.field]);
  assert.deepEqual(got, [
    ['params', 'ParamNotFound', 'b1', undefined],
    ['cost', 'CostExceeded', 'b2', 'spec.validations[0].expression'],
    ['eval', 'EvaluationError', 'b3', 'spec.validations[2].expression'],
    ['broken', 'CompileError', 'b4', undefined],
  ]);
});

test('a recorded problem is checked again later: an Event deleted by its TTL comes back, one that exists is not duplicated', async (t) => {
  const api = await apiServer(t);
  const client = clientFor(api, 'portal');
  const writer = new FencedWriter({ kubeConfig: client.kubeConfig, userAgent: client.userAgent });
  t.after(() => writer.close());
  const [problem] = compileProblems(compileErrors(compilePolicy(policy(1), celEngine())));
  assert.ok(problem);
  const { events, vap } = replica(writer, 'portal-0_a', new Registry(), 0);
  running(t, events, new Term({ leaseUid: 'l', transitions: 1 }, performance.now(), Infinity));
  const auth = { authorization: `Bearer ${api.adminToken}` };
  const names = async (): Promise<string[]> =>
    ((await (await fetch(`${api.url}/api/v1/namespaces/default/events`, { headers: auth })).json()) as { items: { metadata: { name: string }; involvedObject: { kind?: string } }[] }).items
      .filter((e) => e.involvedObject.kind === 'ValidatingAdmissionPolicy')
      .map((e) => e.metadata.name);
  vap.note(policy(1), problem);
  await until('the Event', 10_000, () => events.written === 1);
  // Checked again while it exists: a 409, nothing new.
  vap.note(policy(1), problem);
  await until('the recheck settled', 5000, () => events.stats()['pending'] === 0);
  const [name] = await names();
  assert.ok(name);
  assert.equal(events.written, 1);
  // Gone (the API server's event TTL): the next note writes it again.
  assert.equal((await fetch(`${api.url}/api/v1/namespaces/default/events/${name}`, { method: 'DELETE', headers: auth })).status, 200);
  vap.note(policy(1), problem);
  await until('the Event back', 10_000, () => events.written === 2);
  assert.deepEqual(await names(), [name]);
});
