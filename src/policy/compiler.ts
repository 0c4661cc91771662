/**
 * Compiles a rule's `validate.schema` (JSON Schema 2020-12) with ajv, once per
 * rule generation, with guards against hostile schemas:
 * - size: at most MAX_SCHEMA_BYTES serialized;
 * - depth: at most MAX_SCHEMA_DEPTH nested JSON values;
 * - work per object (schema-bounds.ts): the schema's size with every `$ref`
 *   expanded is bounded (no 2^40-subschema bombs), and `uniqueItems` needs
 *   a bounded `maxItems`;
 * - ajv strict mode: unknown keywords and unknown formats are errors;
 * - regular expressions run on RE2 (re2.ts: linear time, bounded program
 *   size and per-test cost), plugged in through ajv's `code.regExp` hook so
 *   every `pattern` and `patternProperties` key uses it. No `format` is
 *   registered (strict mode refuses unknown formats), so no other regex runs;
 *   a format added later must use re2.ts too;
 * - no `$id` / `$anchor` / `$dynamicAnchor`: a schema may not name itself
 *   (its references are local `$defs`).
 *
 * One ajv instance per compiled schema (issue 31): ajv's `removeSchema`
 * leaves compiled code behind (60 compiles and releases of a 62 KB schema
 * kept +157 MiB), so a rule's instance is dropped whole with the rule. What
 * makes a fresh instance cost ~18 ms is the 2020-12 meta-schema it compiles;
 * rule instances skip it (`meta: false`), and every schema is checked
 * against the meta-schema first on one shared instance (META_CHECKER),
 * which compiles no rule and so holds nothing per rule.
 *
 * The evaluation deadline reaches the patterns of a schema through its
 * compiler's RegexClock, set by the validator for the duration of one
 * validation from the deadline passed to it (no process-global state).
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { RegExpEngine } from 'ajv/dist/types/index.js';
import { ajvRegExp, enterDeadline, leaveDeadline, newRegexClock, type Deadline, type RegexClock } from './re2.ts';
import { toViolations } from './schema-errors.ts';
import { guardUniqueItems, schemaBoundProblem } from './schema-bounds.ts';
import { LATEST, MIN_VERSION_KEYWORD, VERSION_PATTERN, type VersionContext } from './pod-security-version.ts';
import type { SchemaViolation } from './types.ts';

/** 64 KiB: the largest Pod Security rule schema is ~3 KiB, so this leaves 20x
 * headroom for real policies while bounding compile time (a 62 KB schema of
 * 1,050 properties takes ~0.25 s of each thread that holds the rule on a
 * loaded 2-vCPU VM; src/sources/compile-queue.ts paces them). */
export const MAX_SCHEMA_BYTES = 64 * 1024;
/** 32 levels: a Pod field is at most ~12 levels deep (spec.containers[].securityContext
 * .seLinuxOptions...), and a schema needs about two levels per object level
 * (`properties` + the field), plus combinators; deeper means generated or hostile. */
export const MAX_SCHEMA_DEPTH = 32;

const FORBIDDEN_KEYWORDS: ReadonlySet<string> = new Set(['$id', '$anchor', '$dynamicAnchor']);

/** The options and keywords of every instance; `meta` for the shared checker only. */
function newAjv(clock: RegexClock, meta: boolean): Ajv2020 {
  const ajv = new Ajv2020({
    meta,
    validateSchema: meta,
    // Unknown keywords, formats and ignored keywords are errors: a typo in a
    // policy must not silently turn a check off.
    strict: true,
    // Type-related strictness would reject common, correct policy schemas
    // (e.g. `properties` without `type: object`, `required` naming properties
    // that are not described), so those stay off.
    strictTypes: false,
    strictRequired: false,
    strictTuples: false,
    // Stop at the first error (issue 31): with allErrors, every failing
    // keyword at every element of the object builds an error object, so
    // memory grows with the object times the schema, for any verdict (the
    // issue's Audit rule reached 14 GB); and a Deny needs one reason. Each
    // rule reports its schema's first violation (and its CEL's); fixing it
    // shows the next, as `portal test` does.
    allErrors: false,
    logger: false,
    // RE2 semantics, linear time: a rule cannot stall the event loop through
    // a pattern (issue 9). ajv's RegExpEngine type wants a RegExp-like object;
    // it only ever calls test() and toString() on it.
    // No optimisation pass over the generated code (issue 31 item 5): it
    // only drops unused names, and it is quadratic in the schema's
    // properties (ajv recomputes the names of every block from its children
    // at every level): a 62 KB schema of 1,050 properties compiled in
    // ~0.8–1.9 s with it and ~0.25 s without, on every thread that holds the
    // rule. Validation is the same code less a few dead assignments
    // (bench/rule-churn.ts measures both).
    code: { regExp: ajvRegExp(clock) as unknown as RegExpEngine, optimize: false },
    // Keywords read the evaluation's context (`this`): the Pod Security version.
    passContext: true,
  });

  /**
   * `minPodSecurityVersion: "v1.N"` passes when the Pod Security Standards
   * version in force is v1.N or newer (`latest` is newer than every v1.N). It
   * looks at the context, not the data, so it belongs in an `if` (or beside
   * the checks it gates) and reports no error of its own.
   */
  ajv.addKeyword({
    keyword: MIN_VERSION_KEYWORD,
    schemaType: 'string',
    metaSchema: { type: 'string', pattern: VERSION_PATTERN },
    errors: false,
    // The version is read from the schema once, at compile time: the check runs for every rule and request.
    compile: (schema: string) => {
      const min = Number(schema.slice(3));
      return function minPodSecurityVersion(this: VersionContext | undefined): boolean {
        return (this?.podSecurityVersion ?? LATEST) >= min;
      };
    },
  });
  return ajv;
}

