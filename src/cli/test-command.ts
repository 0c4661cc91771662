/**
 * `portal test --policies DIR [--output table|json|policyreport|openreports] FILE...`
 * (docs/design.md §6): offline evaluation of manifests against rules, like
 * `kyverno test` / `gator`.
 *
 * Every input problem (flags, unreadable files, bad YAML, unsupported objects,
 * invalid rules) is collected and reported at once, before anything is
 * evaluated, with exit code 2. Otherwise: exit 1 when any verdict is `fail`
 * or `error`, else 0 (`warn` is not a failure).
 *
 * Namespaces: a namespaced object without `metadata.namespace` is evaluated
 * in "default", as `kubectl apply` would create it. Namespace labels are
 * `{"kubernetes.io/metadata.name": <ns>}` (the label every namespace carries),
 * plus the labels of a Namespace object with that name in the inputs.
 * `--pod-security-version V` labels every namespace
 * `pod-security.kubernetes.io/enforce-version: V` unless its Namespace in the
 * inputs sets that label itself.
 */
import { editDistance, parseArgs, type FlagDef, type ParsedArgs } from '../config/args.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type Command, type CommandIO } from './command.ts';
import { RESULT_OUTPUT } from './output-policy.ts';
import { InputBudget } from '../config/input-budget.ts';
import type { ThreadMemory } from '../evaluation/thread-memory.ts';
import { evaluationMemoryFlag, releaseThreadHeapFlags } from './process-memory.ts';
import { EvaluationThread } from './offline/evaluation-thread.ts';
import { readManifests } from '../config/manifests.ts';
import { isVapDocument, type VapDocuments } from '../sources/vap-files.ts';
import { parseDuration } from '../util/duration.ts';
import { parseRfc3339, podSecurityVersionProblem, type KubeObject, type PortalExceptionObject, type PortalRuleObject } from '../policy/index.ts';
import { DEFAULT_EXCEPTION_NAMESPACE, type OfflineJudging } from './offline/evaluator.ts';
import { loadPolicies } from './offline/policies.ts';
import { isRuleObject, stringLabels, toResource, unsupported, type Resource } from './offline/resources.ts';
import {
  formatJson,
  formatReports,
  formatTable,
  OUTPUT_FORMATS,
  toResults,
  type EvaluatedResource,
  type OutputFormat,
} from '../policy/report-format.ts';

const HELP = `Usage: portal test --policies DIR [--policies DIR...] [--output table|json|policyreport|openreports]
                   [--pod-security-version VERSION] [--now RFC3339] [--exception-namespaces NS,...]
                   [--max-exception-lifetime DUR] FILE...

Evaluates Kubernetes manifests against Portal rules and ValidatingAdmissionPolicies
offline, as the webhook, the API server and the audit would (operation AUDIT: every
rule matching the kind applies; a VAP applies where its rules admit CREATE).

Arguments:
  FILE...                 manifest files or directories (recursive; .yaml, .yml, .json;
                          multi-document YAML, JSON objects, arrays and Lists).
                          Rules, policies and bindings among them are not evaluated.
                          - reads standard input (e.g. helm template . | portal test -p DIR -).
                          Only regular files are read (no FIFO, device or socket), each at
                          most 16 MiB, rule files at most 1 MiB.
Flags:
  --policies, -p DIR      rules to apply: a directory or file of PortalRule /
                          PortalClusterRule objects, PortalExceptions, ValidatingAdmissionPolicies
                          with their bindings, and the param objects of their paramKind
                          (repeatable, required)
  --output, -o FORMAT     table (default), json, policyreport (a YAML stream of
                          wgpolicyk8s.io PolicyReport / ClusterPolicyReport, one per
                          resource) or openreports (the same as openreports.io
                          Report / ClusterReport)
  --pod-security-version VERSION
                          evaluate Pod Security rules at VERSION (latest or v1.N): every
                          namespace gets the label pod-security.kubernetes.io/enforce-version
                          unless its Namespace among the FILE arguments sets it
  --now RFC3339           judge PortalExceptions' expiry at this instant (default: now)
  --exception-namespaces NS,...
                          namespaces whose exceptions may exempt objects anywhere, as
                          portal serve's flag (default: portal-system, the chart's)
  --max-exception-lifetime DUR
                          refuse exceptions that never expire or live longer, as
                          portal serve's flag (default: no limit)
  --evaluation-memory MIB heap of the thread that evaluates, MiB (default: half the memory of
                          the machine or container, 128 to 1024); a rule that exhausts it on a
                          resource gives error there, naming the resource
  --help, -h              show this help

Namespaces: a namespaced object without metadata.namespace is evaluated in
"default". Namespace labels are {"kubernetes.io/metadata.name": NAME}, plus the
labels of a Namespace object of that name among the FILE arguments. Rules that
use minPodSecurityVersion read the namespace label
pod-security.kubernetes.io/enforce-version (see policies/README.md).

VAP rows: rule = the policy's name; fail = a Deny binding denies, warn = a Warn or
Audit binding reports it, skip = not selected or a matchCondition is false, error =
an evaluation error (handled by the policy's failurePolicy in a cluster). Param
objects among the FILE arguments are params too.

PortalExceptions among the policies apply exactly as in the cluster (the same
function decides): an exempted rule's row is skip, naming the exception (JSON:
an "exception" field). An exception without metadata.namespace is in "default";
one in another namespace does not exempt, one past --now has expired.

Exit codes: 0 nothing failed (warn is not a failure), 1 a rule failed or could
not be evaluated, 2 bad input (flags, files, YAML, objects, rules or policies:
a CEL expression that does not compile is reported with its file, rule or
policy and position; one that exceeds its cost limit, or a missing param, too).
`;

