/**
 * The CEL examples in docs/writing-rules.md are valid rules and give the
 * verdicts the text promises (docs that drift from the engine fail here).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { evaluate, RuleSet, validateRule, type KubeObject, type PortalRuleObject } from '../../src/policy/index.ts';

const md = readFileSync(new URL('../../docs/writing-rules.md', import.meta.url), 'utf8');
const section = md.slice(md.indexOf('## Writing CEL rules'), md.indexOf('## Pod templates'));
const blocks = [...section.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');

describe('docs/writing-rules.md CEL examples', () => {
  it('the example rule and the extra expressions compile and give the documented verdicts', () => {
    assert.equal(blocks.length, 2);
    const rule = parse(blocks[0] ?? '') as PortalRuleObject;
    const extra = parse(blocks[1] ?? '') as NonNullable<PortalRuleObject['spec']['validate']['cel']>['expressions'];
    rule.spec.validate.cel?.expressions.push(...extra);
    const v = validateRule(rule);
    assert.deepEqual(v.ok ? [] : v.problems, []);
    const rs = new RuleSet();
    rs.upsert(rule);
    const pod = (privileged: boolean, app: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'web', namespace: 'd', labels: { app } },
      spec: {
        containers: [
          {
            name: 'app',
            image: `registry.example.com/shop/web@sha256:${'a'.repeat(64)}`,
            securityContext: { privileged },
            resources: { limits: { memory: '128Mi' } },
          },
        ],
      },
    });
    const run = (object: KubeObject, oldObject: KubeObject | null) =>
      evaluate(rs, { operation: oldObject ? 'UPDATE' : 'CREATE', kind: { group: '', version: 'v1', kind: 'Pod' }, namespace: 'd', name: 'web', object, oldObject, namespaceLabels: {} })[0];
    assert.equal(run(pod(false, 'a'), null)?.result, 'pass');
    const bad = run(pod(true, 'a'), pod(false, 'b'));
    assert.equal(bad?.result, 'fail');
    assert.equal(bad?.message, 'cel-disallow-privileged: Privileged containers are not allowed. [privileged containers: app, the app label cannot change]');
    const system = run({ ...pod(true, 'a'), metadata: { name: 'system-x', namespace: 'd' } }, null);
    assert.equal(system?.result, 'skip');
  });
});