/**
 * Checks schemas against the 2020-12 meta-schema (and the keywords' own
 * meta-schemas) without compiling them, so it never holds a rule's code.
 * Its clock is never entered: it runs only the meta-schemas' patterns.
 */
const META_CHECKER = newAjv(newRegexClock(), true);

function metaSchemaProblem(schema: Record<string, unknown> | boolean): string | undefined {
  try {
    if (META_CHECKER.validateSchema(schema)) return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
  return `schema is invalid: ${META_CHECKER.errorsText(META_CHECKER.errors)}`;
}

/**
 * `podSecurityVersion`: the minor version the schema's `minPodSecurityVersion`
 * sees (default latest); `deadline`: no pattern test starts after it (a
 * RegexLimitError instead, re2.ts).
 */
export type Validator = (value: unknown, pathPrefix?: string, podSecurityVersion?: number, deadline?: Deadline) => SchemaViolation[];

export type CompileResult =
  | { ok: true; validate: Validator; release: () => void }
  | { ok: false; error: string };

function measureDepth(value: unknown, depth: number): number {
  if (depth > MAX_SCHEMA_DEPTH) return depth;
  if (value === null || typeof value !== 'object') return depth;
  let max = depth;
  for (const child of Array.isArray(value) ? value : Object.values(value)) {
    max = Math.max(max, measureDepth(child, depth + 1));
    if (max > MAX_SCHEMA_DEPTH) break;
  }
  return max;
}

function findForbidden(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  if (Array.isArray(value)) {
    for (const v of value) {
      const f = findForbidden(v);
      if (f) return f;
    }
    return undefined;
  }
  for (const [k, v] of Object.entries(value)) {
    if (FORBIDDEN_KEYWORDS.has(k)) return k;
    const f = findForbidden(v);
    if (f) return f;
  }
  return undefined;
}

/** Static guards, without compiling: the reasons a schema is refused. */
export function schemaGuardProblem(schema: unknown): string | undefined {
  if (typeof schema === 'boolean') return undefined;
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) {
    return 'validate.schema must be a JSON Schema object or a boolean';
  }
  const size = Buffer.byteLength(JSON.stringify(schema));
  if (size > MAX_SCHEMA_BYTES) {
    return `validate.schema is ${size} bytes serialized, more than the ${MAX_SCHEMA_BYTES} allowed; split the rule`;
  }
  if (measureDepth(schema, 0) > MAX_SCHEMA_DEPTH) {
    return `validate.schema nests deeper than ${MAX_SCHEMA_DEPTH} levels`;
  }
  const forbidden = findForbidden(schema);
  if (forbidden) return `validate.schema uses "${forbidden}", which rule schemas may not (use local "$defs" and "$ref": "#/$defs/...")`;
  return schemaBoundProblem(schema);
}

/**
 * A schema compiler: the RegexClock the patterns of its schemas read (a
 * RuleSet owns one), and a fresh ajv instance for each schema it compiles.
 */
export class SchemaCompiler {
  readonly #clock: RegexClock = newRegexClock();

  /**
   * Compiles a schema. Never throws: a failure is `{ok: false, error}` saying why.
   * `release()` lets go of the compiled code and its ajv instance (call it
   * when the rule version is replaced or removed); a released validator
   * throws, which the evaluator turns into an `error` verdict.
   */
  compile(schema: Record<string, unknown> | boolean): CompileResult {
    const guard = schemaGuardProblem(schema);
    if (guard) return { ok: false, error: guard };
    // A private copy, compiled with uniqueItems guarded: the caller's object can be shared or mutated without affecting us.
    const own: Record<string, unknown> | boolean = typeof schema === 'boolean' ? schema : structuredClone(schema);
    const invalid = metaSchemaProblem(own);
    if (invalid) return { ok: false, error: `validate.schema: compilation failed: ${invalid}` };
    guardUniqueItems(own);
    let fn: ValidateFunction | undefined;
    try {
      fn = newAjv(this.#clock, false).compile(own);
    } catch (e) {
      return { ok: false, error: `validate.schema: compilation failed: ${e instanceof Error ? e.message : String(e)}` };
    }
    const clock = this.#clock;
    // One context per validator, set before each call: validation is synchronous, and ajv passes the same `this` down every $ref.
    const context: { podSecurityVersion: number } = { podSecurityVersion: LATEST };
    const validate: Validator = (value, pathPrefix = '', podSecurityVersion = LATEST, deadline) => {
      const run = fn;
      if (run === undefined) throw new Error('the rule version was released');
      context.podSecurityVersion = podSecurityVersion;
      let ok: boolean;
      if (deadline === undefined) ok = run.call(context, value) as boolean;
      else {
        const outer = enterDeadline(clock, deadline);
        try {
          ok = run.call(context, value) as boolean;
        } finally {
          leaveDeadline(clock, outer);
        }
      }
      if (ok) return [];
      return toViolations((run.errors ?? []) as ErrorObject[], pathPrefix);
    };
    // The validator is the only holder of its ajv instance: dropping the function drops both.
    const release = (): void => {
      fn = undefined;
    };
    return { ok: true, validate, release };
  }
}

/** Compiles a schema on `compiler` (by default a fresh one; rule sets keep theirs for their regex clock). */
export function compileSchema(schema: Record<string, unknown> | boolean, compiler: SchemaCompiler = new SchemaCompiler()): CompileResult {
  return compiler.compile(schema);
}
