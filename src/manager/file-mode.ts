/**
 * File mode (`portal serve --policies DIR`): rules read once from manifests,
 * admission only — no cluster, no informers, no audit, no election.
 */
import { FileRuleSource } from '../sources/file-rule-source.ts';
import { loadRulesFromDirectory } from '../sources/rule-files.ts';
import type { Registry } from 'prom-client';
import { RuleProblems } from '../audit/rule-problems.ts';
import type { ExceptionOptions } from '../policy/index.ts';
import type { BuildProblems, Mode } from './mode.ts';

export async function fileMode(dir: string, registry: Registry, exceptions: ExceptionOptions = {}): Promise<Mode | BuildProblems> {
  const source = new FileRuleSource(dir, loadRulesFromDirectory, exceptions);
  const problems = await source.load();
  if (problems.length > 0) return { title: 'invalid rules', problems: problems.map((p) => `${p.source}: ${p.message}`) };
  return {
    kind: 'files',
    source,
    // No cluster: rule errors are only counted.
    ruleProblems: new RuleProblems({ registry }),
    // The files were read above; the runnable only keeps the source for the Manager's lifetime.
    runnables: [{ runnable: { name: 'rule-files', start: (signal) => source.start(signal) }, group: 'informers' }],
    close: async () => {},
  };
}
