/**
 * No file-level import cycles in the CEL engine and the VAP evaluator
 * (src/policy/cel, src/policy/vap): a file and the files it imports form a
 * tree, so each can be read, tested and loaded on its own. Type-only imports
 * count too (they tie the files together for a reader as much). Parts of
 * one idea share a module below them (e.g. codegen-ast.ts for codegen.ts
 * and codegen-*.ts) instead of importing each other.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));
const CHECKED = ['policy/cel', 'policy/vap'];

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

/** src-relative file → the src-relative files it imports (relative import/export-from, type-only included). */
function graph(): Map<string, string[]> {
  const g = new Map<string, string[]>();
  for (const file of files(SRC)) {
    const text = readFileSync(file, 'utf8');
    const to = [...text.matchAll(/^(?:import|export)\s+(?:type\s+)?[^;]*?from\s+'(\.[^']+)'/gms)].map((m) => relative(SRC, resolve(dirname(file), m[1] as string)));
    g.set(relative(SRC, file), to);
  }
  return g;
}

/** Every cycle through a checked file, each as the list of files around it. */
function cycles(g: Map<string, string[]>): string[][] {
  const checked = (f: string): boolean => CHECKED.some((d) => f.startsWith(`${d}/`));
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

void test('src/policy/cel and src/policy/vap have no file-level import cycles', () => {
  assert.deepEqual(cycles(graph()).map((c) => c.join(' → ')), []);
});
