/**
 * What a replica's mode contributes (file mode, cluster mode): where rules
 * come from, the Runnables to run (each with its group), an election when
 * there is one, and what to close after the Manager stopped.
 */
import type { RuleSource } from '../sources/rule-source.ts';
import type { RuleProblems } from '../audit/rule-problems.ts';
import type { ServeConfig } from '../config/options.ts';
import type { ExceptionOptions } from '../policy/index.ts';
import type { KindSchemaSource } from '../policy/kind-schemas/catalogue.ts';
import type { Outcome } from '../policy/review/answer.ts';
import type { Election } from './manager.ts';
import type { Runnable, RunnableGroup } from '../util/runnable.ts';

export interface ModeRunnable {
  runnable: Runnable;
  /** Ignored for leader-only runnables (needLeaderElection() = true): they run with the term. */
  group: RunnableGroup;
}

export interface Mode {
  readonly kind: 'files' | 'cluster';
  readonly source: RuleSource;
  readonly runnables: readonly ModeRunnable[];
  readonly election?: Election;
  /** The schemas rules are type-checked against at apply (built-ins, plus the cluster's CRDs in cluster mode); default: the built-in catalogue. */
  readonly kindSchemas?: KindSchemaSource;
  /** Where rule errors go (the metric; Events in cluster mode). */
  readonly ruleProblems: RuleProblems;
  /** Events of denied requests (`--denial-events`, cluster mode): fed by the webhook, written off its path. */
  readonly denialEvents?: { denied(out: Outcome): void };
  /** Idempotent; called once the Manager has stopped (or was never started). */
  close(): Promise<void>;
}

/** A configuration or environment problem found while building (exit code 2 at the CLI). */
export interface BuildProblems {
  title: string;
  problems: string[];
}

/** How the RuleSet judges PortalExceptions, from `--exception-namespaces` and `--max-exception-lifetime` (0: no limit). */
export function exceptionOptions(config: Readonly<Pick<ServeConfig, 'exceptionNamespaces' | 'maxExceptionLifetime'>>): ExceptionOptions {
  return { exceptionNamespaces: config.exceptionNamespaces, maxLifetimeMs: config.maxExceptionLifetime > 0 ? config.maxExceptionLifetime : undefined };
}
