/**
 * `portal test --policies DIR [--output table|json|policyreport|openreports] FILE...`
 * (DESIGN §6): offline evaluation of manifests against rules, like
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
import { parseArgs, type FlagDef } from './args.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type Command, type CommandIO } from './command.ts';
import { loadRulesFromDirectory, readManifests } from '../config/manifests.ts';
import { isVapDocument, type VapDocuments } from '../config/vap-manifests.ts';
import {
  guessResource,
  VapSet,
  vapVerdicts,
  type ParamProvider,
  type ValidatingAdmissionPolicy,
  type VapAttributes,
} from '../policy/vap/index.ts';
import { selectorMatches } from '../policy/label-selector.ts';
import {
  evaluate,
  POD_SECURITY_VERSION_LABEL,
  podSecurityVersionProblem,
  isCostOverrun,
  ruleKey,
  RuleSet,
  RULE_GROUP,
  type EvaluationInput,
  type KubeObject,
  type PortalRuleObject,
  type RuleVerdict,
} from '../policy/index.ts';
import {
  formatJson,
  formatReports,
  formatTable,
  OUTPUT_FORMATS,
  toResults,
  type EvaluatedResource,
  type OutputFormat,
  type ResourceRef,
} from '../policy/report-format.ts';

const HELP = `Usage: portal test --policies DIR [--policies DIR...] [--output table|json|policyreport|openreports]
                   [--pod-security-version VERSION] FILE...

Evaluates Kubernetes manifests against Portal rules and ValidatingAdmissionPolicies
offline, as the webhook, the API server and the audit would (operation AUDIT: every
rule matching the kind applies; a VAP applies where its rules admit CREATE).

Arguments:
  FILE...                 manifest files or directories (recursive; .yaml, .yml, .json;
                          multi-document YAML, JSON objects, arrays and Lists).
                          Rules, policies and bindings among them are not evaluated.
Flags:
  --policies, -p DIR      rules to apply: a directory or file of PortalRule /
                          PortalClusterRule objects, ValidatingAdmissionPolicies with
                          their bindings, and the param objects of their paramKind
                          (repeatable, required)
  --output, -o FORMAT     table (default), json, policyreport (a YAML stream of
                          wgpolicyk8s.io PolicyReport / ClusterPolicyReport, one per
                          resource) or openreports (the same as openreports.io
                          Report / ClusterReport)
  --pod-security-version VERSION
                          evaluate Pod Security rules at VERSION (latest or v1.N): every
                          namespace gets the label pod-security.kubernetes.io/enforce-version
                          unless its Namespace among the FILE arguments sets it
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

Exit codes: 0 nothing failed (warn is not a failure), 1 a rule failed or could
not be evaluated, 2 bad input (flags, files, YAML, objects, rules or policies:
a CEL expression that does not compile is reported with its file, rule or
policy and position; one that exceeds its cost limit, or a missing param, too).
`;

const FLAGS: readonly FlagDef[] = [
  { flag: 'policies', type: 'value', short: 'p' },
  { flag: 'output', type: 'value', short: 'o' },
  { flag: 'pod-security-version', type: 'value' },
  { flag: 'help', type: 'bool', short: 'h' },
];

/**
 * Built-in cluster-scoped kinds that appear in manifests; any other kind
 * without metadata.namespace is taken to be namespaced. Offline there is no
 * discovery to ask, so this list is the documented assumption.
 */
const CLUSTER_SCOPED_KINDS = new Set([
  'Namespace',
  'Node',
  'PersistentVolume',
  'ClusterRole',
  'ClusterRoleBinding',
  'StorageClass',
  'CSIDriver',
  'CSINode',
  'VolumeAttachment',
  'PriorityClass',
  'RuntimeClass',
  'IngressClass',
  'CustomResourceDefinition',
  'APIService',
  'MutatingWebhookConfiguration',
  'ValidatingWebhookConfiguration',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
  'CertificateSigningRequest',
  'FlowSchema',
  'PriorityLevelConfiguration',
  'ClusterPolicyReport',
  'PortalClusterRule',
]);

const DEFAULT_NAMESPACE = 'default';
const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/** `v1`, `apps/v1`, `example.com/v1beta2`: what a resource's apiVersion looks like. */
const API_VERSION = /^([a-z0-9]([a-z0-9.-]*[a-z0-9])?\/)?v[0-9]+((alpha|beta)[0-9]+)?$/;
/** Kinds are CamelCase identifiers. */
const KIND = /^[A-Z][A-Za-z0-9]*$/;

