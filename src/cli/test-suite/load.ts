/**
 * Everything a parsed suite names, read and checked before anything is
 * evaluated: its policies (the loader of `portal serve --policies`), its
 * resources, namespaces and old objects (the manifest reader of the ad-hoc
 * mode), paths relative to the suite file. Every problem carries the line of
 * the entry it comes from; a suite with problems is not run.
 */
import { dirname, isAbsolute, join } from 'node:path';
import { InputBudget } from '../../config/input-budget.ts';
import { readManifests } from '../../config/manifests.ts';
import type { ManifestDocument } from '../../config/manifest-document.ts';
import { loadRulesFromDirectory } from '../../sources/rule-files.ts';
import { exceptionKey, parseRfc3339, type KubeObject, type PortalExceptionObject } from '../../policy/index.ts';
import { describe, type OfflineRequest } from '../offline/evaluator.ts';
import type { EvaluatorSetup } from '../offline/evaluation-thread.ts';
import { loadPolicies } from '../offline/policies.ts';
import { isPolicyObject, stringLabels, toResource, unsupported, type Resource } from '../offline/resources.ts';
import type { SuiteProblem, SuiteSpec } from './format.ts';
import { pathText, type Locator, type SuitePath } from './parse.ts';

/** One expectation: a resource named by a results entry. */
export interface PlannedExpectation {
  /** Index of the results entry. */
  entry: number;
  /** Where the resource's name is written. */
  line: number;
  resource: Resource;
}

export interface LoadedSuite {
  file: string;
  name: string;
  spec: SuiteSpec;
  /** What the evaluation thread builds the suite's OfflineEvaluator from. */
  setup: EvaluatorSetup;
  resources: Resource[];
  /** UPDATE: each resource's old object, by resourceKey(). */
  oldObjects: Map<string, KubeObject>;
  request: Omit<OfflineRequest, 'oldObject'>;
  expectations: PlannedExpectation[];
}

export function resourceKey(r: { kind: string; namespace: string; name: string }): string {
  return `${r.kind}\u0000${r.namespace}\u0000${r.name}`;
}

/** What every part of the loading shares: where problems go and how paths resolve. */
interface Ctx {
  file: string;
  locate: Locator;
  problems: SuiteProblem[];
  /** A path of the suite, relative to its file. */
  abs(p: string): string;
  problem(at: SuitePath, message: string): void;
  /**
   * The budget of every manifest the suite names (input-budget.ts). Per
   * suite: suites run one after the other and each one's objects are
   * dropped once it has run, so this bounds what a run holds at once.
   */
  budget: InputBudget;
}

/** Reads one entry's files; problems point at the entry. */
async function read(ctx: Ctx, path: string, at: SuitePath): Promise<ManifestDocument[]> {
  const r = await readManifests([path], undefined, { budget: ctx.budget });
  for (const e of r.errors) ctx.problems.push({ file: ctx.file, position: ctx.locate.at(at), message: `${pathText(at)}: ${e.source}: ${e.message}` });
  return r.documents;
}

type Policies = Awaited<ReturnType<typeof loadPolicies>>;

/**
 * Exceptions: those among the policies, and the PortalException files of
 * `exceptions:`, judged as `portal serve` judges them with the chart's
 * defaults (OfflineEvaluator); names unique in a namespace.
 */
