/**
 * The cel-spec conformance suite (v0.25.1, shipped in @bufbuild/cel-spec)
 * run against the two CEL engines considered in adr/0010-cel-engine-cel-js.md:
 * @bufbuild/cel 0.6.1 and @marcbachmann/cel-js 8.0. Per top-level section:
 * tests passed, failed, and skipped (tests that need protobuf messages,
 * enums, a container or a type-check-only answer, which neither engine's
 * plain-JS mode can express). Prints one JSON object.
 *
 * Run: npm run -s bench -- cel-conformance
 */
import { cpus, loadavg } from 'node:os';
import { run as bufRun, isCelError, celUint, isCelList, isCelMap, isCelUint } from '@bufbuild/cel';
import { strings as bufStrings } from '@bufbuild/cel/ext';
import { tests } from '@bufbuild/cel-spec/testdata/conformance.js';
import { Environment } from '@marcbachmann/cel-js';
import { compile, evaluate } from '../src/policy/cel/index.ts';
import { interpreted } from '../src/policy/cel/engine.ts';

/** cel-js's uint class is not exported by name; a uint literal gives it. */
const UnsignedInt = (new Environment().evaluate('1u') as object).constructor as new (v: bigint) => { valueOf(): bigint };

type Json = Record<string, unknown>;
interface Test {
  name: string;
  expr: string;
  value?: Json;
  evalError?: unknown;
  bindings?: Record<string, { value?: Json }>;
  container?: string;
  checkOnly?: boolean;
  typedResult?: unknown;
  disableCheck?: boolean;
}
interface Suite {
  name: string;
  suites?: Suite[];
  tests?: { original: Test }[];
}

/** Canonical form of a value, so both engines and the expected value compare. */
type Canon = string;

class Unsupported extends Error {}

/** cel-spec Value JSON → canonical string (and the JS value for bindings). */
function fromSpec(v: Json, engine: 'buf' | 'mb'): { canon: Canon; js: unknown } {
  const [k, x] = Object.entries(v)[0] ?? ['nullValue', null];
  switch (k) {
    case 'nullValue':
      return { canon: 'null', js: null };
    case 'boolValue':
      return { canon: `b:${String(x)}`, js: x };
    case 'int64Value':
      return { canon: `i:${String(x)}`, js: BigInt(x as string) };
    case 'uint64Value':
      return { canon: `u:${String(x)}`, js: engine === 'buf' ? celUint(BigInt(x as string)) : new UnsignedInt(BigInt(x as string)) };
    case 'doubleValue': {
      const d = typeof x === 'string' ? Number(x === 'NaN' ? NaN : x === 'Infinity' ? Infinity : x === '-Infinity' ? -Infinity : x) : (x as number);
      return { canon: `d:${Object.is(d, -0) ? '0' : String(d)}`, js: d };
    }
    case 'stringValue':
      return { canon: `s:${JSON.stringify(x)}`, js: x };
    case 'bytesValue': {
      const b = new Uint8Array(Buffer.from(x as string, 'base64'));
      return { canon: `y:${Buffer.from(b).toString('hex')}`, js: b };
    }
    case 'listValue': {
      const vals = ((x as { values?: Json[] }).values ?? []).map((e) => fromSpec(e, engine));
      return { canon: `[${vals.map((e) => e.canon).join(',')}]`, js: vals.map((e) => e.js) };
    }
    case 'mapValue': {
      const entries = ((x as { entries?: { key: Json; value: Json }[] }).entries ?? []).map((e) => [fromSpec(e.key, engine), fromSpec(e.value, engine)] as const);
      const canon = `{${entries.map(([a, b]) => `${a.canon}=${b.canon}`).sort().join(',')}}`;
      return { canon, js: new Map(entries.map(([a, b]) => [a.js, b.js])) };
    }
    default:
      throw new Unsupported(k);
  }
}

function canonOf(v: unknown): Canon {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'boolean') return `b:${String(v)}`;
  if (typeof v === 'bigint') return `i:${String(v)}`;
  if (typeof v === 'number') return `d:${Object.is(v, -0) ? '0' : String(v)}`;
  if (typeof v === 'string') return `s:${JSON.stringify(v)}`;
  if (v instanceof UnsignedInt) return `u:${String(v.valueOf())}`;
  if (isCelUint(v)) return `u:${String(v.value)}`;
  if (v instanceof Uint8Array) return `y:${Buffer.from(v).toString('hex')}`;
  if (Array.isArray(v)) return `[${v.map(canonOf).join(',')}]`;
  if (isCelList(v)) return `[${[...v].map(canonOf).join(',')}]`;
  if (v instanceof Map) return `{${[...v.entries()].map(([a, b]) => `${canonOf(a)}=${canonOf(b)}`).sort().join(',')}}`;
  if (isCelMap(v)) return `{${[...v.entries()].map(([a, b]) => `${canonOf(a)}=${canonOf(b)}`).sort().join(',')}}`;
  if (typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    return `{${Object.entries(v).map(([a, b]) => `${canonOf(a)}=${canonOf(b)}`).sort().join(',')}}`;
  }
  return `?${Object.prototype.toString.call(v)}`;
}