interface Resource {
  ref: ResourceRef;
  input: Omit<EvaluationInput, 'namespaceLabels'>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function isRuleObject(o: Record<string, unknown>): boolean {
  const apiVersion = o['apiVersion'];
  return typeof apiVersion === 'string' && apiVersion.startsWith(`${RULE_GROUP}/`) && (o['kind'] === 'PortalRule' || o['kind'] === 'PortalClusterRule');
}

/** Why an input document cannot be evaluated, or undefined when it can. */
function unsupported(o: Record<string, unknown>): string | undefined {
  const missing: string[] = [];
  const apiVersion = o['apiVersion'];
  const kind = o['kind'];
  const metadata = o['metadata'];
  const name = isObject(metadata) ? metadata['name'] : undefined;
  if (typeof apiVersion !== 'string' || apiVersion === '') missing.push('apiVersion');
  if (typeof kind !== 'string' || kind === '') missing.push('kind');
  if (typeof name !== 'string' || name === '') missing.push('metadata.name');
  if (missing.length > 0) {
    return `not a Kubernetes object: missing ${missing.join(', ')} (generated names are not supported offline)`;
  }
  if (!API_VERSION.test(apiVersion as string)) return `unknown apiVersion "${String(apiVersion)}" (expected "v1" or "group/version")`;
  if (!KIND.test(kind as string)) return `unknown kind "${String(kind)}" (kinds are CamelCase, e.g. Deployment)`;
  const namespace = isObject(metadata) ? metadata['namespace'] : undefined;
  if (namespace !== undefined && typeof namespace !== 'string') return 'metadata.namespace must be a string';
  return undefined;
}

function toResource(o: Record<string, unknown>): Resource {
  const apiVersion = o['apiVersion'] as string;
  const kind = o['kind'] as string;
  const metadata = o['metadata'] as Record<string, unknown>;
  const name = metadata['name'] as string;
  const slash = apiVersion.indexOf('/');
  const group = slash === -1 ? '' : apiVersion.slice(0, slash);
  const version = slash === -1 ? apiVersion : apiVersion.slice(slash + 1);
  const declared = metadata['namespace'];
  const namespace = typeof declared === 'string' && declared !== '' ? declared : CLUSTER_SCOPED_KINDS.has(kind) ? '' : DEFAULT_NAMESPACE;
  const ref: ResourceRef = { apiVersion, kind, namespace, name };
  if (typeof metadata['uid'] === 'string') ref.uid = metadata['uid'];
  return {
    ref,
    input: {
      operation: 'AUDIT',
      kind: { group, version, kind },
      subResource: '',
      namespace,
      name,
      object: o as KubeObject,
      oldObject: null,
    },
  };
}

function stringLabels(o: Record<string, unknown>): Record<string, string> {
  const metadata = o['metadata'];
  const labels = isObject(metadata) ? metadata['labels'] : undefined;
  const out: Record<string, string> = {};
  if (isObject(labels)) for (const [k, v] of Object.entries(labels)) if (typeof v === 'string') out[k] = v;
  return out;
}

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
}

