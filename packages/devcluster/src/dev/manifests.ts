/**
 * Reading the manifests `portal dev` installs: every document under a
 * directory (recursively, files in name order), as plain objects, read by
 * the same bounded reader as `portal serve` and `portal test`
 * (config/manifests.ts: regular files only, sizes and nesting bounded).
 * Problems are collected, not thrown one by one, so the CLI reports them all
 * at once.
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { readManifests as readManifestFiles, type ReadLimits } from 'portal/dev-api';

export type Manifest = Record<string, unknown> & { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } };

export interface ReadManifests {
  objects: Manifest[];
  problems: string[];
}

/** All documents of all manifest files under `dir`, optionally only of the given kinds. */
export async function readManifests(dir: string, kinds?: readonly string[], limits?: Readonly<ReadLimits>): Promise<ReadManifests> {
  const problems: string[] = [];
  const objects: Manifest[] = [];
  try {
    if (!(await stat(dir)).isDirectory()) return { objects, problems: [`${dir}: not a directory`] };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { objects, problems: [`${dir}: ${code === 'ENOENT' ? 'no such directory' : `cannot read it (${code ?? String(err)})`}`] };
  }
  const read = await readManifestFiles([dir], limits);
  problems.push(...read.errors.map((e) => `${e.source}: ${e.message}`));
  for (const { source, object } of read.documents) {
    const o = object as Partial<Manifest>;
    if (typeof o.apiVersion !== 'string' || typeof o.kind !== 'string' || typeof o.metadata?.name !== 'string') {
      problems.push(`${source}: a document without apiVersion, kind and metadata.name`);
      continue;
    }
    if (kinds && !kinds.includes(o.kind)) {
      problems.push(`${source}: ${o.kind} "${o.metadata.name}" is not one of ${kinds.join(', ')}`);
      continue;
    }
    objects.push(o as Manifest);
  }
  return { objects, problems };
}

/**
 * Where the chart keeps the CustomResourceDefinitions `portal dev` applies:
 * Portal's own (`crds/`) and the report CRDs it installs by default
 * (`files/crds/`, templated so they can be switched off in a cluster).
 */
export const CHART_CRD_DIRS: readonly string[] = ['crds', join('files', 'crds')];

/** Every CRD the chart at `chart` installs by default (CHART_CRD_DIRS), with the problems of both directories. */
export async function readChartCrds(chart: string): Promise<ReadManifests> {
  const all: ReadManifests = { objects: [], problems: [] };
  for (const sub of CHART_CRD_DIRS) {
    const read = await readManifests(join(chart, sub), ['CustomResourceDefinition']);
    all.objects.push(...read.objects);
    all.problems.push(...read.problems);
  }
  return all;
}
