/**
 * Reading the manifests `portal dev` installs: every YAML document under a
 * directory (recursively, files in name order), as plain objects. Problems
 * are collected, not thrown one by one, so the CLI reports them all at once.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { SUITE_FILE, type ReadLimits } from '../../../../src/config/manifests.ts';

export type Manifest = Record<string, unknown> & { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } };

export interface ReadManifests {
  objects: Manifest[];
  problems: string[];
}

async function yamlFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await yamlFiles(path)));
    // `portal test` suites beside the policies are not manifests to install.
    else if (/\.ya?ml$/.test(e.name) && !SUITE_FILE.test(e.name)) out.push(path);
  }
  return out;
}

/** All documents of all YAML files under `dir`, optionally only of the given kinds, with sizes checked before parsing when `limits` is given. */
export async function readManifests(dir: string, kinds?: readonly string[], limits?: Readonly<ReadLimits>): Promise<ReadManifests> {
  const problems: string[] = [];
  const objects: Manifest[] = [];
  try {
    if (!(await stat(dir)).isDirectory()) return { objects, problems: [`${dir}: not a directory`] };
  } catch (err) {
    return { objects, problems: [`${dir}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`] };
  }
  const files = await yamlFiles(dir);
  if (limits) {
    const mib = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MiB`;
    const sizes = await Promise.all(files.map((f) => stat(f).then((i) => i.size)));
    const total = sizes.reduce((a, b) => a + b, 0);
    const over = files.flatMap((f, i) => ((sizes[i] ?? 0) > limits.maxFileBytes ? [`${f}: file is ${mib(sizes[i] ?? 0)}, over the ${mib(limits.maxFileBytes)} limit for a ${limits.what}; split it into smaller files`] : []));
    if (total > limits.maxTotalBytes) over.push(`${dir}: ${files.length} files hold ${mib(total)}, over the ${mib(limits.maxTotalBytes)} limit for all ${limits.what}s together`);
    if (over.length > 0) return { objects, problems: over };
  }
  for (const file of files) {
    const docs = parseAllDocuments(await readFile(file, 'utf8'));
    for (const doc of Array.isArray(docs) ? docs : [docs]) {
      if (doc.errors.length > 0) {
        problems.push(`${file}: ${doc.errors[0]?.message ?? 'invalid YAML'}`);
        continue;
      }
      const value: unknown = doc.toJSON();
      if (value === null || value === undefined) continue;
      const o = value as Partial<Manifest>;
      if (typeof o !== 'object' || typeof o.apiVersion !== 'string' || typeof o.kind !== 'string' || typeof o.metadata?.name !== 'string') {
        problems.push(`${file}: a document without apiVersion, kind and metadata.name`);
        continue;
      }
      if (kinds && !kinds.includes(o.kind)) {
        problems.push(`${file}: ${o.kind} "${o.metadata.name}" is not one of ${kinds.join(', ')}`);
        continue;
      }
      objects.push(o as Manifest);
    }
  }
  return { objects, problems };
}