/** Reads and checks everything; returns the problems instead when there are any. */
async function load(argv: string[]): Promise<{ help: true } | { problems: string[] } | Inputs> {
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
  const policyDirs = args.values.get('policies') ?? [];
  if (policyDirs.length === 0) problems.push('--policies DIR is required: the directory (or file) holding the rules to apply');
  if (args.positionals.length === 0) problems.push('no FILE given: name the manifest files or directories to evaluate');

  // Rules: every document must be a valid rule, names unique across directories.
  const rules: PortalRuleObject[] = [];
  const ruleSources = new Map<string, string>();
  const vap: VapDocuments = { policies: [], bindings: [], params: [] };
  const vapSources = new Map<string, string>();
  for (const dir of policyDirs) {
    const loaded = await loadRulesFromDirectory(dir);
    for (const e of loaded.errors) problems.push(`${e.source}: ${e.message}`);
    if (loaded.errors.length === 0 && loaded.rules.length === 0 && loaded.vap.policies.length === 0) {
      problems.push(`${dir}: holds no rules; --policies takes a directory of PortalRule / PortalClusterRule or ValidatingAdmissionPolicy manifests`);
    }
    for (const [kind, list] of [
      ['ValidatingAdmissionPolicy', loaded.vap.policies.map((p) => p.policy)],
      ['ValidatingAdmissionPolicyBinding', loaded.vap.bindings.map((b) => b.binding)],
    ] as const) {
      for (const o of list) {
        const key = `${kind}/${o.metadata.name}`;
        const other = vapSources.get(key);
        if (other !== undefined) problems.push(`${dir}: ${kind} "${o.metadata.name}" is also defined in ${other}; names must be unique across --policies`);
        vapSources.set(key, dir);
      }
    }
    vap.policies.push(...loaded.vap.policies);
    vap.bindings.push(...loaded.vap.bindings);
    vap.params.push(...loaded.vap.params);
    for (const rule of loaded.rules) {
      const key = ruleKey(rule);
      const other = ruleSources.get(key);
      if (other !== undefined) {
        problems.push(`${dir}: rule ${key} is also defined in ${other}; rule names must be unique across --policies`);
        continue;
      }
      ruleSources.set(key, dir);
      rules.push(rule);
    }
  }

  // Resources: every document must be an object we can evaluate; rules are skipped.
  const resources: Resource[] = [];
  const namespaceLabels = new Map<string, Record<string, string>>();
  let skippedRules = 0;
  if (args.positionals.length > 0) {
    const read = await readManifests(args.positionals);
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
  if (problems.length > 0) return { problems };
  return { format: output as OutputFormat, rules, ruleSources, vap, resources, namespaceLabels, podSecurityVersion };
}

function labelsOf(ns: string, known: Map<string, Record<string, string>>, podSecurityVersion: string | undefined): Record<string, string> | undefined {
  if (ns === '') return undefined;
  const own = known.get(ns) ?? {};
  const version = podSecurityVersion !== undefined && own[POD_SECURITY_VERSION_LABEL] === undefined ? { [POD_SECURITY_VERSION_LABEL]: podSecurityVersion } : {};
  // The name label is immutable and always set by the API server, whatever the manifest says.
  return { ...own, ...version, [NAMESPACE_NAME_LABEL]: ns };
}

export async function runTest(argv: string[], io: CommandIO): Promise<number> {
  const loaded = await load(argv);
  if ('help' in loaded) {
    io.stdout.write(HELP);
    return EXIT_OK;
  }
  if ('problems' in loaded) return reportProblems(loaded.problems, io, 'Nothing was evaluated.');

  const set = new RuleSet();
  for (const rule of loaded.rules) set.upsert(rule);
  const vaps = new VapSet();
  for (const { policy } of loaded.vap.policies) vaps.upsertPolicy(policy);
  for (const { binding } of loaded.vap.bindings) vaps.upsertBinding(binding);
  const vapByName = new Map<string, ValidatingAdmissionPolicy>(loaded.vap.policies.map((p) => [p.policy.metadata.name, p.policy]));
  const params = fileParams(loaded.vap);
  const vapSource = new Map(loaded.vap.policies.map((p) => [p.policy.metadata.name, p.source]));
  const vapProblems: string[] = [];

  const evaluated: EvaluatedResource[] = loaded.resources.map(({ ref, input }) => {
    // A Namespace is matched on its own labels (FACTS.md, namespaceSelector).
    const nsName = ref.kind === 'Namespace' ? ref.name : ref.namespace;
    const nsLabels = labelsOf(nsName, loaded.namespaceLabels, loaded.podSecurityVersion);
    // Sorted by rule, like the audit's reports, so output is stable across runs.
    const verdicts = safeEvaluate(set, loaded.rules, { ...input, namespaceLabels: nsLabels });
    if (vapByName.size > 0) {
      const namespaceObject = ref.namespace === '' ? null : { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ref.namespace, labels: labelsOf(ref.namespace, loaded.namespaceLabels, loaded.podSecurityVersion) ?? {} } };
      const attrs: VapAttributes = {
        operation: 'AUDIT',
        kind: input.kind,
        resource: { group: input.kind.group, version: input.kind.version, resource: guessResource(input.kind.kind) },
        subResource: '',
        namespace: ref.namespace,
        name: ref.name,
        namespaced: ref.namespace !== '',
        object: input.object,
        oldObject: null,
      };
      const vapResults = vaps.evaluate(attrs, { namespaceObject, params });
      for (const r of vapResults) {
        for (const p of r.problems) {
          const where = vapSource.get(r.policy) ?? '?';
          const binding = r.binding ? ` with binding "${r.binding}"` : '';
          vapProblems.push(`${where}: ValidatingAdmissionPolicy "${r.policy}"${binding} on ${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name}: ${p.message}`);
        }
      }
      verdicts.push(...vapVerdicts(vapResults, vapByName));
    }
    // Sorted by rule, like the audit's reports, so output is stable across runs (stable: bindings stay in order).
    verdicts.sort((a, b) => (a.rule < b.rule ? -1 : a.rule > b.rule ? 1 : 0));
    return { resource: ref, verdicts };
  });
  // A CEL expression that exceeds its cost limit is a defect of the rule (an
  // unbounded loop), reported like any other bad input.
  const overruns = evaluated.flatMap(({ resource, verdicts }) =>
    verdicts
      .filter((v) => v.result === 'error' && isCostOverrun(v.message))
      .map((v) => `${loaded.ruleSources.get(`${v.ruleKind}/${v.rule}`) ?? '?'}: ${v.ruleKind} "${v.rule}" on ${resource.kind} ${resource.namespace ? `${resource.namespace}/` : ''}${resource.name}: ${v.message}`),
  );
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
      io.stdout.write(formatTable(results, { rules: loaded.rules.length, resources: loaded.resources.length }));
      break;
  }
  return results.some((r) => r.result === 'fail' || r.result === 'error') ? EXIT_FAILURE : EXIT_OK;
}

