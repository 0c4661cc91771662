/**
 * The flags `portal serve` accepts, generated from the option schema. Shared
 * by `portal serve` and by `portal dev`, which checks the flags it passes
 * through to its replicas before it starts anything.
 */
import { META_FLAGS, SERVE_OPTIONS } from '../config/options.ts';
import type { FlagDef } from '../config/args.ts';

export const SERVE_FLAG_DEFS: readonly FlagDef[] = [
  ...SERVE_OPTIONS.map((o): FlagDef => ({ flag: o.flag, type: o.type === 'bool' ? 'bool' : 'value' })),
  ...META_FLAGS.map((o): FlagDef => ({ flag: o.flag, type: o.type === 'bool' ? 'bool' : 'value' })),
];

/** `  - problem` lines; continuation lines of a multi-line problem are indented under it. */
export function formatProblems(problems: readonly string[]): string {
  return problems.map((p) => `  - ${p.replace(/\n/g, '\n    ')}\n`).join('');
}
