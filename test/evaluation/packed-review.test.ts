// Session 6 (issue 16 item 1, issue 21 item 5): a plain allow travels back
// from an evaluation worker packed; what the main thread reads after
// unpacking must be exactly what answerReview produced, and every other
// answer must travel whole.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { joinPacked, packReview, splitPacked, unpackReview } from '../../src/evaluation/packed-review.ts';
import { RuleSet, type KubeObject } from '../../src/policy/index.ts';
import { answerReview, exemptNamespaces, nameOnlyNamespaceLabels, type ReviewContext } from '../../src/policy/review/answer.ts';
import { clusterRule, pod } from '../policy/support.ts';

const rules = new RuleSet();
rules.upsert(clusterRule('no-privileged'));
const ctx: ReviewContext = { rules, exempt: exemptNamespaces(['portal-system']), namespaceLabels: nameOnlyNamespaceLabels };
const budget = { deadline: Number.POSITIVE_INFINITY, now: () => 0, ms: 1000, abandoned: undefined };

function review(object: KubeObject, namespace: string, apiVersion = 'admission.k8s.io/v1'): string {
  return JSON.stringify({
    apiVersion,
    kind: 'AdmissionReview',
    request: {
      uid: 'u-1',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      name: 'web',
      namespace,
      operation: 'CREATE',
      userInfo: { username: 'alice' },
      object,
    },
  });
}

void describe('packed review answers', () => {
  void it('a plain allow is packed, and unpacks to what answerReview gave (v1 and v1beta1)', () => {
    for (const version of ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1']) {
      const a = answerReview(review(pod({ privileged: false }), 'shop', version), ctx, budget);
      assert.equal(a.outcome.decision, 'allow');
      const packed = packReview(a);
      assert.equal(typeof packed, 'string', 'packed');
      assert.deepEqual(unpackReview(structuredClone(packed)), a);
    }
  });

  void it('a batch of packed allows travels as one string and splits back into them', () => {
    const answers = ['u-1', 'u-2', 'u-3'].map((uid) => packReview(answerReview(review(pod({ privileged: false }), 'shop').replace('"u-1"', JSON.stringify(uid)), ctx, budget)));
    const joined = joinPacked(answers);
    assert.equal(typeof joined, 'string');
    assert.deepEqual(splitPacked(structuredClone(joined!)), answers);
    // Not every result a packed allow (a denial, an item not claimed): the results travel as they are.
    assert.equal(joinPacked([answers[0], answerReview(review(pod({ privileged: true }), 'shop'), ctx, budget)]), undefined);
    assert.equal(joinPacked([answers[0], undefined]), undefined);
  });

  void it('an allow whose identifiers hold the separators travels whole, and reads back the same', () => {
    for (const uid of ['u\u0000x', 'u\u0001x']) {
      const a = answerReview(review(pod({ privileged: false }), 'shop').replace('"u-1"', JSON.stringify(uid)), ctx, budget);
      assert.equal(a.outcome.decision, 'allow');
      assert.equal(a.outcome.response.uid, uid);
      assert.equal(packReview(a), a);
    }
  });

  void it('a denial, an exemption, a malformed review travel whole', () => {
    const answers = [
      answerReview(review(pod({ privileged: true }), 'shop'), ctx, budget),
      answerReview(review(pod({ privileged: true }), 'portal-system'), ctx, budget),
      answerReview('{"apiVersion":', ctx, budget),
    ];
    assert.deepEqual(
      answers.map((a) => a.outcome.decision),
      ['deny', 'exempt', 'invalid'],
    );
    for (const a of answers) {
      assert.equal(packReview(a), a);
      assert.equal(unpackReview(a), a);
    }
  });
});
