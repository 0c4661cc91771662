/**
 * Discovery documents (legacy, unaggregated): /api, /api/v1, /apis,
 * /apis/G/V and /version. kubectl asks for aggregated discovery first and
 * falls back to these when the answer's Content-Type is plain JSON.
 */
import { EPHEMERAL_CONTAINERS, servesEphemeralContainers } from './ephemeral-containers.ts';
import { groupVersion, type Registry, type ResourceDef } from './registry.ts';
import { isScalable, scaleDiscovery } from './scale.ts';
import { SELF_SUBJECT_REVIEW_RESOURCE } from './whoami.ts';
import type { Obj } from './types.ts';

const RW_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

export const VERSION_INFO = {
  major: '1', minor: '35', emulationMajor: '1', emulationMinor: '35', minCompatibilityMajor: '1', minCompatibilityMinor: '34',
  gitVersion: 'v1.35.0-portal', gitCommit: '0000000000000000000000000000000000000000', gitTreeState: 'clean',
  buildDate: '2025-12-17T00:00:00Z', goVersion: 'go1.25.5', compiler: 'gc', platform: 'linux/amd64',
};

export function apiVersions(serverAddress: string): Obj {
  return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }] };
}

export function apiGroupList(reg: Registry): Obj {
  const groups: Obj[] = [];
  for (const [group, versions] of reg.groups()) {
    if (group === '') continue;
    const vs = versions.map((v) => ({ groupVersion: `${group}/${v}`, version: v }));
    groups.push({ name: group, versions: vs, preferredVersion: vs[0] });
  }
  // Served outside the registry (nothing stored): SelfSubjectReview (whoami.ts).
  if (!groups.some((g) => g['name'] === AUTHN_GROUP)) {
    const v = { groupVersion: `${AUTHN_GROUP}/v1`, version: 'v1' };
    groups.push({ name: AUTHN_GROUP, versions: [v], preferredVersion: v });
  }
  return { kind: 'APIGroupList', apiVersion: 'v1', groups };
}

const AUTHN_GROUP = 'authentication.k8s.io';

function entries(d: ResourceDef): Obj[] {
  const main: Obj = { name: d.resource, singularName: d.singular, namespaced: d.namespaced, kind: d.kind, verbs: RW_VERBS };
  if (d.shortNames.length) main['shortNames'] = d.shortNames;
  if (d.categories.length) main['categories'] = d.categories;
  // The main resource comes first: client-node takes the first entry whose kind matches.
  const out = [main];
  if (d.hasStatus) out.push({ name: `${d.resource}/status`, singularName: '', namespaced: d.namespaced, kind: d.kind, verbs: ['get', 'patch', 'update'] });
  if (isScalable(d)) out.push(scaleDiscovery(d));
  if (servesEphemeralContainers(d)) out.push({ name: `${d.resource}/${EPHEMERAL_CONTAINERS}`, singularName: '', namespaced: d.namespaced, kind: d.kind, verbs: ['get', 'patch', 'update'] });
  if (d.hasEviction) out.push({ name: `${d.resource}/eviction`, singularName: '', namespaced: d.namespaced, group: 'policy', version: 'v1', kind: 'Eviction', verbs: ['create'] });
  return out;
}

export function apiResourceList(reg: Registry, group: string, version: string): Obj | undefined {
  const defs = reg.all().filter((d) => d.group === group && d.version === version);
  const extra = group === AUTHN_GROUP && version === 'v1' ? [SELF_SUBJECT_REVIEW_RESOURCE] : [];
  if (defs.length === 0 && extra.length === 0) return undefined;
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: groupVersion({ group, version }), resources: [...defs.flatMap(entries), ...extra] };
}
