/**
 * src/policy/ holds no process-global mutable state (issue 21 item 4): the
 * same evaluator serves admission, the audit and `portal test`, in worker
 * threads and on the main thread, and what one evaluation leaves behind in
 * a module must never change another's outcome or cost. Evaluation state
 * (the CEL cost meter, the regex deadline, per-request caches) travels in
 * the evaluation context that callers pass in (the request's CEL Budget,
 * the meter handed to generated code, a rule set's RegexClock), or lives in
 * the instance it belongs to (a RuleSet, a compiled composition, a VapSet).
 *
 * The rule, checked on every module's top-level statements:
 * - no `let` or `var`;
 * - no `new Map / Set / WeakMap / WeakSet / LRUCache / Ajv…` bound to a
 *   module constant, unless the constant is typed `ReadonlyMap` /
 *   `ReadonlySet` (a lookup table the type checker keeps constant), or it
 *   is listed in EXCEPTIONS below with the reason it is not evaluation
 *   state.
 *
 * Heuristic by design: a table built by a function call, or an object
 * literal mutated later, is not seen; reviews keep those out.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const POLICY = join(ROOT, 'src', 'policy');

/** Module-level stateful objects that are allowed, by `file:name`, with why. */
const EXCEPTIONS: Readonly<Record<string, string>> = {
  // Validators of Portal's own CRD shapes: compiled once when the module
  // loads, only run afterwards (ajv adds nothing at validation time).
  'validate-rule.ts:crdAjv': 'the PortalRule CRD schema validator, compiled once at load',
  'exception-shape.ts:crdAjv': 'the PortalException CRD schema validator, compiled once at load',
  // validateRule compiles a rule's schema to report errors, then releases
  // it; a fresh ajv costs ~18 ms per call. Nothing evaluates on it.
  'validate-rule.ts:checker': 'compile-and-release checks of rule schemas; never evaluates, so holds no evaluation state',
};

/** Constructors of mutable containers and of objects with internal caches. */
const STATEFUL = /^(Map|Set|WeakMap|WeakSet|LRUCache|Ajv|Ajv2020|SchemaCompiler)$/;

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

function readonlyTyped(d: ts.VariableDeclaration): boolean {
  const t = d.type?.getText() ?? '';
  return /^(ReadonlyMap|ReadonlySet)</.test(t);
}

/** Every top-level violation of one file, as `file:line: what`. */
function violations(path: string): string[] {
  const rel = relative(POLICY, path).split('\\').join('/');
  const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  for (const statement of source.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    const list = statement.declarationList;
    const line = source.getLineAndCharacterOfPosition(statement.getStart()).line + 1;
    const isConst = (list.flags & ts.NodeFlags.Const) !== 0;
    for (const d of list.declarations) {
      const name = d.name.getText();
      if (!isConst) {
        out.push(`src/policy/${rel}:${line}: module-level \`let\`/\`var\` ${name}`);
        continue;
      }
      const init = d.initializer;
      if (init === undefined || !ts.isNewExpression(init)) continue;
      const ctor = init.expression.getText();
      if (!STATEFUL.test(ctor)) continue;
      if (readonlyTyped(d) && /^(Map|Set)$/.test(ctor)) continue;
      if (EXCEPTIONS[`${rel}:${name}`] !== undefined) continue;
      out.push(`src/policy/${rel}:${line}: module-level \`new ${ctor}\` in ${name} (type it ReadonlyMap/ReadonlySet if it is a constant table, else move it into the evaluation context or the instance it belongs to)`);
    }
  }
  return out;
}

test('src/policy/ has no module-level mutable state (no top-level let/var, no module-level caches)', () => {
  const found = files(POLICY).flatMap(violations);
  assert.deepEqual(found, []);
});

test('the rule sees what it is meant to see (a let, a Map cache, an untyped Set)', () => {
  const probe = (text: string): number => {
    const source = ts.createSourceFile('probe.ts', text, ts.ScriptTarget.Latest, true);
    let n = 0;
    for (const s of source.statements) {
      if (!ts.isVariableStatement(s)) continue;
      for (const d of s.declarationList.declarations) {
        if ((s.declarationList.flags & ts.NodeFlags.Const) === 0) n++;
        else if (d.initializer && ts.isNewExpression(d.initializer) && STATEFUL.test(d.initializer.expression.getText()) && !(readonlyTyped(d) && /^(Map|Set)$/.test(d.initializer.expression.getText()))) n++;
      }
    }
    return n;
  };
  assert.equal(probe('let active;'), 1);
  assert.equal(probe('const cache = new Map<string, number>();'), 1);
  assert.equal(probe('const seen = new WeakMap();'), 1);
  assert.equal(probe("const KINDS = new Set(['a']);"), 1);
  assert.equal(probe("const KINDS: ReadonlySet<string> = new Set(['a']);"), 0);
  assert.equal(probe('function f() { let x = new Map(); return x; }'), 0);
  // Every exception still names something that exists (no stale entries).
  for (const key of Object.keys(EXCEPTIONS)) {
    const [file, name] = key.split(':') as [string, string];
    assert.match(readFileSync(join(POLICY, file), 'utf8'), new RegExp(`^const ${name}\\b`, 'm'), key);
  }
});
