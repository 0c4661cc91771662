/**
 * `portal test` end to end: spawns the real executable (bin/portal.js) over
 * the shipped rules and fixtures, and over temporary inputs for the cases
 * the fixtures do not cover. Asserts what a user sees: output, stderr, exit code.
 */
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { expectationAt, loadFixtures } from '../pss/fixtures.ts';
import { ROOT, runPortal } from './run-portal.ts';
import { assertValidReport } from '../support/reports.ts';
import { tempDir } from '../support/temp-dir.ts';

interface JsonResult {
  rule: string;
  kind: string;
  namespace: string;
  name: string;
  result: string;
  message: string;
}

const POLICIES = join(ROOT, 'policies');
const PSS_FIXTURES = join(ROOT, 'test', 'fixtures', 'pss');
/** Rules whose violations are `fail` (Deny); the others report `warn`. */
const DENY_RULES = new Set([
  'disallow-capabilities',
  'disallow-host-namespaces',
  'disallow-host-path',
  'disallow-host-ports',
  'disallow-host-probes',
  'disallow-host-process',
  'disallow-privileged-containers',
  'disallow-proc-mount',
  'disallow-selinux',
  'restrict-apparmor-profiles',
  'restrict-seccomp',
  'restrict-sysctls',
]);

const tmp = tempDir('portal-cli-test-');
const write = tmp.write;

function rule(name: string, spec: string): string {
  return `apiVersion: portal.dev/v1alpha1\nkind: PortalClusterRule\nmetadata:\n  name: ${name}\nspec:\n${spec}`;
}

