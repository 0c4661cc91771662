/**
 * A rule version's compiled checks, and when they are compiled (rule-entry.ts
 * builds them; the evaluator runs them).
 */
import type { CelRule } from './cel-rule.ts';
import type { Validator } from './compiler.ts';

/** A rule version's compiled checks (a rule with only `cel` has a validator that accepts everything). */
export interface CompiledChecks {
  readonly validate: Validator;
  /** The compiled `validate.cel`, when the rule has one. */
  readonly cel: CelRule | undefined;
}

export type Compiled = { ok: true; validate: Validator; release: () => void; cel: CelRule | undefined } | { ok: false; error: string };

/**
 * A rule version's checks: compiled when the version is upserted (the main
 * thread, `portal test`), or on first use (an evaluation thread's copy,
 * adr/0021). Why on first use there: every thread that holds a rule used to
 * compile it when the change arrived, so one tenant's 100 large rules kept
 * every evaluation thread compiling (~0.3 s each) while other namespaces'
 * reviews waited behind them; compiled on first use, a rule costs only the
 * threads that evaluate something it applies to, and that time is charged to
 * that object's flow (fair-queue.ts). The main thread compiled the same
 * version first and told the copies whether it compiled (RuleSetChange), so
 * a copy never keeps a different version in force.
 */
export class RuleCode {
  #checks: CompiledChecks | undefined;
  #compile: (() => Compiled) | undefined;
  #failure: string | undefined;
  #release: () => void = () => {};

  private constructor(compile: (() => Compiled) | undefined) {
    this.#compile = compile;
  }

  static compiled(c: Extract<Compiled, { ok: true }>): RuleCode {
    const code = new RuleCode(undefined);
    code.#set(c);
    return code;
  }

  static onFirstUse(compile: () => Compiled): RuleCode {
    return new RuleCode(compile);
  }

  /** Not compiled yet: the next {@link checks} compiles (a synchronous block of up to ~1 s for a 64 KB schema). */
  get pending(): boolean {
    return this.#compile !== undefined;
  }

  /** The checks, compiled first when pending; throws when that compile fails (the main thread compiled the same version). */
  checks(): CompiledChecks {
    if (this.#checks !== undefined) return this.#checks;
    const compile = this.#compile;
    if (compile !== undefined) {
      this.#compile = undefined;
      const c = compile();
      if (c.ok) {
        this.#set(c);
        // V8 compiles the generated code on its first call (~90–130 ms for a 62 KB schema): an empty object makes
        // that part of the compile, whose time the pool does not count against the evaluation, rather than of the
        // first object checked. It reaches no keyword that could cost anything.
        c.validate({});
      } else this.#failure = c.error;
    }
    if (this.#checks !== undefined) return this.#checks;
    throw new Error(`it compiled on the main thread but not on this evaluation thread: ${this.#failure ?? 'released'}`);
  }

  /** The checks when compiled, without compiling (for /debug/vars). */
  peek(): CompiledChecks | undefined {
    return this.#checks;
  }

  release(): void {
    this.#compile = undefined;
    this.#release();
    this.#release = () => {};
  }

  #set(c: Extract<Compiled, { ok: true }>): void {
    this.#checks = { validate: c.validate, cel: c.cel };
    this.#release = c.release;
  }
}
