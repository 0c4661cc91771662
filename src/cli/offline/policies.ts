/**
 * The policies `portal test` applies, from several files or directories:
 * Portal rules, PortalExceptions, ValidatingAdmissionPolicies with their
 * bindings, and param objects, each directory read by loadRulesFromDirectory (the loader of
 * `portal serve --policies`), names unique across all of them. Problems are
 * collected, never thrown.
 */
import { loadRulesFromDirectory } from '../../sources/rule-files.ts';
import type { VapDocuments } from '../../sources/vap-files.ts';
import { exceptionKey, ruleKey, type PortalExceptionObject, type PortalRuleObject } from '../../policy/index.ts';

export interface LoadedPolicies {
  rules: PortalRuleObject[];
  /** Rule key (`Kind/name`) → the path it was loaded from. */
  ruleSources: Map<string, string>;
  exceptions: PortalExceptionObject[];
  vap: VapDocuments;
}

export interface PolicyProblem {
  /** The path given (a directory or file), as the caller named it. */
  path: string;
  message: string;
}

/** How messages name where the paths came from. */
export interface PolicyNaming {
  /** The set, in duplicate messages: "--policies", "the suite's policies". */
  across: string;
  /** What takes a directory, in "holds no rules" messages: "--policies", "a suite's policies entry". */
  takes: string;
  /** Prefixed to a path that cannot be read at all (the flag it was given to), if any. */
  flag?: string;
}

/** Loads every path in order. */
export async function loadPolicies(paths: readonly string[], naming: PolicyNaming): Promise<LoadedPolicies & { problems: PolicyProblem[] }> {
  const { across } = naming;
  const problems: PolicyProblem[] = [];
  const rules: PortalRuleObject[] = [];
  const ruleSources = new Map<string, string>();
  const exceptions: PortalExceptionObject[] = [];
  const exceptionSources = new Map<string, string>();
  const vap: VapDocuments = { policies: [], bindings: [], params: [] };
  const vapSources = new Map<string, string>();
  for (const dir of paths) {
    const loaded = await loadRulesFromDirectory(dir);
    for (const e of loaded.errors) problems.push({ path: dir, message: `${e.source === dir && naming.flag ? `${naming.flag} ` : ''}${e.source}: ${e.message}` });
    for (const ex of loaded.exceptions) {
      const key = exceptionKey(ex);
      const other = exceptionSources.get(key);
      if (other !== undefined) {
        problems.push({ path: dir, message: `${dir}: PortalException ${ex.metadata.namespace ?? ''}/${ex.metadata.name} is also defined in ${other}; names must be unique across ${across}` });
        continue;
      }
      exceptionSources.set(key, dir);
      exceptions.push(ex);
    }
    if (loaded.errors.length === 0 && loaded.rules.length === 0 && loaded.vap.policies.length === 0 && loaded.exceptions.length === 0) {
      problems.push({ path: dir, message: `${dir}: holds no rules; ${naming.takes} takes a directory of PortalRule / PortalClusterRule or ValidatingAdmissionPolicy manifests` });
    }
    for (const [kind, list] of [
      ['ValidatingAdmissionPolicy', loaded.vap.policies.map((p) => p.policy)],
      ['ValidatingAdmissionPolicyBinding', loaded.vap.bindings.map((b) => b.binding)],
    ] as const) {
      for (const o of list) {
        const key = `${kind}/${o.metadata.name}`;
        const other = vapSources.get(key);
        if (other !== undefined) problems.push({ path: dir, message: `${dir}: ${kind} "${o.metadata.name}" is also defined in ${other}; names must be unique across ${across}` });
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
        problems.push({ path: dir, message: `${dir}: rule ${key} is also defined in ${other}; rule names must be unique across ${across}` });
        continue;
      }
      ruleSources.set(key, dir);
      rules.push(rule);
    }
  }
  return { rules, ruleSources, exceptions, vap, problems };
}
