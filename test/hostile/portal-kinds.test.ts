/**
 * The webhook for Portal's own kinds (`POST /validate-portal-kinds`) against
 * hostile rules: anyone who can reach the webhook port can post a review, so
 * each must be answered with a refusal that names the problem — never a
 * crash, an internal error or an unbounded compile. The same checks guard
 * the RuleSet when such a rule reaches the cluster some other way.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { MAX_NESTING_DEPTH } from '../../src/policy/cel/engine.ts';
import { RuleSet, validateRule, type PortalRuleObject } from '../../src/policy/index.ts';
import { allowAll, makePki, makeServer, type TestPki } from '../admission/helpers.ts';

const rule = (cel: Record<string, unknown>): Record<string, unknown> => ({
  apiVersion: 'portal.dev/v1alpha1',
  kind: 'PortalClusterRule',
  metadata: { name: 'hostile' },
  spec: { match: { kinds: [{ apiGroups: [''], kinds: ['Pod'] }] }, validate: { cel } },
});

describe('hostile rules sent to the webhook for Portal\'s own kinds', () => {
  let pki: TestPki;
  before(async () => {
    pki = await makePki();
  });

  async function refusal(object: Record<string, unknown>): Promise<string> {
    const server = makeServer(pki, allowAll());
    const res = await server.app.inject({
      method: 'POST',
      url: '/validate-portal-kinds',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: { uid: 'u', kind: { group: 'portal.dev', version: 'v1alpha1', kind: 'PortalClusterRule' }, name: 'hostile', namespace: '', operation: 'CREATE', object, oldObject: null },
      }),
    });
    await server.app.close();
    const response = (res.json() as { response: { allowed: boolean; status?: { code: number; message: string } } }).response;
    assert.equal(res.statusCode, 200);
    assert.equal(response.allowed, false);
    assert.equal(response.status?.code, 422, 'refused as invalid, not an internal error');
    return response.status?.message ?? '';
  }

  it('an expression nested thousands of levels deep (a + a + … within 10 KiB) is refused, not a stack overflow', async () => {
    let chain = 'object.metadata.name.size()';
    while (chain.length < 10_000) chain += ' + 1';
    const message = await refusal(rule({ expressions: [{ expression: `${chain} > 0` }] }));
    assert.match(message, new RegExp(`nests ${MAX_NESTING_DEPTH + 1} levels deep, more than the ${MAX_NESTING_DEPTH} allowed`));
    // The RuleSet says the same instead of throwing (the informer path).
    const state = new RuleSet().upsert(rule({ expressions: [{ expression: `${chain} > 0` }] }) as unknown as PortalRuleObject);
    assert.equal(state.reason, 'CompileError');
    assert.match(state.message, /nests \d+ levels deep/);
  });

  it('a long chain of one logical operator is one level, as in cel-go', () => {
    let or = "object.metadata.name == 'a'";
    for (let i = 0; or.length < 9_000; i++) or += ` || object.metadata.name == 'a${i}'`;
    assert.equal(validateRule(rule({ expressions: [{ expression: or }] })).ok, true);
  });

  it('deeply nested parentheses are a compile error naming the expression, not a crash', async () => {
    const message = await refusal(rule({ expressions: [{ expression: `${'('.repeat(5000)}true${')'.repeat(5000)}` }] }));
    assert.match(message, /spec\.validate\.cel\.expressions\[0\]\.expression: compilation failed: /);
  });

  it('192 expressions of 10 KiB (what the CRD allows) are refused before anything compiles', async () => {
    const expression = `object.metadata.name != '${'x'.repeat(10_000)}'`;
    const message = await refusal(
      rule({
        matchConditions: Array.from({ length: 64 }, (_, i) => ({ name: `m${i}`, expression })),
        variables: Array.from({ length: 64 }, (_, i) => ({ name: `v${i}`, expression })),
        expressions: Array.from({ length: 64 }, () => ({ expression })),
      }),
    );
    assert.match(message, /spec\.validate\.cel: \d+ characters of expressions, more than the 65536 allowed per rule/);
  });
});
