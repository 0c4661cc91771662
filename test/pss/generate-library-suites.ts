/**
 * Writes the test suites the shipped libraries carry, from the fixtures:
 *   policies/pod-security/tests/pod-security.portal-test.yaml        (latest)
 *   policies/pod-security/tests/pod-security-v1.30.portal-test.yaml  (pinned by the namespace label)
 *   policies/pod-security-vap/tests/pod-security-vap.portal-test.yaml
 *   policies/best-practices/tests/best-practices.portal-test.yaml
 *
 * Each fixture's own rule gets the verdict of its `# expect` header (fail for
 * a Deny rule, warn for Warn/Audit, with the violation's path as
 * messageContains for the JSON Schema libraries); the compliant workloads
 * pass every rule. The other rules' verdicts on each fixture, which the
 * headers do not state, are recorded from the evaluator as it is today, in a
 * section of their own, so the suites name every verdict (`--strict` holds).
 * The generator refuses to write a suite whose header expectations do not hold.
 *
 * Run: npx tsx test/pss/generate-library-suites.ts
 * test/cli-test/library-suites.test.ts runs the suites with the real executable.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { runSuiteFile } from '../../src/cli/test-suite/command.ts';
import type { Verdict } from '../../src/policy/index.ts';
import { expectationAt, FIXTURES, loadFixtures, loadRuleFiles, POLICIES, ROOT, type Fixture } from './fixtures.ts';

interface Library {
  /** Directory under policies/. */
  dir: string;
  /** Suite file name without .portal-test.yaml. */
  name: string;
  fixtures: string;
  /** The enforcement of each rule, by name. */
  enforcement: Map<string, string>;
  /** The violation's path appears in the message (JSON Schema rules list the first three). */
  pathsInMessages: boolean;
  /** Pod Security version (minor), pinned by the namespace label; undefined = latest. */
  version?: number;
  about: string;
}

const enforcementOf = (dir: string): Map<string, string> =>
  new Map(loadRuleFiles(join(POLICIES, dir)).map((r) => [r.object.metadata.name, r.object.spec.enforcement ?? 'Deny']));
const pss = enforcementOf('pod-security');

const LIBRARIES: Library[] = [
  {
    dir: 'pod-security',
    name: 'pod-security',
    fixtures: 'pss',
    enforcement: pss,
    pathsInMessages: true,
    about: 'The Pod Security Standards rules (policies/pod-security) on the fixtures of\n# test/fixtures/pss, at the latest Pod Security version.',
  },
  {
    dir: 'pod-security',
    name: 'pod-security-v1.30',
    fixtures: 'pss',
    enforcement: pss,
    pathsInMessages: true,
    version: 30,
    about:
      'The Pod Security Standards rules (policies/pod-security) on the fixtures of\n# test/fixtures/pss, pinned to Pod Security v1.30 by the label\n# pod-security.kubernetes.io/enforce-version of their namespace ("default").',
  },
  {
    dir: 'pod-security-vap',
    name: 'pod-security-vap',
    fixtures: 'pss',
    // The VAP library mirrors the rules: a Deny binding where the rule denies, Warn otherwise.
    enforcement: pss,
    pathsInMessages: false,
    about: 'The Pod Security Standards as ValidatingAdmissionPolicies (policies/pod-security-vap)\n# on the fixtures of test/fixtures/pss.',
  },
  {
    dir: 'best-practices',
    name: 'best-practices',
    fixtures: 'best-practices',
    enforcement: enforcementOf('best-practices'),
    pathsInMessages: true,
    about: 'The best-practices rules (policies/best-practices) on the fixtures of\n# test/fixtures/best-practices.',
  },
];

interface Entry {
  rule: string;
  kind: string;
  resources: string[];
  result: Verdict;
  messageContains?: string;
}

const nameOf = (fx: Fixture): string => String(fx.object.metadata?.name);
const kindOf = (fx: Fixture): string => String(fx.object.kind);

/** `[a, b, c]` wrapped under `indent` at about 110 columns. */
function flowList(items: readonly string[], indent: string): string {
  const lines: string[] = [];
  let line = '';
  for (const item of items) {
    const piece = line === '' ? item : `, ${item}`;
    if (line !== '' && indent.length + line.length + piece.length > 106) {
      lines.push(`${line},`);
      line = item;
    } else line += piece;
  }
  lines.push(line);
  return `[${lines.join(`\n${indent} `)}]`;
}

function entryYaml(e: Entry): string {
  const out = [`  - rule: ${e.rule}`, `    kind: ${e.kind}`, `    resources: ${flowList(e.resources, '               ')}`, `    result: ${e.result}`];
  if (e.messageContains !== undefined) out.push(`    messageContains: ${JSON.stringify(e.messageContains)}`);
  return out.join('\n');
}