void describe('portal test', { concurrency: 3 }, () => {
  void it('--output json: correct verdicts for every PSS control on every Pod, Deployment and CronJob fixture', async () => {
    // The JSON Schema libraries only: policies/pod-security-vap has its own test (test/cli-test/portal-test-vap.test.ts).
    const run = await runPortal(['test', '--policies', join(POLICIES, 'pod-security'), '--policies', join(POLICIES, 'best-practices'), '--output', 'json', PSS_FIXTURES]);
    assert.equal(run.stderr, '');
    assert.equal(run.code, 1, 'bad fixtures violate Deny rules, so the run fails');
    const results = JSON.parse(run.stdout) as JsonResult[];
    for (const r of results) assert.deepEqual(Object.keys(r).sort(), ['kind', 'message', 'name', 'namespace', 'result', 'rule']);

    const fixtures = loadFixtures(PSS_FIXTURES);
    const names = fixtures.map((f) => `${f.object.kind ?? ''}/${f.object.metadata?.name ?? ''}`);
    assert.equal(new Set(names).size, names.length, 'fixture names are unique, so results map back to files');
    for (const fx of fixtures) {
      const mine = results.filter((r) => r.kind === fx.object.kind && r.name === fx.object.metadata?.name);
      assert.equal(mine.length, 22, `${fx.file}: one verdict per rule (19 PSS + 3 best practices)`);
      assert.equal(mine[0]?.namespace, fx.object.metadata?.namespace ?? 'default', `${fx.file}: namespace defaults to "default"`);
      if (fx.group === 'compliant') {
        for (const r of mine) assert.equal(r.result, 'pass', `${fx.file} ${r.rule}: ${r.message}`);
        continue;
      }
      const own = mine.find((r) => r.rule === fx.group);
      assert.ok(own, `${fx.file}: a verdict of ${fx.group}`);
      if (fx.expect.result === 'pass') {
        assert.equal(own.result, 'pass', `${fx.file}: ${own.message}`);
      } else {
        assert.equal(own.result, DENY_RULES.has(fx.group) ? 'fail' : 'warn', `${fx.file}: ${own.message}`);
        assert.ok(own.message.includes(fx.expect.path), `${fx.file}: the message names ${fx.expect.path}: ${own.message}`);
      }
    }
  });

  void it('--pod-security-version: every versioned fixture gets the verdict its header gives at that version', async () => {
    const versioned = loadFixtures(PSS_FIXTURES).filter((f) => f.expectations.length > 1);
    assert.ok(versioned.length > 30, 'the versioned fixtures');
    for (const version of [7, 18, 24, 33]) {
      const run = await runPortal(['test', '--policies', join(POLICIES, 'pod-security'), '--pod-security-version', `v1.${version}`, '-o', 'json', ...versioned.map((f) => f.file)]);
      assert.equal(run.stderr, '');
      const results = JSON.parse(run.stdout) as JsonResult[];
      for (const fx of versioned) {
        const own = results.find((r) => r.kind === fx.object.kind && r.name === fx.object.metadata?.name && r.rule === fx.group);
        const e = expectationAt(fx, version);
        const want = e.result === 'pass' ? 'pass' : DENY_RULES.has(fx.group) ? 'fail' : 'warn';
        assert.equal(own?.result, want, `${fx.file} at v1.${version}: ${own?.message ?? 'no verdict'}`);
      }
    }
  });

  void it('the namespace label pod-security.kubernetes.io/enforce-version of a Namespace in the inputs wins over --pod-security-version', async () => {
    // One namespace per version boundary, each holding a copy of every versioned fixture.
    const versioned = loadFixtures(PSS_FIXTURES).filter((f) => f.expectations.length > 1);
    const boundaries = [...new Set(versioned.flatMap((f) => f.expectations.flatMap((e) => [e.from, e.to])))].sort((a, b) => a - b);
    const docs: string[] = [];
    for (const v of boundaries) {
      const ns = v === Infinity ? 'at-latest' : `at-v1-${v}`;
      docs.push(stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: { 'pod-security.kubernetes.io/enforce-version': v === Infinity ? 'latest' : `v1.${v}` } } }));
      for (const fx of versioned) {
        const copy = parse(stringify(fx.object)) as { metadata: Record<string, unknown> };
        copy.metadata['namespace'] = ns;
        docs.push(stringify(copy));
      }
    }
    const inputs = await write('versions/all.yaml', docs.join('---\n'));
    // The flag only labels namespaces that have no label of their own: here, none.
    const run = await runPortal(['test', '--policies', join(POLICIES, 'pod-security'), '--pod-security-version', 'v1.0', '-o', 'json', inputs]);
    assert.equal(run.stderr, '');
    const results = JSON.parse(run.stdout) as JsonResult[];
    let checked = 0;
    for (const v of boundaries) {
      const ns = v === Infinity ? 'at-latest' : `at-v1-${v}`;
      for (const fx of versioned) {
        const own = results.find((r) => r.namespace === ns && r.kind === fx.object.kind && r.name === fx.object.metadata?.name && r.rule === fx.group);
        const e = expectationAt(fx, v);
        const want = e.result === 'pass' ? 'pass' : DENY_RULES.has(fx.group) ? 'fail' : 'warn';
        assert.equal(own?.result, want, `${fx.file} in ${ns}: ${own?.message ?? 'no verdict'}`);
        if (want !== 'pass') assert.ok(own?.message.includes('pod-security.kubernetes.io/enforce-version') || v === Infinity, own?.message);
        checked++;
      }
    }
    assert.ok(checked > 500, `${checked} verdicts checked`);
  });

  void it('--pod-security-version must be latest or v1.N: anything else is bad input (exit 2)', async () => {
    const run = await runPortal(['test', '--policies', join(POLICIES, 'pod-security'), '--pod-security-version', 'v1.030', join(PSS_FIXTURES, 'compliant')]);
    assert.equal(run.code, 2);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /--pod-security-version: "v1\.030" is not a Pod Security version: use "latest" or "v1\.N" \(e\.g\. "v1\.30"\)/);
  });

  void it('--output table: aligned columns, a summary line, exit 0 when only warnings', async () => {
    // A baseline-clean Pod (restricted rules warn about it) and the compliant workloads.
    const run = await runPortal([
      'test',
      '--policies',
      join(POLICIES, 'pod-security'),
      join(PSS_FIXTURES, 'disallow-host-namespaces', 'good-pod.yaml'),
      join(PSS_FIXTURES, 'compliant'),
    ]);
    assert.equal(run.stderr, '');
    assert.equal(run.code, 0, 'warn is not a failure');
    const [table, summary] = run.stdout.trimEnd().split('\n\n');
    const lines = (table ?? '').split('\n');
    const header = lines[0] ?? '';
    assert.match(header, /^RULE +KIND +NAMESPACE +NAME +RESULT +MESSAGE$/);
    assert.equal(lines.length, 1 + 4 * 19, 'a row per resource and rule');
    const columns = ['KIND', 'NAMESPACE', 'NAME', 'RESULT', 'MESSAGE'].map((c) => header.indexOf(c));
    for (const line of lines.slice(1)) {
      for (const at of columns) assert.notEqual(line[at - 1], undefined, line);
      for (const at of columns) assert.ok(line[at - 1] === ' ' && line[at] !== ' ', `column starts at ${at}: ${line}`);
    }
    assert.ok(lines.some((l) => /^require-run-as-nonroot +Pod +default +host-namespaces-good-pod +warn +require-run-as-nonroot: /.test(l)));
    const warns = lines.filter((l) => / warn +\S+: /.test(l)).length;
    assert.equal(summary, `4 resources, 19 rules: ${4 * 19 - warns} pass, 0 fail, ${warns} warn, 0 error, 0 skip`);
  });

  void it('--output policyreport: one report per resource with a matching summary; namespaces, Lists and JSON', async () => {
    const policies = await write(
      'pr/policies/rules.yaml',
      [
        rule('no-host-network', `  enforcement: Deny\n  severity: high\n  category: Test\n  match:\n    kinds: [{apiGroups: [""], kinds: [Pod]}]\n  validate:\n    message: no host network\n    schema: {properties: {spec: {properties: {hostNetwork: {const: false}}}}}\n`),
        // Only namespaces labelled env=prod: decided from the Namespace in the inputs.
        rule('prod-needs-team', `  enforcement: Warn\n  match:\n    kinds: [{apiGroups: [""], kinds: [Pod]}]\n    namespaceSelector: {matchLabels: {env: prod}}\n  validate:\n    schema: {required: [metadata], properties: {metadata: {required: [labels], properties: {labels: {required: [team]}}}}}\n`),
        rule('namespaces-labelled', `  enforcement: Audit\n  severity: low\n  match:\n    kinds: [{apiGroups: [""], kinds: [Namespace]}]\n  validate:\n    schema: {required: [metadata], properties: {metadata: {required: [labels]}}}\n`),
      ].join('---\n'),
    );
    await write(
      'pr/inputs/all.yaml',
      [
        'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels: {env: prod}\n',
        'apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: shop}\nspec: {hostNetwork: true, containers: [{name: a, image: "a:1"}]}\n',
        'apiVersion: v1\nkind: Pod\nmetadata: {name: plain}\nspec: {containers: [{name: a, image: "a:1"}]}\n',
        // A rule among the inputs is not a resource: ignored.
        rule('ignored', `  match:\n    kinds: [{apiGroups: [""], kinds: [Pod]}]\n  validate: {schema: false}\n`),
      ].join('---\n'),
    );
    await write(
      'pr/inputs/list.json',
      JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [{ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'from-json', namespace: 'shop', labels: { team: 'a' } }, spec: { containers: [] } }] }),
    );
    const run = await runPortal(['test', '-p', policies, '-o', 'policyreport', join(tmp.path, 'pr', 'inputs')]);
    assert.equal(run.stderr, '');
    assert.equal(run.code, 1, 'web violates a Deny rule');
    const docs = parseAllDocuments(run.stdout).map((d) => d.toJS() as Record<string, any>); // eslint-disable-line @typescript-eslint/no-explicit-any
    const byName = new Map(docs.map((d) => [`${d['scope']['kind']}/${d['scope']['name']}`, d]));
    assert.deepEqual([...byName.keys()].sort(), ['Namespace/shop', 'Pod/from-json', 'Pod/plain', 'Pod/web']);
    for (const d of docs) {
      assert.equal(d['apiVersion'], 'wgpolicyk8s.io/v1alpha2');
      const counts = { pass: 0, fail: 0, warn: 0, error: 0, skip: 0 } as Record<string, number>;
      for (const r of d['results'] as Array<Record<string, any>>) { // eslint-disable-line @typescript-eslint/no-explicit-any
        assert.equal(typeof r['policy'], 'string');
        assert.ok(['pass', 'fail', 'warn', 'error', 'skip'].includes(r['result']));
        assert.ok(['critical', 'high', 'medium', 'low', 'info'].includes(r['severity']));
        assert.ok(Number.isInteger(r['timestamp']['seconds']) && Number.isInteger(r['timestamp']['nanos']));
        assert.equal(r['resources'], undefined, 'the report\'s scope names the resource');
        counts[r['result']] = (counts[r['result']] ?? 0) + 1;
      }
      assert.deepEqual(d['summary'], counts, `${d['metadata']['name']}: summary matches results`);
    }
    const ns = byName.get('Namespace/shop');
    assert.equal(ns?.['kind'], 'ClusterPolicyReport');
    assert.equal(ns?.['metadata']['namespace'], undefined);
    assert.deepEqual(ns?.['summary'], { pass: 1, fail: 0, warn: 0, error: 0, skip: 0 });
    const result = (key: string, policy: string): unknown =>
      (byName.get(key)?.['results'] as Array<Record<string, unknown>>).find((r) => r['policy'] === policy)?.['result'];
    const web = byName.get('Pod/web');
    assert.equal(web?.['kind'], 'PolicyReport');
    assert.equal(web?.['metadata']['namespace'], 'shop');
    assert.equal(result('Pod/web', 'no-host-network'), 'fail');
    assert.equal(result('Pod/web', 'prod-needs-team'), 'warn', 'shop is labelled env=prod by the Namespace input');
    assert.equal(result('Pod/from-json', 'prod-needs-team'), 'pass');
    assert.equal(byName.get('Pod/plain')?.['metadata']['namespace'], 'default');
    for (const d of docs) assertValidReport(d);

    // --output openreports: the same reports as openreports.io Report / ClusterReport (the audit's builder).
    const open = await runPortal(['test', '-p', policies, '-o', 'openreports', join(tmp.path, 'pr', 'inputs')]);
    assert.equal(open.stderr, '');
    assert.equal(open.code, 1);
    const reps = parseAllDocuments(open.stdout).map((d) => d.toJS() as Record<string, any>); // eslint-disable-line @typescript-eslint/no-explicit-any
    assert.deepEqual(reps.map((d) => `${d['kind']} ${d['scope']['kind']}/${d['scope']['name']}`).sort(), ['ClusterReport Namespace/shop', 'Report Pod/from-json', 'Report Pod/plain', 'Report Pod/web']);
    for (const d of reps) {
      assert.equal(d['apiVersion'], 'openreports.io/v1alpha1');
      assert.equal(d['source'], 'portal');
      assert.deepEqual(d['summary'], docs.find((x) => x['scope']['name'] === d['scope']['name'])?.['summary']);
      assertValidReport(d);
    }
    // default has only its name label: the rule does not apply to plain, so its report has no result for it (skip is for exemptions).
    assert.equal(result('Pod/plain', 'prod-needs-team'), undefined, 'a rule that does not apply is not in the report');
    assert.equal(result('Pod/web', 'ignored'), undefined, 'rules among the FILE arguments are not applied');
  });

  void it('reports every input problem at once, evaluates nothing, exits 2', async () => {
    const badRules = await write(
      'errors/policies/rules.yaml',
      [
        'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stray}\n',
        rule('typo', `  enforcement: Block\n  match:\n    kinds: [{apiGroups: [""], kinds: [Pod]}]\n  validate: {schema: true}\n`),
        rule('lookahead', `  match:\n    kinds: [{apiGroups: [""], kinds: [Pod]}]\n  validate: {schema: {properties: {kind: {type: string, pattern: "^(?!Pod)"}}}}\n`),
      ].join('---\n'),
    );
    const otherRules = await write('errors/more-policies/rules.yaml', rule('good-one', `  match:\n    kinds: [{apiGroups: [""], kinds: [Pod]}]\n  validate: {schema: true}\n`));
    const dupRules = await write('errors/dup-policies/rules.yaml', rule('good-one', `  match:\n    kinds: [{apiGroups: [""], kinds: [Pod]}]\n  validate: {schema: true}\n`));
    const badYaml = await write('errors/bad.yaml', 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n');
    const badJson = await write('errors/bad.json', '{"apiVersion": "v1", "kind": "Pod",');
    const noMeta = await write('errors/no-meta.yaml', 'kind: Pod\nspec: {}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: fine}\n');
    const lowerKind = await write('errors/lower.yaml', 'apiVersion: v1\nkind: pod\nmetadata: {name: lower}\n');
    const empty = join(tmp.path, 'errors', 'empty-dir');
    await mkdir(empty, { recursive: true });
    const missing = join(tmp.path, 'errors', 'missing.yaml');

    const run = await runPortal([
      'test',
      '--policies', join(badRules, '..'),
      '--policies', join(otherRules, '..'),
      '--policies', join(dupRules, '..'),
      badYaml, badJson, noMeta, lowerKind, empty, missing,
    ]); // prettier-ignore
    assert.equal(run.code, 2);
    assert.equal(run.stdout, '', 'nothing is evaluated');
    const expected: [string, RegExp][] = [
      ['a non-rule in --policies', /ConfigMap "stray": unexpected kind; a policy directory holds PortalRule, PortalClusterRule, PortalException, ValidatingAdmissionPolicy/],
      ['an invalid rule', /PortalClusterRule "typo" is invalid:\n\s+- spec\.enforcement: must be one of "Deny", "Warn", "Audit"/],
      ['a rule whose schema does not compile', /PortalClusterRule "lookahead" is invalid:\n\s+- .*lookahead and lookbehind .* not supported \(RE2/],
      ['a duplicate rule', /rule PortalClusterRule\/good-one is also defined in .*more-policies; rule names must be unique/],
      ['bad YAML, with the line', /bad\.yaml: invalid YAML at line \d+/],
      ['bad JSON', /bad\.json: invalid JSON/],
      ['an object without apiVersion and name', /no-meta\.yaml: object #1: not a Kubernetes object: missing apiVersion, metadata\.name/],
      ['an unknown kind', /lower\.yaml: object #1: unknown kind "pod"/],
      ['a directory without manifests', /empty-dir: directory holds no \.yaml, \.yml or \.json files/],
      ['an unreadable file', /missing\.yaml: cannot read: no such file or directory/],
    ];
    for (const [what, re] of expected) assert.match(run.stderr, re, `${what} is reported:\n${run.stderr}`);
    assert.match(run.stderr, /^portal test: 10 problems with the input:/);
    assert.match(run.stderr, /Nothing was evaluated\. Fix the problems above and run again/);
  });

  void it('usage errors: unknown flags, bad --output, missing --policies and FILE; exit 2', async () => {
    const run = await runPortal(['test', '--polcies=x', '--output', 'xml']);
    assert.equal(run.code, 2);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /unknown flag --polcies \(did you mean --policies\?\)/);
    assert.match(run.stderr, /--output "xml" is not supported; use one of table, json, policyreport, openreports/);
    assert.match(run.stderr, /--policies DIR is required/);
    assert.match(run.stderr, /no FILE given/);
  });

  void it('only rules among the FILE arguments is bad input', async () => {
    const run = await runPortal(['test', '--policies', POLICIES, join(POLICIES, 'pod-security')]);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /the FILE arguments hold only rules; name the manifests to evaluate/);
  });

  void it('--help prints the usage and exits 0', async () => {
    const run = await runPortal(['test', '--help']);
    assert.equal(run.code, 0);
    assert.match(run.stdout, /^Usage: portal test --policies DIR/);
    assert.match(run.stdout, /Exit codes: 0 nothing failed/);
    assert.equal(run.stderr, '');
  });
});