const FLAGS: readonly FlagDef[] = [
  { flag: 'policies', type: 'value', short: 'p' },
  { flag: 'output', type: 'value', short: 'o' },
  { flag: 'pod-security-version', type: 'value' },
  { flag: 'now', type: 'value' },
  { flag: 'exception-namespaces', type: 'value' },
  { flag: 'max-exception-lifetime', type: 'value' },
  { flag: 'evaluation-memory', type: 'value' },
  { flag: 'help', type: 'bool', short: 'h' },
];

interface Inputs {
  format: OutputFormat;
  rules: PortalRuleObject[];
  /** Rule key → the --policies argument it came from. */
  ruleSources: Map<string, string>;
  vap: VapDocuments;
  resources: Resource[];
  namespaceLabels: Map<string, Record<string, string>>;
  /** --pod-security-version: the enforce-version label of namespaces that do not set one. */
  podSecurityVersion: string | undefined;
  exceptions: PortalExceptionObject[];
  /** How exceptions are judged (--now, --exception-namespaces, --max-exception-lifetime). */
  judging: OfflineJudging;
  /** The evaluation thread's limits (--evaluation-memory). */
  memory: ThreadMemory;
}

/** How exceptions are judged, from --now, --exception-namespaces and --max-exception-lifetime; problems are added to `problems`. */
function judgingFlags(values: ParsedArgs['values'], problems: string[]): OfflineJudging {
  const nowFlag = values.get('now')?.at(-1);
  let now = Date.now();
  if (nowFlag !== undefined) {
    const parsed = parseRfc3339(nowFlag);
    if (parsed === undefined) problems.push(`--now "${nowFlag}" is not an RFC 3339 date-time; write it like 2026-12-31T00:00:00Z`);
    else now = parsed;
  }
  const exceptionNamespaces = (values.get('exception-namespaces') ?? []).flatMap((v) => v.split(',')).filter((v) => v !== '');
  for (const ns of exceptionNamespaces) {
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(ns) || ns.length > 63) problems.push(`--exception-namespaces: "${ns}" is not a valid namespace name`);
  }
  const lifetimeFlag = values.get('max-exception-lifetime')?.at(-1);
  let maxLifetimeMs: number | undefined;
  if (lifetimeFlag !== undefined) {
    const ms = parseDuration(lifetimeFlag);
    if (ms === undefined) problems.push(`--max-exception-lifetime "${lifetimeFlag}" is not a duration; write it like 720h`);
    else if (ms > 0) maxLifetimeMs = ms;
  }
  return {
    exceptions: { exceptionNamespaces: exceptionNamespaces.length > 0 ? exceptionNamespaces : [DEFAULT_EXCEPTION_NAMESPACE], maxLifetimeMs },
    now,
  };
}

