/**
 * Runs the real Helm 4 binary against charts/portal and parses what it renders.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';
import { helmPath } from '../support/tools.ts';

export const chartDir = fileURLToPath(new URL('../../charts/portal', import.meta.url));
export const RELEASE = 'portal';
export const NAMESPACE = 'portal-system';

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function helm(args: string[]): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(helmPath(), args, { maxBuffer: 64 * 1024 * 1024, env: { ...process.env, HELM_CACHE_HOME: join(tmpdir(), 'portal-helm-cache') } }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Writes `values` to a temporary file for the duration of `fn`. */
export async function withValuesFile<T>(values: unknown, fn: (file: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'portal-chart-'));
  try {
    const file = join(dir, 'values.yaml');
    await writeFile(file, stringify(values));
    return await fn(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `helm template` with optional extra values; throws with Helm's stderr on failure. */
export async function render(values?: unknown, extraArgs: string[] = []): Promise<Manifest[]> {
  const run = async (args: string[]): Promise<Manifest[]> => {
    const r = await helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, ...args]);
    if (r.code !== 0) throw new Error(`helm template failed (${r.code}): ${r.stderr}`);
    return parseAllDocuments(r.stdout)
      .map((d) => d.toJS() as Manifest | null)
      .filter((m): m is Manifest => m !== null);
  };
  if (values === undefined && extraArgs.length === 0) {
    // The default render is shared by many tests (Helm takes ~0.2 s per run).
    // Its certificate is generated once, which no test depends on.
    defaultRender ??= run([]);
    return structuredClone(await defaultRender);
  }
  return values === undefined ? run(extraArgs) : withValuesFile(values, (file) => run(['--values', file, ...extraArgs]));
}

let defaultRender: Promise<Manifest[]> | undefined;

export function find(manifests: Manifest[], kind: string, name?: string): Manifest {
  const found = manifests.find((m) => m.kind === kind && (name === undefined || m.metadata.name === name));
  if (!found) throw new Error(`no ${kind}${name ? ` ${name}` : ''} rendered; got ${manifests.map((m) => `${m.kind}/${m.metadata.name}`).join(', ')}`);
  return found;
}