function reportProblems(problems: readonly string[], io: CommandIO, what: string): number {
  io.stderr.write(`portal test: ${problems.length} problem${problems.length === 1 ? '' : 's'} with the input:\n`);
  for (const p of problems) io.stderr.write(`  - ${p.replace(/\n/g, '\n    ')}\n`);
  io.stderr.write(`${what} Fix the problems above and run again ('portal test --help' for usage).\n`);
  return EXIT_USAGE;
}

/**
 * Params from files: objects of a paramKind among the policies and inputs. A
 * namespaced param without metadata.namespace lives in "default", like any
 * manifest; kinds in CLUSTER_SCOPED_KINDS are cluster-scoped.
 */
function fileParams(vap: VapDocuments): ParamProvider {
  const ns = (o: KubeObject): string => {
    const declared = o.metadata?.namespace;
    return typeof declared === 'string' && declared !== '' ? declared : CLUSTER_SCOPED_KINDS.has(String(o.kind)) ? '' : DEFAULT_NAMESPACE;
  };
  return {
    scope: (kind) => ({ ok: true, namespaced: !CLUSTER_SCOPED_KINDS.has(kind.kind) }),
    find: (kind, namespace, ref) => ({
      ok: true,
      objects: vap.params
        .map((p) => p.object)
        .filter((o) => o.apiVersion === kind.apiVersion && o.kind === kind.kind && (namespace === '' || ns(o) === namespace))
        .filter((o) => ('name' in ref ? o.metadata?.name === ref.name : selectorMatches(ref.selector, o.metadata?.labels)))
        .sort((a, b) => `${ns(a)}/${a.metadata?.name ?? ''}`.localeCompare(`${ns(b)}/${b.metadata?.name ?? ''}`)),
    }),
  };
}

/**
 * evaluate(), but a rule whose schema throws on this input (e.g. a recursive
 * schema on a very deep object overflowing the stack) becomes an `error`
 * verdict for that rule instead of ending the run. Only after a throw are the
 * rules evaluated one by one, to find which one it was.
 */
function safeEvaluate(set: RuleSet, rules: readonly PortalRuleObject[], input: EvaluationInput): RuleVerdict[] {
  try {
    return evaluate(set, input);
  } catch {
    const out: RuleVerdict[] = [];
    for (const rule of rules) {
      const single = new RuleSet();
      const state = single.upsert(rule);
      const display = state.namespace === undefined ? state.name : `${state.namespace}/${state.name}`;
      try {
        out.push(...evaluate(single, input));
      } catch (err) {
        out.push({
          rule: display,
          ruleKind: state.ruleKind,
          enforcement: state.enforcement,
          severity: state.severity,
          category: state.category,
          result: 'error',
          message: `rule ${display} could not be evaluated: ${err instanceof Error ? err.message : String(err)}`,
          violations: [],
        });
      }
    }
    return out;
  }
}

export const testCommand: Command = { run: runTest };