/** Reads and checks everything; returns the problems instead when there are any. */
async function load(argv: string[], io: CommandIO): Promise<{ help: true } | { problems: string[] } | Inputs> {
  const args = parseArgs(argv, FLAGS, 'portal test');
  if (args.values.has('help') && args.values.get('help')?.at(-1) !== 'false') return { help: true };
  const problems = [...args.problems];

  const outputs = args.values.get('output') ?? [];
  const output = outputs.at(-1) ?? 'table';
  if (!(OUTPUT_FORMATS as readonly string[]).includes(output)) {
    problems.push(`--output "${output}" is not supported; use one of ${OUTPUT_FORMATS.join(', ')}`);
  }
  const podSecurityVersion = args.values.get('pod-security-version')?.at(-1);
  if (podSecurityVersion !== undefined) {
    const p = podSecurityVersionProblem(podSecurityVersion);
    if (p) problems.push(`--pod-security-version: ${p}`);
  }
  const judging = judgingFlags(args.values, problems);
  const memory = evaluationMemoryFlag(args.values.get('evaluation-memory')?.at(-1));
  if ('problem' in memory) problems.push(memory.problem);
  const policyDirs = args.values.get('policies') ?? [];
  if (policyDirs.length === 0) problems.push('--policies DIR is required: the directory (or file) holding the rules to apply');
  if (args.positionals.length === 0) problems.push('no FILE given: name the manifest files or directories to evaluate');

  // Rules: every document must be a valid rule, names unique across directories.
  // A path that cannot be read is named with the flag it was given to.
  const { rules, ruleSources, exceptions, vap, problems: policyProblems } = await loadPolicies(policyDirs, { across: '--policies', takes: '--policies', flag: '--policies' });
  problems.push(...policyProblems.map((p) => p.message));

  // Resources: every document must be an object we can evaluate; rules are skipped.
  const resources: Resource[] = [];
  const namespaceLabels = new Map<string, Record<string, string>>();
  let skippedRules = 0;
  if (args.positionals.length > 0) {
    // One budget for every manifest of the run (bytes, documents, keys): the file that crosses it is named.
    const read = await readManifests(args.positionals, undefined, { ...(io.stdin ? { stdin: io.stdin } : {}), budget: new InputBudget() });
    for (const e of read.errors) problems.push(`${e.source}: ${e.message}`);
    for (const doc of read.documents) {
      if (isRuleObject(doc.object) || isVapDocument(doc.object)) {
        skippedRules++;
        continue;
      }
      const why = unsupported(doc.object);
      if (why) {
        problems.push(`${doc.source}: object #${doc.index + 1}: ${why}`);
        continue;
      }
      const resource = toResource(doc.object);
      if (resource.ref.kind === 'Namespace') namespaceLabels.set(resource.ref.name, stringLabels(doc.object));
      resources.push(resource);
      // An input of some policy's paramKind is also a param (as it would be in the cluster).
      const pk = `${resource.ref.apiVersion}/${resource.ref.kind}`;
      if (vap.policies.some((p) => p.policy.spec.paramKind && `${p.policy.spec.paramKind.apiVersion}/${p.policy.spec.paramKind.kind}` === pk)) {
        vap.params.push({ source: doc.source, object: doc.object as KubeObject });
      }
    }
    if (read.errors.length === 0 && resources.length === 0 && problems.length === 0) {
      problems.push(
        skippedRules > 0
          ? 'the FILE arguments hold only rules; name the manifests to evaluate (rules are not evaluated as resources)'
          : `the FILE arguments (${args.positionals.join(', ')}) hold no Kubernetes objects: they are empty or hold only comments; name files with apiVersion/kind/metadata documents`,
      );
    }
  }
  if (problems.length > 0 || 'problem' in memory) return { problems };
  return { format: output as OutputFormat, rules, ruleSources, exceptions, judging, vap, resources, namespaceLabels, podSecurityVersion, memory: memory.memory };
}

export async function runTest(argv: string[], io: CommandIO): Promise<number> {
  // Without --policies, the arguments are test suites (src/cli/test-suite).
  if (isSuiteRun(argv)) return (await import('./test-suite/command.ts')).runSuites(argv, io);
  // The thread that evaluates starts now: it loads its modules while this one reads the inputs.
  const thread = startThread(parseArgs(argv, FLAGS, 'portal test').values.get('evaluation-memory')?.at(-1));
  try {
    return await evaluateLoaded(await load(argv, io), io, thread);
  } finally {
    await thread?.close();
  }
}

