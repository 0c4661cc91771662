/**
 * Issue 31 items 5 and 7, in-process, each against the way it was done
 * before, measured in the same run:
 *
 * - Rule churn: compile and release a 62 KB rule schema 60 times. Before:
 *   one shared ajv instance and `removeSchema` (what SchemaCompiler did up to
 *   issue 31, rebuilt here with the same options); now: SchemaCompiler (a
 *   fresh instance per schema, the meta-schema checked on a shared one).
 *   Reported: milliseconds per compile and heap retained after a full GC.
 * - Duplicate keys in `portal test`'s YAML: a map of N keys composed with
 *   yaml's `uniqueKeys` (quadratic) against parseYamlDocuments (a Set per
 *   map), at 20k and 40k keys; at 1.4M keys only the new path (the old one
 *   would take hours) and the run's input budget refusing it.
 *
 * - Compile time of that schema on a fresh ajv instance with ajv's code
 *   optimisation pass (what SchemaCompiler did up to now) and without it
 *   (now; it is quadratic in a schema's properties).
 * - On a real `portal dev` (rule-churn-dev.ts, `--rules N`, 0 to skip): N
 *   such rules created one after another while a victim namespace creates
 *   Pods at 10/s: time to create them and until the last is Ready, and the
 *   victim's p99 against the victim alone (`--quiet` seconds) before.
 *
 * Run: node --expose-gc --import tsx bench/rule-churn.ts [--cycles 60] [--keys 20000,40000] [--old-max 40000] [--huge true] [--rules 100] [--quiet 10]
 */
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { Composer, Parser } from 'yaml';
import { SchemaCompiler } from '../src/policy/index.ts';
import { parseYamlDocuments } from '../src/config/yaml.ts';
import { InputBudget } from '../src/config/input-budget.ts';
import { bigSchema } from '../test/support/big-rule.ts';
import { ruleCreationOnDev } from './rule-churn-dev.ts';

const { values } = parseArgs({
  options: {
    cycles: { type: 'string', default: '60' },
    keys: { type: 'string', default: '20000,40000' },
    /** The quadratic path only up to this many keys (it takes minutes at 40k on a loaded VM). */
    'old-max': { type: 'string', default: '40000' },
    huge: { type: 'string', default: 'true' },
    rules: { type: 'string', default: '100' },
    quiet: { type: 'string', default: '10' },
  },
});
const CYCLES = Number(values.cycles);
// As bin/portal.js runs every command (V8 keeps each `new Function` source's code otherwise; both sides alike).
setFlagsFromString('--no-compilation-cache');
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

// Several full collections: V8 keeps the scripts of `new Function` in its compilation cache for a few GCs.
const heapMiB = (): number => {
  for (let i = 0; i < 8; i++) gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
};

function churn(name: string, compileAndRelease: (schema: Record<string, unknown>) => void): { msPerCompile: number; retainedMiB: number } {
  const base = heapMiB();
  const t0 = performance.now();
  for (let i = 0; i < CYCLES; i++) compileAndRelease(bigSchema(`${name}${i}`));
  const ms = (performance.now() - t0) / CYCLES;
  return { msPerCompile: ms, retainedMiB: heapMiB() - base };
}

// Before: one shared instance, removeSchema on release.
const shared = new Ajv2020({ strict: true, strictTypes: false, strictRequired: false, strictTuples: false, allErrors: true, logger: false });
const compiler = new SchemaCompiler();
console.log(`schema: ${JSON.stringify(bigSchema('x0')).length} bytes; ${CYCLES} compile+release cycles`);
const before = churn('s', (schema) => {
  shared.compile(schema);
  shared.removeSchema(schema);
});
const after = churn('n', (schema) => {
  const c = compiler.compile(schema);
  if (!c.ok) throw new Error(c.error);
  c.release();
});
console.log(`shared ajv + removeSchema: ${before.msPerCompile.toFixed(1)} ms/compile, ${before.retainedMiB.toFixed(1)} MiB retained after GC`);
console.log(`instance per schema:       ${after.msPerCompile.toFixed(1)} ms/compile, ${after.retainedMiB.toFixed(1)} MiB retained after GC`);
console.log(`ratio (time, new/old): ${(after.msPerCompile / before.msPerCompile).toFixed(2)}`);

// The codegen optimisation pass, on and off, each on a fresh instance as SchemaCompiler uses.
const fresh = (optimize: 1 | false) => (schema: Record<string, unknown>): void => {
  new Ajv2020({ meta: false, validateSchema: false, strict: true, strictTypes: false, strictRequired: false, strictTuples: false, allErrors: false, logger: false, code: { optimize } }).compile(schema);
};
const optimized = churn('o', fresh(1));
const plain = churn('p', fresh(false));
console.log(`fresh ajv, code optimisation on (before): ${optimized.msPerCompile.toFixed(1)} ms/compile; off (now): ${plain.msPerCompile.toFixed(1)} ms/compile; ratio (old/new) ${(optimized.msPerCompile / plain.msPerCompile).toFixed(1)}`);

function mapText(keys: number): string {
  let text = '';
  for (let i = 0; i < keys; i++) text += `k${i.toString(36)}: 0\n`;
  return text;
}

function oldCompose(text: string): void {
  for (const doc of new Composer({ logLevel: 'error' }).compose(new Parser().parse(text))) doc.toJS();
}

for (const keys of (values.keys ?? '').split(',').filter(Boolean).map(Number)) {
  const text = mapText(keys);
  let old = Number.NaN;
  if (keys <= Number(values['old-max'])) {
    const t = performance.now();
    oldCompose(text);
    old = performance.now() - t;
  }
  const t0 = performance.now();
  parseYamlDocuments(text);
  const now = performance.now() - t0;
  console.log(`${keys} keys: yaml uniqueKeys ${Number.isNaN(old) ? 'not run' : `${old.toFixed(0)} ms`}, Set per map ${now.toFixed(0)} ms${Number.isNaN(old) ? '' : ` (ratio ${(old / now).toFixed(1)})`}`);
}
if (values.huge === 'true') {
  const huge = mapText(1_400_000);
  let t0 = performance.now();
  const [refused] = parseYamlDocuments(huge, new InputBudget().allowance());
  console.log(`1.4M keys (${(huge.length / 2 ** 20).toFixed(1)} MiB), run budget: refused in ${(performance.now() - t0).toFixed(0)} ms: ${refused?.ok === false ? refused.message.slice(0, 60) : 'NOT REFUSED'}…`);
  t0 = performance.now();
  parseYamlDocuments(huge);
  console.log(`1.4M keys without a budget, Set per map: composed in ${(performance.now() - t0).toFixed(0)} ms`);
}
if (Number(values.rules) > 0) await ruleCreationOnDev(Number(values.rules), Number(values.quiet));
