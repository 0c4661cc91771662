// Issue 31 item 2: fair queuing by flow. The queue alone (no workers): deficit
// round robin charged by measured time, so a flow whose evaluations run long
// waits behind its own load while the others go on; and the flow of a review
// read from its text as kube-apiserver writes it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FairQueue, MIN_COST_MS, type Flow, type Queued } from '../../src/evaluation/fair-queue.ts';
import { CLUSTER_FLOW, describeFlow, reviewFlow } from '../../src/evaluation/flows.ts';

interface Item extends Queued {
  name: string;
  settled: boolean;
}

function item(flow: Flow, name: string, opts: { solo?: boolean; startBy?: number } = {}): Item {
  return { flow, name, settled: false, solo: opts.solo ?? false, startBy: opts.startBy ?? Number.POSITIVE_INFINITY, reserved: 0 };
}

/** Runs `items` one at a time like one worker would, each costing `cost(item)` ms; returns the order they ran in. */
function serve(q: FairQueue<Item>, cost: (it: Item) => number, limit: number): string[] {
  const order: string[] = [];
  for (let i = 0; i < limit; i++) {
    const [it] = q.take(1);
    if (it === undefined) break;
    order.push(it.name);
    q.charge(it.flow, cost(it), it.reserved);
    it.reserved = 0;
    it.settled = true;
    q.settled(it.flow);
  }
  return order;
}

void describe('fair queue', () => {
  void it('alternates between flows of equal cost, and keeps each flow in order', () => {
    const q = new FairQueue<Item>(1);
    const a = q.flow('tenant-a');
    const b = q.flow('tenant-b');
    for (let i = 0; i < 3; i++) q.push(item(a, `a${i}`));
    for (let i = 0; i < 3; i++) q.push(item(b, `b${i}`));
    // Cheap (0.5 ms each, a quantum of 1 ms): two per turn; the flow that arrived last owing nothing goes first.
    assert.deepEqual(serve(q, () => 0.5, 10), ['b0', 'b1', 'a0', 'a1', 'b2', 'a2']);
  });

  void it('a flow whose evaluations take long waits behind its own load: the other flow is not delayed', () => {
    const q = new FairQueue<Item>(1);
    const alice = q.flow('tenant-a');
    const bob = q.flow('tenant-b');
    for (let i = 0; i < 20; i++) q.push(item(alice, `a${i}`));
    const order: string[] = [];
    // Bob's requests arrive one by one while alice's flood waits; each of alice's costs 300 ms, bob's 0.1 ms.
    for (let k = 0; k < 5; k++) {
      q.push(item(bob, `b${k}`));
      order.push(...serve(q, (it) => (it.flow === alice ? 300 : 0.1), 2));
    }
    // Each of bob's goes next, ahead of alice's flood; alice gets what is left.
    assert.deepEqual(order, ['b0', 'a0', 'b1', 'a1', 'b2', 'a2', 'b3', 'a3', 'b4', 'a4']);
    // Nothing else waits: alice has the workers to herself again.
    assert.deepEqual(serve(q, () => 300, 3), ['a5', 'a6', 'a7']);
  });

  void it('charges what was measured, not what was reserved: a flow that turned heavy is passed over until the others caught up', () => {
    const q = new FairQueue<Item>(1);
    const a = q.flow('a');
    const b = q.flow('b');
    for (let i = 0; i < 4; i++) q.push(item(a, `a${i}`));
    for (let i = 0; i < 40; i++) q.push(item(b, `b${i}`));
    // a0 reserved the minimum cost but took 10 ms: b takes about 10 ms of its 0.5 ms evaluations before a goes again.
    const order = serve(q, (it) => (it.name === 'a0' ? 10 : 0.5), 30);
    const first = order.indexOf('a0');
    const next = order.indexOf('a1');
    assert.ok(first >= 0 && first <= 3, order.join(' '));
    assert.ok(next - first >= 20 && next - first <= 24, `a1 ran ${next - first} after a0: ${order.join(' ')}`);
    assert.equal(a.cost > MIN_COST_MS, true, 'the measured cost raised what its next evaluation reserves');
  });

  void it('with a budget (a busy worker), flows whose evaluations run long are passed over and keep their turn', () => {
    const q = new FairQueue<Item>(1);
    const heavy = q.flow('heavy');
    const light = q.flow('light');
    q.push(item(heavy, 'h0'));
    q.charge(heavy, 300, 0);
    heavy.deficit = 5;
    for (let i = 0; i < 3; i++) q.push(item(light, `l${i}`));
    assert.deepEqual(q.take(8, 10).map((x) => x.name), ['l0', 'l1', 'l2']);
    assert.deepEqual(q.take(8, 10), []);
    assert.deepEqual(q.take(8).map((x) => x.name), ['h0']);
  });

  void it('a solo evaluation (a retry) goes first in its flow and alone', () => {
    const q = new FairQueue<Item>(5);
    const a = q.flow('a');
    q.push(item(a, 'a0'));
    q.push(item(a, 'a1'));
    q.push(item(a, 'retry', { solo: true }));
    assert.deepEqual(q.take(8).map((x) => x.name), ['retry']);
    assert.deepEqual(q.take(8).map((x) => x.name), ['a0', 'a1']);
  });

  void it('taken back, evaluations go to the front of their flows with their reservation returned', () => {
    const q = new FairQueue<Item>(1);
    const a = q.flow('a');
    for (let i = 0; i < 3; i++) q.push(item(a, `a${i}`));
    const taken = q.take(2);
    assert.deepEqual(taken.map((x) => x.name), ['a0', 'a1']);
    const deficit = a.deficit;
    q.putBack(taken);
    assert.equal(a.deficit, deficit + 2 * MIN_COST_MS);
    assert.deepEqual(q.take(3).map((x) => x.name), ['a0', 'a1', 'a2']);
  });

  void it('expires what waits past its start-by, drops what was settled elsewhere, and forgets idle flows', () => {
    const q = new FairQueue<Item>(1);
    const a = q.flow('a');
    const b = q.flow('b');
    const late = item(a, 'late', { startBy: 100 });
    const gone = item(b, 'gone');
    q.push(late);
    q.push(item(a, 'later', { startBy: 200 }));
    q.push(gone);
    gone.settled = true;
    q.settled(b);
    assert.deepEqual(q.expired(150).map((x) => x.name), ['late']);
    q.settled(a);
    assert.equal(q.length, 1);
    assert.deepEqual([...q.waiting()].map((x) => x.name), ['later']);
    assert.deepEqual(q.expired(250).map((x) => x.name), ['later']);
    q.settled(a);
    assert.equal(q.flows, 0, 'no flow is kept once nothing waits or runs');
  });

  void it('thousands of flows: each is served, none twice in a row while others wait', () => {
    const q = new FairQueue<Item>(1);
    for (let i = 0; i < 5000; i++) q.push(item(q.flow(`ns-${i}`), `n${i}`));
    const order = serve(q, () => 0.05, 6000);
    assert.equal(order.length, 5000);
    assert.equal(new Set(order).size, 5000);
  });
});