/** An evaluation thread started with the limits --evaluation-memory asks for (none when it is not valid: load() reports it). */
function startThread(flag: string | undefined): EvaluationThread | undefined {
  const memory = evaluationMemoryFlag(flag);
  if ('problem' in memory) return undefined;
  releaseThreadHeapFlags();
  const thread = new EvaluationThread(memory.memory);
  thread.start();
  return thread;
}

async function evaluateLoaded(loaded: Awaited<ReturnType<typeof load>>, io: CommandIO, thread: EvaluationThread | undefined): Promise<number> {
  if ('help' in loaded) {
    io.stdout.write(HELP + (await import('./test-suite/command.ts')).SUITE_HELP);
    return EXIT_OK;
  }
  if ('problems' in loaded) return reportProblems(loaded.problems, io, 'Nothing was evaluated.');

  // The one offline evaluation, shared with the suites (src/cli/offline), in a thread of bounded memory.
  const evaluations = await evaluateBounded(loaded, thread ?? new EvaluationThread(loaded.memory));
  const overruns: string[] = [];
  const vapProblems: string[] = [];
  const evaluated: EvaluatedResource[] = loaded.resources.map((resource, i) => {
    const e = evaluations[i]!;
    overruns.push(...e.overruns);
    vapProblems.push(...e.problems);
    return { resource: resource.ref, verdicts: e.verdicts };
  });
  // A CEL expression that exceeds its cost limit is a defect of the rule (an
  // unbounded loop), reported like any other bad input.
  if (overruns.length > 0) {
    io.stderr.write(`portal test: ${overruns.length} CEL cost overrun${overruns.length === 1 ? '' : 's'}:\n`);
    for (const p of overruns) io.stderr.write(`  - ${p}\n`);
    io.stderr.write('Bound the loops of these expressions (the per-expression limit is 1,000,000 units, the per-object budget 10,000,000) and run again.\n');
    return EXIT_USAGE;
  }
  // A cost overrun or a missing param is the policy's or the test setup's fault, not the object's.
  if (vapProblems.length > 0) return reportProblems([...new Set(vapProblems)], io, 'The policies were evaluated, but these results would not mean anything.');
  const results = toResults(evaluated);

  switch (loaded.format) {
    case 'json':
      io.stdout.write(formatJson(results));
      break;
    case 'policyreport':
    case 'openreports':
      io.stdout.write(formatReports(evaluated, new Date(), loaded.format));
      break;
    case 'table':
      io.stdout.write(formatTable(results, { rules: loaded.rules.length, policies: loaded.vap.policies.length, resources: loaded.resources.length }));
      break;
  }
  return results.some((r) => r.result === 'fail' || r.result === 'error') ? EXIT_FAILURE : EXIT_OK;
}

/** Every resource's evaluation (operation AUDIT), in the evaluation thread (offline/evaluation-thread.ts). */
async function evaluateBounded(loaded: Inputs, thread: EvaluationThread): ReturnType<EvaluationThread['evaluate']> {
  const { rules, ruleSources, exceptions, vap } = loaded;
  const setup = { policies: { rules, ruleSources, exceptions, vap }, namespaces: { labels: loaded.namespaceLabels, podSecurityVersion: loaded.podSecurityVersion }, params: [], judging: loaded.judging };
  try {
    return await thread.evaluate(setup, loaded.resources.map((resource) => ({ resource, request: { operation: 'AUDIT' } })));
  } finally {
    await thread.close();
  }
}

function reportProblems(problems: readonly string[], io: CommandIO, what: string): number {
  io.stderr.write(`portal test: ${problems.length} problem${problems.length === 1 ? '' : 's'} with the input:\n`);
  for (const p of problems) io.stderr.write(`  - ${p.replace(/\n/g, '\n    ')}\n`);
  io.stderr.write(`${what} Fix the problems above and run again ('portal test --help' for usage).\n`);
  return EXIT_USAGE;
}

/**
 * Suites run when neither --policies (the ad-hoc mode), a misspelling of it
 * (reported by the ad-hoc mode as such), nor --help is given.
 */
function isSuiteRun(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  const flags = end === -1 ? argv : argv.slice(0, end);
  return !flags.some((a) => /^(-p|--help|-h)(=|$)/.test(a) || (a.startsWith('--') && editDistance(a.slice(2).split('=')[0] ?? '', 'policies') <= 2));
}

export const testCommand: Command = { output: RESULT_OUTPUT, run: runTest };
