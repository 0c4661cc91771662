/**
 * Imports flow one way (docs/design.md §11; issue 10 item 4, issue 34 item 1):
 * the layers below, with no allow-listed exception. In particular where rules
 * and policies come from (files, informers) is sources/, between the client
 * and the policy engine below and the servers above, and the CLI only parses,
 * listens and exits: the replica is composed in manager/replica.ts.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));
const DEVCLUSTER = fileURLToPath(new URL('../../packages/devcluster/src/', import.meta.url));

interface Edge {
  from: string;
  to: string;
  typeOnly: boolean;
}

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

/** Every relative import/export-from in `dir`, as src-relative paths (a path outside src/ starts with `../`). */
function edges(dir = SRC): Edge[] {
  const out: Edge[] = [];
  for (const file of files(dir)) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/^(import|export)\s+(type\s+)?[^;(]*?from\s+'(\.[^']+)'/gms)) {
      out.push({ from: relative(SRC, file), to: relative(SRC, resolve(dirname(file), m[3]!)), typeOnly: m[2] !== undefined });
    }
    // A side-effect import (`import './x.ts';`) is an edge too.
    for (const m of text.matchAll(/^import\s+'(\.[^']+)'/gm)) out.push({ from: relative(SRC, file), to: relative(SRC, resolve(dirname(file), m[1]!)), typeOnly: false });
  }
  return out;
}

const top = (path: string) => path.split('/')[0]!;

/**
 * The layers of src/, bottom first (docs/architecture.md draws the same). A
 * file imports only from its own layer or one below; layers that share a
 * rank are siblings and do not import each other.
 */
const LAYERS: ReadonlyArray<readonly string[]> = [
  // Leaf helpers (duration, backoff, the Runnable and leader-term contracts) and Kubernetes object shapes.
  ['util', 'types'],
  // The pure engine: rules, exceptions, CEL, VAP, reports; no I/O (below).
  ['policy'],
  // Logger, log keys, metrics, errors.
  ['observability'],
  // Options, flags and manifest files (read with the policy validator).
  ['config'],
  // The Kubernetes client and its resilient informer.
  ['kube'],
  // Where rules, exceptions, VAPs and what rules read (namespace labels, CRD schemas) come from: files
  // and informers feeding the policy stores; the evaluation pool (adr/0013) that runs the engine in threads.
  ['sources', 'evaluation'],
  // Leadership; the admission server (it reaches the pool through its AnswerReview seam, filled in by manager/).
  ['leader', 'admission'],
  ['audit'],
  ['manager'],
  // The CLI parses, builds the replica through manager/, listens and exits. exports/ holds the
  // modules the root package.json's `exports` map declares (`portal/dev-api`, for the dev cluster).
  ['cli', 'exports'],
];
const RANK: ReadonlyMap<string, number> = new Map(LAYERS.flatMap((layer, rank) => layer.map((dir) => [dir, rank] as const)));

/**
 * Further edges a layer must not take although they point down: admission decides through its seam, not the
 * pool, the client or a source; the pool mirrors the stores the sources fill and never reaches the client.
 */
const ALSO_FORBIDDEN: Readonly<Record<string, readonly string[]>> = {
  admission: ['kube', 'sources', 'evaluation'],
  evaluation: ['kube'],
};

/** The one product module packages/devcluster may import, as the root package.json's `exports` map declares it (ADR 0015). */
const DEV_API = { specifier: 'portal/dev-api', subpath: './dev-api', file: 'exports/dev-api.ts' };
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;

test('imports point down the layers: none to a layer above or beside', () => {
  const bad = edges()
    .filter((e) => !e.to.startsWith('../') && top(e.from) !== top(e.to))
    .filter((e) => {
      const from = RANK.get(top(e.from));
      const to = RANK.get(top(e.to));
      return from === undefined || to === undefined || to >= from || (ALSO_FORBIDDEN[top(e.from)]?.includes(top(e.to)) ?? false);
    })
    .map((e) => `${e.from} → ${e.to}`);
  assert.deepEqual(bad, []);
});

test('every top-level directory of src/ is a known layer (a new one is guarded from its first file)', () => {
  const dirs = readdirSync(SRC, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort();
  assert.deepEqual(dirs.filter((d) => !RANK.has(d)), []);
  assert.deepEqual(readdirSync(SRC, { withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name), [], 'every source file lives in a layer');
});

/** Node modules that do I/O; `from` → what it must not import. */
const IO_MODULES = /^(node:)?(fs|fs\/promises|net|tls|http|https|http2|child_process|dgram|dns|worker_threads|cluster)$/;
const NO_IO: Record<string, RegExp> = {
  // policy/ is pure: admission, the audit and `portal test` run the same evaluator (docs/design.md §11).
  policy: IO_MODULES,
  // observability/ is the bottom layer: logger, keys, metrics, errors; it opens nothing itself.
  observability: IO_MODULES,
  types: IO_MODULES,
  // util/ is the leaf helpers everything may use: none of them opens anything.
  util: IO_MODULES,
};

/** Every bare (package or node:) import in `dir`, with the importing file relative to `dir`. (An import clause holds no `(`: a function whose body writes an import statement as text is not one.) */
function bareImports(dir: string): { from: string; to: string; typeOnly: boolean }[] {
  const out: { from: string; to: string; typeOnly: boolean }[] = [];
  for (const file of files(dir)) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/^(import|export)\s+(type\s+)?[^;(]*?from\s+'([^.'][^']*)'/gms)) out.push({ from: relative(dir, file), to: m[3]!, typeOnly: m[2] !== undefined });
    for (const m of text.matchAll(/\bimport\(\s*'([^.'][^']*)'\s*\)/g)) out.push({ from: relative(dir, file), to: m[1]!, typeOnly: false });
    for (const m of text.matchAll(/^import\s+'([^.'][^']*)'/gm)) out.push({ from: relative(dir, file), to: m[1]!, typeOnly: false });
  }
  return out;
}