async function readExceptions(ctx: Ctx, spec: SuiteSpec, policies: Policies): Promise<PortalExceptionObject[]> {
  const exceptions: PortalExceptionObject[] = [...policies.exceptions];
  const exceptionSource = new Map<string, string>(exceptions.map((e) => [exceptionKey(e), "the suite's policies"]));
  for (const [i, path] of (spec.exceptions ?? []).map(ctx.abs).entries()) {
    const at: SuitePath = ['exceptions', i];
    const loaded = await loadRulesFromDirectory(path);
    for (const e of loaded.errors) ctx.problem(at, `${e.source}: ${e.message}`);
    if (loaded.rules.length > 0 || loaded.vap.policies.length > 0 || loaded.vap.bindings.length > 0) {
      ctx.problem(at, `${path}: holds rules or policies; exceptions lists PortalException manifests only (rules and policies go under policies)`);
    }
    if (loaded.errors.length === 0 && loaded.exceptions.length === 0) ctx.problem(at, `${path}: holds no PortalException`);
    for (const ex of loaded.exceptions) {
      const key = exceptionKey(ex);
      const other = exceptionSource.get(key);
      if (other !== undefined) {
        ctx.problem(at, `PortalException ${ex.metadata.namespace ?? ''}/${ex.metadata.name} is also defined in ${other}; names must be unique in a namespace`);
        continue;
      }
      exceptionSource.set(key, path);
      exceptions.push(ex);
    }
  }
  return exceptions;
}

interface Objects {
  resources: Resource[];
  /** resourceKey() -> the file that defines it. */
  where: Map<string, string>;
  namespaceLabels: Map<string, Record<string, string>>;
  /** Namespace name -> where its labels come from. */
  namespaceSource: Map<string, string>;
  params: { source: string; object: KubeObject }[];
}

/** Resources: objects to evaluate, each named once (Namespaces among them also give labels; objects of a paramKind are params). */
async function readResources(ctx: Ctx, spec: SuiteSpec, policies: Policies): Promise<Objects> {
  const out: Objects = { resources: [], where: new Map(), namespaceLabels: new Map(), namespaceSource: new Map(), params: [] };
  const paramKinds = new Set(policies.vap.policies.flatMap((p) => (p.policy.spec.paramKind ? [`${p.policy.spec.paramKind.apiVersion}/${p.policy.spec.paramKind.kind}`] : [])));
  for (const [i, path] of spec.resources.map(ctx.abs).entries()) {
    const at: SuitePath = ['resources', i];
    for (const doc of await read(ctx, path, at)) {
      if (isPolicyObject(doc.object)) continue;
      const why = unsupported(doc.object);
      if (why) {
        ctx.problem(at, `${doc.source}: object #${doc.index + 1}: ${why}`);
        continue;
      }
      const r = toResource(doc.object);
      const key = resourceKey(r.ref);
      const other = out.where.get(key);
      if (other !== undefined) {
        ctx.problem(at, `${doc.source}: ${describe(r.ref)} is also defined in ${other}; a suite names its resources by kind, namespace and name, so each must be unique`);
        continue;
      }
      out.where.set(key, doc.source);
      out.resources.push(r);
      if (r.ref.kind === 'Namespace') {
        out.namespaceLabels.set(r.ref.name, stringLabels(doc.object));
        out.namespaceSource.set(r.ref.name, doc.source);
      }
      if (paramKinds.has(`${r.ref.apiVersion}/${r.ref.kind}`)) out.params.push({ source: doc.source, object: doc.object as KubeObject });
    }
  }
  return out;
}

/** Namespaces: context only (labels), never evaluated; each namespace's labels given once. */
async function readNamespaces(ctx: Ctx, spec: SuiteSpec, objects: Objects): Promise<void> {
  for (const [i, n] of (spec.namespaces ?? []).entries()) {
    const at: SuitePath = ['namespaces', i];
    const found: { name: string; labels: Record<string, string>; source: string }[] = [];
    if (typeof n === 'string') {
      for (const doc of await read(ctx, ctx.abs(n), at)) {
        const why = unsupported(doc.object);
        if (why || doc.object['kind'] !== 'Namespace') {
          ctx.problem(at, `${doc.source}: object #${doc.index + 1}: ${why ?? `is a ${String(doc.object['kind'])}; namespaces lists Namespace manifests only (resources are under resources)`}`);
          continue;
        }
        found.push({ name: toResource(doc.object).ref.name, labels: stringLabels(doc.object), source: doc.source });
      }
    } else found.push({ name: n.name, labels: { ...(n.labels ?? {}) }, source: `namespaces[${i}]` });
    for (const ns of found) {
      const other = objects.namespaceSource.get(ns.name);
      if (other !== undefined) {
        ctx.problem(at, `namespace "${ns.name}" is also given in ${other}; give each namespace's labels once`);
        continue;
      }
      objects.namespaceSource.set(ns.name, ns.source);
      objects.namespaceLabels.set(ns.name, ns.labels);
    }
  }
}