/** Entries grouped by rule, kind and result, resources sorted, in rule order. */
function grouped(pairs: readonly { rule: string; kind: string; name: string; result: Verdict }[]): Entry[] {
  const map = new Map<string, Entry>();
  for (const p of pairs) {
    const key = `${p.rule}\u0000${p.kind}\u0000${p.result}`;
    const e = map.get(key) ?? { rule: p.rule, kind: p.kind, resources: [], result: p.result };
    e.resources.push(p.name);
    map.set(key, e);
  }
  const order: Record<string, number> = { fail: 0, warn: 1, error: 2, pass: 3, skip: 4 };
  return [...map.values()]
    .map((e) => ({ ...e, resources: [...e.resources].sort() }))
    .sort((a, b) => a.rule.localeCompare(b.rule) || a.kind.localeCompare(b.kind) || (order[a.result] ?? 9) - (order[b.result] ?? 9));
}

function render(lib: Library, suiteDir: string, stated: Entry[], recorded: Entry[]): string {
  const rel = (p: string): string => relative(suiteDir, p);
  const header = [
    `# yaml-language-server: $schema=${rel(join(ROOT, 'schemas', 'portal-test.schema.json'))}`,
    `# ${lib.about}`,
    '#',
    '# Generated by test/pss/generate-library-suites.ts from the fixtures; regenerate',
    '# after changing a rule or a fixture: npx tsx test/pss/generate-library-suites.ts',
    '# Run: portal test policies/   (add --strict to fail on verdicts not named here)',
    'apiVersion: cli.portal.dev/v1alpha1',
    'kind: Test',
    'metadata:',
    `  name: ${lib.name}`,
    `policies: [${rel(join(POLICIES, lib.dir))}]`,
    `resources: [${rel(join(FIXTURES, lib.fixtures))}]`,
  ];
  if (lib.version !== undefined) {
    header.push('namespaces:', '  - name: default', `    labels: {pod-security.kubernetes.io/enforce-version: v1.${lib.version}}`);
  }
  header.push(
    'results:',
    "  # Stated by the fixtures: each fixture's \"# expect\" header for its own rule",
    '  # (fail for a Deny rule, warn for Warn and Audit), and the compliant workloads',
    '  # pass every rule.',
    ...stated.map(entryYaml),
  );
  if (recorded.length > 0) {
    header.push(
      "  # Recorded: the other rules' verdicts on each fixture, which the headers do not",
      '  # state, as the evaluator gives them (review the diff when regenerating).',
      ...recorded.map(entryYaml),
    );
  }
  return `${header.join('\n')}\n`;
}

async function generate(lib: Library): Promise<void> {
  const suiteDir = join(POLICIES, lib.dir, 'tests');
  const file = join(suiteDir, `${lib.name}.portal-test.yaml`);
  const rules = [...lib.enforcement.keys()].sort();
  const fixtures = loadFixtures(join(FIXTURES, lib.fixtures));
  const version = lib.version ?? Infinity;
  const stated: Entry[] = [];
  const passes: { rule: string; kind: string; name: string; result: Verdict }[] = [];
  for (const fx of fixtures) {
    if (fx.group === 'compliant') {
      for (const rule of rules) passes.push({ rule, kind: kindOf(fx), name: nameOf(fx), result: 'pass' });
      continue;
    }
    const e = expectationAt(fx, version);
    if (e.result === 'pass') {
      passes.push({ rule: fx.group, kind: kindOf(fx), name: nameOf(fx), result: 'pass' });
      continue;
    }
    const result: Verdict = lib.enforcement.get(fx.group) === 'Deny' ? 'fail' : 'warn';
    const entry: Entry = { rule: fx.group, kind: kindOf(fx), resources: [nameOf(fx)], result };
    if (lib.pathsInMessages && e.path !== undefined) entry.messageContains = e.path;
    stated.push(entry);
  }
  const statedAll = [...stated, ...grouped(passes)].sort((a, b) => a.rule.localeCompare(b.rule) || a.kind.localeCompare(b.kind) || a.result.localeCompare(b.result));
  mkdirSync(suiteDir, { recursive: true });
  writeFileSync(file, render(lib, suiteDir, statedAll, []));
  const first = await runSuiteFile(file);
  const broken = [...first.problems.map((p) => `${p.position?.line ?? '?'}: ${p.message}`), ...first.expectations.filter((x) => !x.ok).map((x) => `${x.line}: ${x.rule} ${x.name}: expected ${x.expected}, got ${x.got}: ${x.message}`)];
  if (broken.length > 0) throw new Error(`${file}: the fixtures' own expectations do not hold:\n${broken.join('\n')}`);
  const recorded = grouped(first.unlisted.map((u) => ({ rule: u.rule, kind: u.kind, name: u.name, result: u.result })));
  writeFileSync(file, render(lib, suiteDir, statedAll, recorded));
  const second = await runSuiteFile(file);
  if (second.problems.length > 0 || second.unlisted.length > 0 || second.expectations.some((x) => !x.ok)) throw new Error(`${file}: does not hold after recording`);
  process.stdout.write(`${relative(ROOT, file)}: ${second.expectations.length} expectations (${first.expectations.length} stated by the fixtures)\n`);
}

for (const lib of LIBRARIES) await generate(lib);