void describe('flow of a review', () => {
  const review = (request: Record<string, unknown>): string => JSON.stringify({ kind: 'AdmissionReview', apiVersion: 'admission.k8s.io/v1', request });
  const base = { uid: 'u', kind: { group: '', version: 'v1', kind: 'Pod' }, resource: { group: '', version: 'v1', resource: 'pods' }, name: 'web' };

  void it("reads the request's namespace and kind, before the object a tenant writes", () => {
    assert.equal(reviewFlow(review({ ...base, namespace: 'tenant-b', operation: 'CREATE', userInfo: { username: 'bob' }, object: { metadata: { namespace: 'tenant-b' } } })), 'tenant-b');
    // A cluster-scoped object whose labels say otherwise.
    const ns = review({ ...base, kind: { group: '', version: 'v1', kind: 'Namespace' }, name: 'x', operation: 'CREATE', userInfo: { username: 'admin' }, object: { metadata: { labels: { namespace: 'tenant-b' }, name: 'x' } } });
    assert.equal(reviewFlow(ns), CLUSTER_FLOW);
    const rule = review({ ...base, kind: { group: 'portal.dev', version: 'v1alpha1', kind: 'PortalRule' }, namespace: 'tenant-a', operation: 'CREATE', userInfo: { username: 'alice' }, object: {} });
    assert.equal(reviewFlow(rule), 'portal.dev/tenant-a');
    assert.equal(describeFlow(reviewFlow(rule)), "Portal's own kinds in namespace tenant-a");
    assert.equal(describeFlow('tenant-b'), 'namespace tenant-b');
    // Scoped to the sender: a client on the webhook port that names a victim's namespace fills only its own flow.
    const victim = reviewFlow(rule, '127.0.0.1');
    const forged = reviewFlow(rule, '127.0.0.2');
    assert.notEqual(victim, forged);
    assert.equal(describeFlow(forged), "Portal's own kinds in namespace tenant-a from 127.0.0.2");
    assert.equal(describeFlow(CLUSTER_FLOW), 'cluster-scoped objects');
    // A name that mentions a namespace is a string: its quotes are escaped.
    assert.equal(reviewFlow(review({ ...base, name: '"namespace":"tenant-b"', operation: 'CREATE', userInfo: { username: 'x' }, object: {} })), CLUSTER_FLOW);
    // Not a review at all: a flow still, without reading further.
    assert.equal(reviewFlow('[1,2,3]'), CLUSTER_FLOW);
  });
});
