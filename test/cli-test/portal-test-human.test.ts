/**
 * `portal test` as a tired human types it (issue 15 item 5), through the real
 * executable: `-` reads standard input, the summary counts the
 * ValidatingAdmissionPolicies it applied, and `--output policyreport` is YAML
 * without anchors or aliases (results of one report share objects, which the
 * YAML writer used to emit once and refer to as `*a1`).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseAllDocuments, visit } from 'yaml';
import { ROOT, runPortal } from './run-portal.ts';

const POLICIES = join(ROOT, 'policies', 'pod-security');
const VAPS = join(ROOT, 'policies', 'pod-security-vap');
const COMPLIANT = join(ROOT, 'test', 'fixtures', 'pss', 'compliant');
const PRIVILEGED = `apiVersion: v1
kind: Pod
metadata: {name: privileged, namespace: default}
spec:
  containers:
    - name: app
      image: nginx:1.27
      securityContext: {privileged: true}
`;

describe('portal test for humans', { concurrency: 2 }, () => {
  it('- reads the manifests from standard input, named <stdin> in the output', async () => {
    const r = await runPortal(['test', '--policies', POLICIES, '-'], { stdin: PRIVILEGED });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /^disallow-privileged-containers +Pod +default +privileged +fail /m);
    assert.match(r.stdout, /\n1 resource, \d+ rules: /);

    const bad = await runPortal(['test', '--policies', POLICIES, '-'], { stdin: 'kind: [\n' });
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /- <stdin>: invalid YAML at line \d+, column \d+: /);
  });

  it('the summary counts the ValidatingAdmissionPolicies beside the rules', async () => {
    const r = await runPortal(['test', '--policies', POLICIES, '--policies', VAPS, COMPLIANT]);
    assert.equal(r.code, 0, r.stderr);
    const summary = r.stdout.trimEnd().split('\n').at(-1) ?? '';
    assert.match(summary, /^3 resources, \d+ rules, \d+ ValidatingAdmissionPolicies: \d+ pass, 0 fail, 0 warn, 0 error, 0 skip$/);
    const [, ruleCount, vapCount] = /(\d+) rules, (\d+) ValidatingAdmissionPolicies/.exec(summary) ?? [];
    // Both libraries hold the same controls, one as rules and one as VAPs.
    assert.equal(vapCount, ruleCount);
    // Without VAPs, the summary does not mention them.
    const only = await runPortal(['test', '--policies', POLICIES, COMPLIANT]);
    assert.doesNotMatch(only.stdout, /ValidatingAdmissionPolic/);
  });

  it('--output policyreport writes plain YAML: no anchors, no aliases', async () => {
    const r = await runPortal(['test', '--policies', POLICIES, '--output', 'policyreport', COMPLIANT]);
    assert.equal(r.code, 0, r.stderr);
    const docs = parseAllDocuments(r.stdout);
    assert.equal(docs.length, 3);
    for (const doc of docs) {
      assert.deepEqual(doc.errors, []);
      // The reader would resolve aliases; the text must hold none.
      let aliases = 0;
      let anchors = 0;
      visit(doc, {
        Alias: () => void aliases++,
        Node: (_, node) => {
          if (node.anchor !== undefined) anchors++;
        },
      });
      assert.equal(aliases, 0);
      assert.equal(anchors, 0);
    }
    assert.doesNotMatch(r.stdout, /(^|[\s[{,])[&*]a\d+\b/m);
  });
});
