/**
 * Portal as production runs it, for the benchmarks: compiled by the
 * project's build (tsc -p tsconfig.build.json, as the Dockerfile's `npm run
 * build`) into a directory inside the checkout (so node_modules resolves).
 *
 * Why: the benchmarks run under tsx, whose esbuild transform keeps function
 * names by wrapping every function created at run time in a defineProperty
 * call. That costs a few hundred nanoseconds per admission decision that the
 * compiled code never pays, and not the same amount for every rule language,
 * so a ratio measured on the source is not production's.
 */
import { spawn } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

export interface CompiledPortal {
  /** The build's directory (what `src/` compiles to). */
  dir: string;
  /** Imports a compiled module by its path under src/, e.g. `policy/index.js`. */
  load<T>(path: string): Promise<T>;
  /** Removes the build. */
  remove(): Promise<void>;
}

/** Compiles Portal into `.bench-dist-<tag>` (see the module comment). */
export async function compilePortal(tag: string): Promise<CompiledPortal> {
  const dir = join(root, `.bench-dist-${tag}`);
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', dir], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`tsc exited ${code}`))));
  });
  return {
    dir,
    load: async <T>(path: string) => (await import(pathToFileURL(join(dir, path)).href)) as T,
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

/**
 * Portal as of another git ref (e.g. `main`), compiled the same way beside
 * this checkout: its `src/` taken with `git archive` into `.bench-ref-<tag>`
 * (inside the checkout, so node_modules resolves), built with this
 * checkout's compiler options. For a side measured against the current
 * code in the same run (bench/admission.ts --baseline).
 */
export async function compileRef(ref: string, tag: string): Promise<CompiledPortal> {
  const base = join(root, `.bench-ref-${tag}`);
  await mkdir(base, { recursive: true });
  await run('sh', ['-c', `git -C "${root}" archive "${ref.replace(/"/g, '')}" src | tar -x -C "${base}"`]);
  await writeFile(join(base, 'tsconfig.json'), JSON.stringify({ extends: '../tsconfig.json', compilerOptions: { noEmit: false, rootDir: 'src', outDir: 'dist' }, include: ['src'] }));
  await run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(base, 'tsconfig.json')]);
  const dir = join(base, 'dist');
  return {
    dir,
    load: async <T>(path: string) => (await import(pathToFileURL(join(dir, path)).href)) as T,
    remove: () => rm(base, { recursive: true, force: true }),
  };
}

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')} exited ${code}`))));
  });
}