/** Old objects (UPDATE): one per resource, matched by kind, namespace and name. */
async function readOldObjects(ctx: Ctx, spec: SuiteSpec, objects: Objects): Promise<Map<string, KubeObject>> {
  const oldObjects = new Map<string, KubeObject>();
  for (const [i, path] of (spec.oldResources ?? []).map(ctx.abs).entries()) {
    const at: SuitePath = ['oldResources', i];
    for (const doc of await read(ctx, path, at)) {
      const why = unsupported(doc.object);
      if (why) {
        ctx.problem(at, `${doc.source}: object #${doc.index + 1}: ${why}`);
        continue;
      }
      const ref = toResource(doc.object).ref;
      const key = resourceKey(ref);
      if (!objects.where.has(key)) ctx.problem(at, `${doc.source}: ${describe(ref)} is not among the resources; each old object is the earlier version of a resource`);
      else if (oldObjects.has(key)) ctx.problem(at, `${doc.source}: ${describe(ref)} is given twice`);
      else oldObjects.set(key, doc.object as KubeObject);
    }
  }
  return oldObjects;
}

/** The results: every rule, binding and resource they name must exist, and each resource is expected once per rule. */
function planExpectations(ctx: Ctx, spec: SuiteSpec, policies: Policies, resources: readonly Resource[]): PlannedExpectation[] {
  const rules = new Map<string, string>();
  for (const r of policies.rules) rules.set(r.kind === 'PortalRule' ? `${r.metadata.namespace ?? ''}/${r.metadata.name}` : r.metadata.name, r.kind);
  const vapNames = new Set(policies.vap.policies.map((p) => p.policy.metadata.name));
  const bindings = new Map<string, string[]>();
  for (const { binding } of policies.vap.bindings) bindings.set(binding.spec.policyName, [...(bindings.get(binding.spec.policyName) ?? []), binding.metadata.name]);
  const byKindName = new Map<string, Resource[]>();
  for (const r of resources) {
    const k = `${r.ref.kind}\u0000${r.ref.name}`;
    byKindName.set(k, [...(byKindName.get(k) ?? []), r]);
  }
  const expectations: PlannedExpectation[] = [];
  const named = new Map<string, number>();
  for (const [i, e] of spec.results.entries()) {
    const ruleKind = rules.get(e.rule);
    const isVap = vapNames.has(e.rule);
    if (ruleKind === undefined && !isVap) {
      const known = [...rules.keys(), ...vapNames].sort();
      ctx.problem(['results', i, 'rule'], `no rule or ValidatingAdmissionPolicy named "${e.rule}" among the suite's policies${known.length <= 30 ? ` (known: ${known.join(', ')})` : ''}`);
      continue;
    }
    if (ruleKind !== undefined && isVap) {
      ctx.problem(['results', i, 'rule'], `"${e.rule}" names both a ${ruleKind} and a ValidatingAdmissionPolicy among the suite's policies; test them in separate suites`);
      continue;
    }
    if (e.binding !== undefined) {
      if (!isVap) {
        ctx.problem(['results', i, 'binding'], `binding is for ValidatingAdmissionPolicies; "${e.rule}" is a ${String(ruleKind)}`);
        continue;
      }
      const names = bindings.get(e.rule) ?? [];
      if (!names.includes(e.binding)) {
        ctx.problem(['results', i, 'binding'], `ValidatingAdmissionPolicy "${e.rule}" has no binding "${e.binding}" (its bindings: ${names.join(', ') || 'none'})`);
        continue;
      }
    }
    for (const [j, name] of e.resources.entries()) {
      const at: SuitePath = ['results', i, 'resources', j];
      const candidates = (byKindName.get(`${e.kind}\u0000${name}`) ?? []).filter((r) => e.namespace === undefined || r.ref.namespace === e.namespace);
      if (candidates.length === 0) {
        ctx.problem(at, `no ${e.kind} named "${name}"${e.namespace !== undefined ? ` in namespace "${e.namespace}"` : ''} among the resources`);
        continue;
      }
      if (candidates.length > 1) {
        ctx.problem(at, `${e.kind} "${name}" exists in several namespaces (${candidates.map((r) => r.ref.namespace).sort().join(', ')}); set namespace in this entry`);
        continue;
      }
      const resource = candidates[0] as Resource;
      const key = `${e.rule}\u0000${e.binding ?? ''}\u0000${resourceKey(resource.ref)}`;
      const first = named.get(key);
      if (first !== undefined) {
        ctx.problem(at, `${describe(resource.ref)} is already expected for ${e.rule}${e.binding ? ` (binding ${e.binding})` : ''} at line ${first}; name each resource once per rule`);
        continue;
      }
      const line = ctx.locate.at(at).line;
      named.set(key, line);
      expectations.push({ entry: i, line, resource });
    }
  }
  return expectations;
}