test('policy/, observability/, types/ and util/ do no I/O; config/ and observability/ reach no Kubernetes client', () => {
  const bare = bareImports(SRC);
  const io = bare.filter((e) => !e.typeOnly && NO_IO[top(e.from)]?.test(e.to)).map((e) => `${e.from} → ${e.to}`);
  assert.deepEqual(io, []);
  const client = bare.filter((e) => !e.typeOnly && ['config', 'observability', 'policy', 'types'].includes(top(e.from)) && e.to.startsWith('@kubernetes/')).map((e) => `${e.from} → ${e.to}`);
  assert.deepEqual(client, []);
});

test('nothing outside cli/ imports cli/; the rule sources are in sources/', () => {
  assert.deepEqual(
    edges()
      .filter((e) => top(e.from) !== 'cli' && top(e.to) === 'cli')
      .map((e) => `${e.from} → ${e.to}`),
    [],
  );
  for (const source of ['rule-source.ts', 'file-rule-source.ts', 'cluster-rule-source.ts', 'rule-files.ts']) assert.ok(files(SRC).some((f) => relative(SRC, f) === `sources/${source}`), source);
});

test('the product never imports the dev cluster; the dev cluster reaches the product only through portal/dev-api', () => {
  // Static imports only: src/cli/dev-command.ts loads @portal/devcluster with a dynamic import() and says how to install it when absent.
  const intoPackage = edges().filter((e) => e.to.startsWith('../packages/'));
  assert.deepEqual(intoPackage.map((e) => `${e.from} → ${e.to}`), []);
  for (const file of files(SRC)) {
    assert.doesNotMatch(readFileSync(file, 'utf8'), /^(import|export)\s(?!type\s)[^;]*from\s+'@portal\/devcluster'/m, `${relative(SRC, file)} imports @portal/devcluster statically`);
  }
  // No relative import leaves the package (into src/, test/, bench/, scripts/): it ships on its own.
  const outside = edges(DEVCLUSTER).filter((e) => !e.to.startsWith('../packages/devcluster/'));
  assert.deepEqual(outside.map((e) => `${e.from} → ${e.to}`), []);
  // The product is named only by its declared entry point, which the root package declares and the package depends on.
  const product = bareImports(DEVCLUSTER).filter((e) => e.to === 'portal' || e.to.startsWith('portal/'));
  assert.ok(product.length > 0, 'the dev cluster uses the policy engine');
  assert.deepEqual([...new Set(product.map((e) => e.to))], [DEV_API.specifier]);
  assert.deepEqual(readJson(join(ROOT, 'package.json')).exports, { [DEV_API.subpath]: `./src/${DEV_API.file}` });
  assert.equal((readJson(join(ROOT, 'packages/devcluster/package.json')).dependencies as Record<string, string>).portal, 'file:../..');
  // The entry point is the top of the product: nothing in src/ imports it.
  assert.deepEqual(edges().filter((e) => e.to === DEV_API.file).map((e) => `${e.from} → ${e.to}`), []);
});

test('packages/devcluster/package.json declares exactly the packages its sources import', () => {
  const pkg = (spec: string) => (spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
  const imported = new Set(bareImports(DEVCLUSTER).filter((e) => !e.to.startsWith('node:')).map((e) => pkg(e.to)));
  const declared = readJson(join(ROOT, 'packages/devcluster/package.json'));
  assert.deepEqual(declared.devDependencies, undefined, 'the package has no dev dependencies: its tests live in the root test/');
  assert.deepEqual(Object.keys(declared.dependencies as object).sort(), [...imported].sort());
  // Versions agree with the root's, so the lock holds one copy of each.
  const root = readJson(join(ROOT, 'package.json'));
  const rootVersions = { ...(root.dependencies as object), ...(root.devDependencies as object) } as Record<string, string>;
  for (const [name, version] of Object.entries(declared.dependencies as Record<string, string>)) {
    if (name in rootVersions) assert.equal(version, rootVersions[name], `${name}: the dev cluster and the root pin the same version`);
  }
});

test('only cli/dev-command.ts names the dev cluster package (a type import and a dynamic import)', () => {
  const named = bareImports(SRC).filter((e) => e.to.startsWith('@portal/') && e.from !== 'cli/dev-command.ts');
  assert.deepEqual(named.map((e) => `${e.from} → ${e.to}`), []);
});
