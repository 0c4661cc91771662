/**
 * The PortalExceptions the RuleSet holds (rule-set.ts): each one's state
 * (its status is derived from it), its compiled form, and an index by where
 * it may exempt. An invalid one is held with its problems and exempts
 * nothing: unlike a rule, it keeps no last good version, since an exemption
 * that outlives its own (broken) edit would fail open.
 */
import { createHash } from 'node:crypto';
import { compileException, type CompiledException } from './exceptions.ts';
import { exceptionKey } from './match-keys.ts';
import { exceptionShapeProblems, parseRfc3339 } from './exception-shape.ts';
import { sortedByKey } from './sorted.ts';

/** What the RuleSet knows about one PortalException (its status is derived from it). */
export interface ExceptionState {
  key: string;
  /** `namespace/name`. */
  display: string;
  namespace: string;
  name: string;
  uid: string | undefined;
  generation: number;
  /** It validated and compiled (it is considered; expiry and lifetime are judged at `now`). */
  valid: boolean;
  /** Why it is invalid, or "" when valid. */
  message: string;
  /** spec.expiresAt in ms, when valid and set. */
  expiresAt: number | undefined;
  /** metadata.creationTimestamp in ms, when set. */
  createdAt: number | undefined;
  /** In one of the privileged namespaces. */
  privileged: boolean;
  /** The raw spec.rules, for status and docs. */
  rules: readonly string[];
}

export interface ExceptionSlot {
  hash: string;
  state: ExceptionState;
  compiled: CompiledException | undefined;
  /** The object as given to upsertException (for snapshot() and a change of options). */
  source: unknown;
}

/**
 * Exceptions by where they may exempt: an exception exempts only objects of
 * its own namespace unless it is privileged, so a request looks at its
 * namespace's exceptions and the privileged ones, never at the rest.
 */
interface ExceptionIndex {
  revision: number;
  /** Non-privileged exceptions by namespace, in key order. */
  byNamespace: Map<string, CompiledException[]>;
  /** Privileged exceptions, in key order. */
  privileged: CompiledException[];
}

const NO_EXCEPTIONS: readonly CompiledException[] = Object.freeze([]);

export class ExceptionStore {
  readonly #slots = new Map<string, ExceptionSlot>();
  #index: ExceptionIndex | undefined;
  /** Bumps on every change (the index is rebuilt once per change). */
  #revision = 0;

  get size(): number {
    return this.#slots.size;
  }

  /**
   * Adds or replaces an exception (raw object); `privileged`: the namespaces
   * whose exceptions may exempt objects anywhere. `changed` is false when
   * nothing that matters changed (same spec and metadata).
   */
  upsert(obj: unknown, privileged: ReadonlySet<string>): { state: ExceptionState; changed: boolean } {
    const o = (obj ?? {}) as { metadata?: Record<string, unknown>; spec?: unknown };
    const meta = o.metadata !== null && typeof o.metadata === 'object' ? o.metadata : {};
    const namespace = typeof meta['namespace'] === 'string' ? meta['namespace'] : '';
    const name = typeof meta['name'] === 'string' ? meta['name'] : '';
    const key = exceptionKey({ metadata: { namespace, name } });
    const generation = typeof meta['generation'] === 'number' ? meta['generation'] : 0;
    const uid = typeof meta['uid'] === 'string' ? meta['uid'] : undefined;
    const created = typeof meta['creationTimestamp'] === 'string' ? meta['creationTimestamp'] : undefined;
    const hash = createHash('sha256').update(JSON.stringify([o.spec ?? null, generation, uid ?? null, created ?? null, (obj as { apiVersion?: unknown })?.apiVersion ?? null, (obj as { kind?: unknown })?.kind ?? null])).digest('hex');
    const previous = this.#slots.get(key);
    if (previous && previous.hash === hash) return { state: previous.state, changed: false };
    const problems = exceptionShapeProblems(obj, privileged);
    let compiled: CompiledException | undefined;
    if (problems.length === 0) compiled = compileException(obj as Parameters<typeof compileException>[0], privileged);
    const state: ExceptionState = {
      key,
      display: `${namespace}/${name}`,
      namespace,
      name,
      uid,
      generation,
      valid: compiled !== undefined,
      message: problems.length > 0 ? `invalid exception: ${problems.join('; ')}` : '',
      expiresAt: compiled?.expiresAt,
      createdAt: created !== undefined ? parseRfc3339(created) : undefined,
      privileged: privileged.has(namespace),
      rules: Array.isArray((o.spec as { rules?: unknown } | undefined)?.rules) ? ((o.spec as { rules: unknown[] }).rules.filter((r) => typeof r === 'string') as string[]) : [],
    };
    this.#slots.set(key, { hash, state, compiled, source: obj });
    this.#revision++;
    return { state, changed: true };
  }

  remove(key: string): boolean {
    if (!this.#slots.delete(key)) return false;
    this.#revision++;
    return true;
  }

  /** Forgets every exception; returns their sources (to compile them again under other options). */
  clear(): unknown[] {
    const held = [...this.#slots.values()].map((slot) => slot.source);
    this.#slots.clear();
    this.#revision++;
    return held;
  }

  /** The raw objects held, for a snapshot. */
  sources(): unknown[] {
    return [...this.#slots.values()].map((slot) => slot.source);
  }

  get(key: string): ExceptionState | undefined {
    return this.#slots.get(key)?.state;
  }

  states(): ExceptionState[] {
    return sortedByKey(this.#slots.values(), (s) => s.state);
  }

  compiled(key: string): CompiledException | undefined {
    return this.#slots.get(key)?.compiled;
  }

  /** The earliest expiresAt after `now` among valid exceptions (when an exemption next ends by itself). */
  nextExpiry(now: number): number | undefined {
    let next: number | undefined;
    for (const { compiled } of this.#slots.values()) {
      const at = compiled?.expiresAt;
      if (at !== undefined && at > now && (next === undefined || at < next)) next = at;
    }
    return next;
  }

  /** Whether any exception could exempt an object in `namespace` (one of that namespace, or a privileged one). */
  mayExempt(namespace: string): boolean {
    if (this.#slots.size === 0) return false;
    const index = this.#buildIndex();
    return index.privileged.length > 0 || (namespace !== '' && index.byNamespace.has(namespace));
  }

  /** Every exception that may exempt an object in `namespace` (its own, then the privileged ones); key order within each group. */
  in(namespace: string): readonly CompiledException[] {
    if (this.#slots.size === 0) return NO_EXCEPTIONS;
    const index = this.#buildIndex();
    const own = namespace === '' ? undefined : index.byNamespace.get(namespace);
    if (index.privileged.length === 0) return own ?? NO_EXCEPTIONS;
    return own ? [...own, ...index.privileged] : index.privileged;
  }

  #buildIndex(): ExceptionIndex {
    if (this.#index?.revision === this.#revision) return this.#index;
    const byNamespace = new Map<string, CompiledException[]>();
    const privileged: CompiledException[] = [];
    for (const ex of sortedByKey(this.#slots.values(), (s) => s.compiled)) {
      if (ex.privileged) privileged.push(ex);
      else {
        const list = byNamespace.get(ex.namespace);
        if (list) list.push(ex);
        else byNamespace.set(ex.namespace, [ex]);
      }
    }
    this.#index = { revision: this.#revision, byNamespace, privileged };
    return this.#index;
  }
}
