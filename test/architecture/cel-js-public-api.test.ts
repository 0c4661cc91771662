/**
 * Portal uses cel-js through its public API only (issue 19): a patch
 * release of cel-js may change anything else, and a use of its internals
 * could then silently drop a cache, a cost charge or every verdict.
 *
 * - No import of a cel-js file that its package.json `exports` map does not
 *   list (`@marcbachmann/cel-js/lib/…`, relative paths into node_modules).
 * - No prototype patching (`X.prototype.m = …`, `Object.setPrototypeOf`, a
 *   prototype taken from a cel-js object).
 * - No use of cel-js's private members: the fields and methods its type
 *   checker and evaluator attach to AST nodes, contexts and the evaluator,
 *   which its .d.ts files do not declare.
 *
 * The scan covers src/ (and bench/ for imports): the engine and everything
 * that might reach into cel-js.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PACKAGE = '@marcbachmann/cel-js';

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

/** The subpaths the package exports (`.`, `./evaluator`, …), as import specifiers. */
function exportedSpecifiers(): Set<string> {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'node_modules', PACKAGE, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
  return new Set(Object.keys(pkg.exports).map((k) => (k === '.' ? PACKAGE : `${PACKAGE}/${k.slice(2)}`)));
}

/**
 * cel-js internals (cel-js 8.0 names) that its .d.ts files do not declare:
 * what the checker attaches to nodes, the evaluator's and contexts' own
 * methods, the registry.
 */
const PRIVATE_MEMBERS = [
  'handle',
  'checkedType',
  'candidates',
  'meta',
  'receiverWithArgs',
  'macroHasProps',
  'functionDesc',
  'leftStaticType',
  'rightStaticType',
  'registry',
  'reuse',
  'tryEval',
  'debugType',
  'debugTypeDeep',
  'debugRuntimeType',
  'createError',
  'getCheckedValue',
  'findBinaryOverload',
  'findUnaryOverload',
  'findFunction',
  'objectTypesByConstructor',
  'optionalType',
  'listType',
];

export interface Violation {
  file: string;
  line: number;
  rule: string;
  text: string;
}

/** Every violation in the TypeScript files under `dirs` (relative to `root`). */
function violations(root: string, dirs: string[], exported: Set<string>): Violation[] {
  return dirs.flatMap((d) => files(join(root, d))).flatMap((file) => scan(relative(root, file), readFileSync(file, 'utf8'), exported));
}

const privateMember = new RegExp(`(?:\\.|\\?\\.)(${PRIVATE_MEMBERS.join('|')})\\b(?!\\s*:)`);

/** The violations in one file's text (`rel`: its path from the repository root). */
function scan(rel: string, text: string, exported: Set<string>): Violation[] {
  const out: Violation[] = [];
  {
    const usesCel = text.includes(PACKAGE);
    text.split('\n').forEach((line, i) => {
      const at = (rule: string): void => void out.push({ file: rel, line: i + 1, rule, text: line.trim() });
      for (const m of line.matchAll(/(?:from\s+|import\(\s*)['"]([^'"]+)['"]/g)) {
        const spec = m[1] as string;
        if ((spec === PACKAGE || spec.startsWith(`${PACKAGE}/`)) && !exported.has(spec)) at(`imports ${spec}, which ${PACKAGE}'s exports map does not list`);
        if (spec.includes('node_modules/')) at(`imports a file from node_modules by path (${spec})`);
      }
      if (/\.prototype\.\w+\s*=[^=]/.test(line) || /\bprototype\s*\[[^\]]+\]\s*=[^=]/.test(line)) at('patches a prototype');
      if (/Object\.setPrototypeOf\s*\(/.test(line)) at('changes a prototype');
      if (usesCel && /Object\.getPrototypeOf\s*\(\s*(ev|evaluator|checker|ctx|context)\b/.test(line)) at("takes the prototype of a cel-js object");
      if (usesCel || rel.startsWith(join('src', 'policy', 'cel'))) {
        const pm = privateMember.exec(line.replace(/\/\/.*$|\/\*.*?\*\/|'[^']*'|"[^"]*"|`[^`]*`/g, ''));
        if (pm) at(`uses cel-js's private member \`${pm[1]}\``);
      }
    });
  }
  return out;
}

test('Portal imports only the files cel-js exports, patches no prototype and uses no private member', () => {
  const found = violations(ROOT, ['src'], exportedSpecifiers());
  assert.deepEqual(found.map((v) => `${v.file}:${v.line}: ${v.rule}: ${v.text}`), []);
});

test('benches import only the files cel-js exports', () => {
  const found = violations(ROOT, ['bench'], exportedSpecifiers()).filter((v) => v.rule.startsWith('imports'));
  assert.deepEqual(found.map((v) => `${v.file}:${v.line}: ${v.rule}`), []);
});

test('the scan finds each kind of violation', () => {
  // The rules themselves, on the shapes of the code that issue 19 removed.
  const exported = exportedSpecifiers();
  const probe = [
    "import { OPERATORS } from '@marcbachmann/cel-js/lib/operators.js';",
    'proto.run = function meteredRun(ast, ctx) {};',
    'Evaluator.prototype.run = wrapped;',
    'const h = node.handle?.[UNCHARGED] ?? node.handle;',
    'const it = iterCtx.reuse(ctx);',
    "if (macro.functionDesc === 'optional.orValue(value)') {}",
  ];
  const rules = probe.map((line) => {
    const v = scan(join('src', 'policy', 'cel', 'probe.ts'), `import { Environment } from '${PACKAGE}';\n${line}\n`, exported);
    return v.length > 0;
  });
  assert.deepEqual(rules, [true, false, true, true, true, true]);
});