export async function loadSuite(file: string, spec: SuiteSpec, locate: Locator): Promise<{ ok: true; suite: LoadedSuite } | { ok: false; problems: SuiteProblem[] }> {
  const base = dirname(file);
  const problems: SuiteProblem[] = [];
  const ctx: Ctx = {
    file,
    locate,
    problems,
    abs: (p) => (isAbsolute(p) ? p : join(base, p)),
    problem: (at, message) => problems.push({ file, position: locate.at(at), message: `${pathText(at)}: ${message}` }),
    budget: new InputBudget(),
  };

  // Policies: one load, so names are checked across every entry.
  const policyPaths = spec.policies.map(ctx.abs);
  const policies = await loadPolicies(policyPaths, { across: "the suite's policies", takes: "a suite's policies entry" });
  for (const p of policies.problems) {
    const i = policyPaths.indexOf(p.path);
    ctx.problem(['policies', i < 0 ? 0 : i], p.message);
  }
  const exceptions = await readExceptions(ctx, spec, policies);
  const objects = await readResources(ctx, spec, policies);
  await readNamespaces(ctx, spec, objects);
  const oldObjects = await readOldObjects(ctx, spec, objects);
  const { resources } = objects;
  const operation = spec.operation ?? 'CREATE';
  if (operation === 'UPDATE' && problems.length === 0) {
    const missing = resources.filter((r) => !oldObjects.has(resourceKey(r.ref))).map((r) => describe(r.ref));
    if (missing.length > 0) ctx.problem(['oldResources'], `no old object for ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ` and ${missing.length - 5} more` : ''}; an UPDATE needs the object before the change for every resource`);
  }
  if (problems.length === 0 && resources.length === 0) ctx.problem(['resources'], 'holds no object to evaluate (rules and policies among the files are not resources)');
  if (problems.length > 0) return { ok: false, problems };

  const expectations = planExpectations(ctx, spec, policies, resources);
  if (problems.length > 0) return { ok: false, problems };

  // `now` is when expiry is judged; checked (a real date) by parse.ts.
  const now = spec.now !== undefined ? parseRfc3339(spec.now) : undefined;
  const setup: EvaluatorSetup = {
    policies: { rules: policies.rules, ruleSources: policies.ruleSources, exceptions, vap: policies.vap },
    namespaces: { labels: objects.namespaceLabels },
    params: objects.params,
    judging: now !== undefined ? { now } : {},
  };
  const request: LoadedSuite['request'] = { operation };
  if (spec.userInfo) request.userInfo = spec.userInfo;
  return { ok: true, suite: { file, name: spec.metadata?.name ?? '', spec, setup, resources, oldObjects, request, expectations } };
}
