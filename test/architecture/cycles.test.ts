/**
 * No file-level import cycles anywhere in the product (src/) or the dev
 * cluster (each src/ under packages/): a file and the files it imports form a tree, so
 * each can be read, tested and loaded on its own (issue 34 item 1). Type-only
 * imports count too (they tie the files together for a reader as much).
 * Parts of one idea share a module below them (codegen-ast.ts for codegen.ts
 * and codegen-*.ts; match-keys.ts for rule and exception matching;
 * report-shape.ts for report.ts and report-compare.ts) instead of importing
 * each other.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TREES = ['src', ...readdirSync(join(ROOT, 'packages')).map((p) => `packages/${p}/src`)].filter((t) => existsSync(join(ROOT, t)));

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

/** Repository-relative file → the files it imports (relative import/export-from, type-only included). */
function graph(): Map<string, string[]> {
  const g = new Map<string, string[]>();
  for (const file of TREES.flatMap((t) => files(join(ROOT, t)))) {
    const text = readFileSync(file, 'utf8');
    const to = [...text.matchAll(/^(?:import|export)\s+(?:type\s+)?[^;]*?from\s+'(\.[^']+)'/gms)].map((m) => relative(ROOT, resolve(dirname(file), m[1] as string)));
    g.set(relative(ROOT, file), to);
  }
  return g;
}

/** Every cycle, each as the list of files around it. */
function cycles(g: Map<string, string[]>): string[][] {
  const checked = (f: string): boolean => g.has(f);
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (f: string): void => {
    state.set(f, 'open');
    path.push(f);
    for (const t of g.get(f) ?? []) {
      if (!checked(t)) continue;
      if (state.get(t) === 'open') found.push(path.slice(path.indexOf(t)).concat(t));
      else if (state.get(t) === undefined) visit(t);
    }
    path.pop();
    state.set(f, 'done');
  };
  for (const f of [...g.keys()].filter(checked).sort()) if (state.get(f) === undefined) visit(f);
  return found;
}

void test('src/ and packages/ have no file-level import cycles', () => {
  const g = graph();
  assert.ok(g.has('src/cli/main.ts') && g.has('packages/devcluster/src/index.ts'), 'both trees are read');
  assert.deepEqual(cycles(g).map((c) => c.join(' → ')), []);
});