type Outcome = 'pass' | 'fail' | 'skip';

type Engine = 'buf' | 'mb' | 'portal';

function runTest(t: Test, engine: Engine, mbEnv: Environment): Outcome {
  if (t.container || t.checkOnly || t.typedResult) return 'skip';
  // Portal's environment declares only Kubernetes' variables.
  if (engine === 'portal' && Object.keys(t.bindings ?? {}).length > 0) return 'skip';
  let expected: Canon | 'error';
  const bindings: Record<string, unknown> = {};
  try {
    if (t.evalError) expected = 'error';
    else expected = fromSpec(t.value ?? { boolValue: true }, engine === 'buf' ? 'buf' : 'mb').canon;
    for (const [name, b] of Object.entries(t.bindings ?? {})) {
      if (!b.value) return 'skip';
      bindings[name] = fromSpec(b.value, engine === 'buf' ? 'buf' : 'mb').js;
    }
  } catch (e) {
    if (e instanceof Unsupported) return 'skip';
    throw e;
  }
  let got: Canon | 'error';
  try {
    if (engine === 'buf') {
      const r = bufRun(t.expr, bindings as never, { funcs: bufStrings });
      got = isCelError(r) ? 'error' : canonOf(r);
    } else if (engine === 'mb') {
      got = canonOf(mbEnv.evaluate(t.expr, bindings));
    } else {
      const p = compile(t.expr, { resultType: 'any' });
      const r = p.ok ? evaluate(p, {}) : undefined;
      got = r?.ok ? canonOf(r.value) : 'error';
      // The same program on cel-js's public evaluation must agree with the generated code.
      const i = p.ok ? evaluate(interpreted(p), {}) : undefined;
      const viaInterpreter = i?.ok ? canonOf(i.value) : 'error';
      if (viaInterpreter !== got) compiledVsInterpreter.push(t.expr);
      if (p.ok && p.fallback !== undefined) fallbacks.push(`${t.expr} (${p.fallback})`);
    }
  } catch {
    got = 'error';
  }
  return got === expected ? 'pass' : 'fail';
}

function collect(s: Suite, out: Test[]): Test[] {
  for (const t of s.tests ?? []) out.push(t.original);
  for (const c of s.suites ?? []) collect(c, out);
  return out;
}

// As Portal configures it (engine.ts): mixed list and map literals are allowed, as in cel-go.
const mbEnv = new Environment({ unlistedVariablesAreDyn: true, enableOptionalTypes: true, homogeneousAggregateLiterals: false });
const compiledVsInterpreter: string[] = [];
/** Expressions that run on cel-js's evaluation instead of generated code. */
const fallbacks: string[] = [];
const zero = (): Record<Outcome, number> => ({ pass: 0, fail: 0, skip: 0 });
const sections: Record<string, Record<Engine, Record<Outcome, number>>> = {};
const totals: Record<Engine, Record<Outcome, number>> = { buf: zero(), mb: zero(), portal: zero() };
for (const section of (tests as unknown as Suite).suites ?? []) {
  const row = { buf: zero(), mb: zero(), portal: zero() };
  for (const t of collect(section, [])) {
    for (const engine of ['buf', 'mb', 'portal'] as const) {
      const o = runTest(t, engine, mbEnv);
      row[engine][o]++;
      totals[engine][o]++;
    }
  }
  sections[section.name] = row;
}
const pct = (r: Record<Outcome, number>): number => Math.round((1000 * r.pass) / Math.max(1, r.pass + r.fail)) / 10;
console.log(
  JSON.stringify(
    {
      benchmark: 'cel-conformance',
      machine: { cpus: cpus().length, node: process.version, loadavg1m: Math.round((loadavg()[0] ?? NaN) * 100) / 100 },
      suite: '@bufbuild/cel-spec conformance (cel-spec v0.25.1)',
      totals: {
        '@bufbuild/cel': { ...totals.buf, passPercentOfRun: pct(totals.buf) },
        '@marcbachmann/cel-js': { ...totals.mb, passPercentOfRun: pct(totals.mb) },
        // cel-js with Portal's Kubernetes environment and libraries (tests without bindings only).
        portal: { ...totals.portal, passPercentOfRun: pct(totals.portal) },
      },
      // Portal's compiled closures vs cel-js's interpreter on the same programs (value or error, and cost): must be empty.
      portalCompiledVsInterpreterDisagreements: compiledVsInterpreter,
      // Expressions not compiled to JavaScript (they run on cel-js's public evaluation).
      portalFallbacks: fallbacks,
      sections: Object.fromEntries(
        Object.entries(sections).map(([k, v]) => [
          k,
          {
            bufbuild: `${v.buf.pass}/${v.buf.pass + v.buf.fail}`,
            celjs: `${v.mb.pass}/${v.mb.pass + v.mb.fail}`,
            portal: `${v.portal.pass}/${v.portal.pass + v.portal.fail}`,
            skipped: v.mb.skip,
          },
        ]),
      ),
    },
    null,
    2,
  ),
);
