/**
 * `portal serve --policies DIR`: the rules in force read once from a
 * directory (rule-files.ts), no cluster. Ready only when every file was read
 * and every rule and exception is valid.
 */
import { RuleSet, type ExceptionOptions, type PortalExceptionObject, type PortalRuleObject } from '../policy/index.ts';
import { nameOnlyNamespaceLabels } from '../policy/review/answer.ts';
import type { RuleSource } from './rule-source.ts';

export interface LoadedRules {
  rules: PortalRuleObject[];
  /** PortalExceptions found beside the rules (validated). */
  exceptions?: PortalExceptionObject[];
  errors: { source: string; message: string }[];
  /**
   * ValidatingAdmissionPolicies found beside the rules: validated (an invalid
   * one is an error above) but not enforced by the webhook, since the API
   * server enforces them (docs/vap.md).
   */
  vap?: { policies: readonly unknown[] };
}

export type RuleLoader = (dir: string) => Promise<LoadedRules>;

export class FileRuleSource implements RuleSource {
  readonly ruleSet: RuleSet;
  readonly namespaceLabels = nameOnlyNamespaceLabels;
  readonly #dir: string;
  readonly #loader: RuleLoader;
  #loaded = false;

  constructor(dir: string, loader: RuleLoader, exceptions: ExceptionOptions = {}) {
    this.#dir = dir;
    this.#loader = loader;
    this.ruleSet = new RuleSet(exceptions);
  }

  /**
   * Loads every manifest. Returns the problems (unreadable files, invalid or
   * uncompilable rules); the source is ready only when there are none.
   */
  async load(): Promise<{ source: string; message: string }[]> {
    const { rules, exceptions, errors, vap } = await this.#loader(this.#dir);
    const problems = [...errors];
    for (const rule of rules) {
      const state = this.ruleSet.upsert(rule);
      if (!state.ready) problems.push({ source: state.key, message: state.message });
    }
    for (const ex of exceptions ?? []) {
      const state = this.ruleSet.upsertException(ex);
      if (!state.valid) problems.push({ source: state.key, message: state.message });
    }
    if (rules.length === 0 && errors.length === 0) {
      problems.push({
        source: this.#dir,
        message: (vap?.policies.length ?? 0) > 0
          ? 'no rules found, only ValidatingAdmissionPolicies: the webhook enforces PortalRule / PortalClusterRule objects, and the API server enforces VAPs itself (see docs/vap.md)'
          : 'no rules found',
      });
    }
    this.#loaded = problems.length === 0;
    return problems;
  }

  ready(): boolean {
    return this.#loaded;
  }

  notReadyReason(): string {
    return `rules from ${this.#dir} not loaded`;
  }

  async start(signal: AbortSignal): Promise<void> {
    // Files are read once at start-up; nothing to watch yet.
    if (signal.aborted) return;
    await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
  }
}
