// Kept instead of node:util parseArgs: its strict mode throws on the first problem and rejects `--flag=false`; its loose mode takes `--policies --watch` as a value (checked on Node 24).
/**
 * The one flag parser of both CLIs (`portal` and the dev cluster's
 * `portal dev`, which reaches it through `portal/dev-api`): `--name value`,
 * `--name=value`, boolean `--name` / `--name=false`, repeatable flags, and
 * `--` to end flags. It never throws: every problem is collected so a command
 * can report them all at once (docs/design.md §6, exit code 2).
 */
export interface FlagDef {
  /** Without the leading `--`. */
  flag: string;
  /** `bool` flags take no separate value (`--x` is true, `--x=false` is false). */
  type: 'bool' | 'value';
  /** Short alias without the `-` (e.g. `o` for `-o`). */
  short?: string;
}

export interface ParsedArgs {
  /** Raw values per flag, in order (repeatable flags keep all; use the last for single ones). */
  values: Map<string, string[]>;
  positionals: string[];
  /**
   * Positionals that directly follow an unknown flag (`--polices x`): most
   * likely that flag's value. Unknown flags consume nothing, so these are
   * also in `positionals`; a command that takes no arguments can skip
   * reporting them again.
   */
  strays: string[];
  problems: string[];
  /**
   * With `unknown: 'keep'`: where in argv (ascending) is every word no flag
   * took (unknown flags, their values, positionals, `--` and all after it),
   * for a command that hands them on verbatim (`portal dev` to its
   * replicas). Empty otherwise.
   */
  kept: number[];
}

/**
 * @param command names the command in "run 'COMMAND --help'".
 * @param alsoKnown flags accepted elsewhere (`portal dev` takes its own and
 *   passes the rest to `portal serve`), considered for "did you mean".
 * @param unknown `'report'`: an unknown flag is a problem. `'keep'`: it is
 *   no problem, and it and every word no flag took go to `kept`.
 */
export function parseArgs(argv: readonly string[], defs: readonly FlagDef[], command = 'portal', alsoKnown: readonly string[] = [], unknown: 'report' | 'keep' = 'report'): ParsedArgs {
  const byName = new Map<string, FlagDef>();
  for (const d of defs) {
    byName.set(d.flag, d);
    if (d.short) byName.set(d.short, d);
  }
  const values = new Map<string, string[]>();
  const positionals: string[] = [];
  const strays: string[] = [];
  const problems: string[] = [];
  const kept: number[] = [];
  const keep = unknown === 'keep';
  const push = (def: FlagDef, v: string): void => {
    const list = values.get(def.flag);
    if (list) list.push(v);
    else values.set(def.flag, [v]);
  };

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      if (keep) for (let j = i; j < argv.length; j++) kept.push(j);
      break;
    }
    const long = arg.startsWith('--');
    if (!long && !(arg.startsWith('-') && arg.length > 1)) {
      positionals.push(arg);
      if (keep) kept.push(i);
      continue;
    }
    const body = arg.slice(long ? 2 : 1);
    const eq = body.indexOf('=');
    const name = eq === -1 ? body : body.slice(0, eq);
    const def = byName.get(name);
    if (!def || (!long && def.short !== name)) {
      if (keep) {
        kept.push(i);
        continue;
      }
      const hint = closest(name, [...defs.map((d) => d.flag), ...alsoKnown]);
      // An unknown flag takes no value (we cannot know whether it wants one);
      // say what happened to the word after it so the user is not surprised.
      const next = argv[i + 1];
      const stray = eq === -1 && next !== undefined && next !== '--' && !next.startsWith('-') ? next : undefined;
      if (stray !== undefined) strays.push(stray);
      problems.push(
        `unknown flag ${arg.split('=')[0]}${hint ? ` (did you mean --${hint}?)` : ''}` +
          (stray !== undefined ? `; ${JSON.stringify(stray)} after it was not taken as its value` : '') +
          `; run '${command} --help' for the list`,
      );
      continue;
    }
    if (def.type === 'bool') {
      push(def, eq === -1 ? 'true' : body.slice(eq + 1));
      continue;
    }
    if (eq !== -1) {
      push(def, body.slice(eq + 1));
      continue;
    }
    const next = argv[i + 1];
    if (next === undefined || (next.startsWith('--') && next.length > 2)) {
      problems.push(`flag --${def.flag} needs a value: --${def.flag} VALUE`);
      continue;
    }
    push(def, next);
    i++;
  }
  return { values, positionals, strays, problems, kept };
}

/**
 * The known name nearest to what was typed, for "did you mean" (flags, suite
 * fields): within edit distance 2 (one for names of three letters or less,
 * where two edits reach almost anything), ignoring case; else the one known
 * name it starts (a truncated `--pod-security` → `--pod-security-version`).
 */
export function closest(typed: string, known: readonly string[]): string | undefined {
  const name = typed.toLowerCase();
  let best: string | undefined;
  let bestDistance = name.length <= 3 ? 2 : 3;
  for (const k of known) {
    const d = editDistance(name, k.toLowerCase());
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  if (best !== undefined) return best;
  const extended = name.length >= 3 ? [...new Set(known)].filter((k) => k.toLowerCase().startsWith(name)) : [];
  return extended.length === 1 ? extended[0] : undefined;
}

export function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0] as number;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = row[j] as number;
      row[j] = Math.min((row[j] as number) + 1, (row[j - 1] as number) + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return row[b.length] as number;
}
