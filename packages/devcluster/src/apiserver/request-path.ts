/** What an API request addresses: its resource path and its verb. */
import type { RequestScope } from './cluster.ts';
import { EPHEMERAL_CONTAINERS, servesEphemeralContainers } from './ephemeral-containers.ts';
import type { Registry, ResourceDef } from './registry.ts';
import { isScalable } from './scale.ts';
import { errors, type ApiError } from './status.ts';

/** Pod subresources served by the kubelet, which `portal dev` does not have. */
export const NO_RUNTIME = new Set(['log', 'exec', 'attach', 'portforward', 'proxy']);

export function noRuntime(s: RequestScope): ApiError {
  return errors.badRequest(`portal dev has no container runtime: pods/${s.subresource} is not available (the Pod "${s.name}" is stored and admitted, never run)`);
}

export interface Parsed { def: ResourceDef; namespace: string; name: string; subresource: string }

/** The resource, namespace, name and subresource of an API path below /api/v1 or /apis/{group}/{version}. */
export function parseResourcePath(reg: Registry, group: string, version: string, rest: string[]): Parsed | undefined {
  let namespace = '';
  let segs = rest;
  // /namespaces/{ns}/{resource}... except the namespaces resource itself (/namespaces/{name}[/status]).
  if (segs[0] === 'namespaces' && segs.length >= 3 && !(group === '' && (segs[2] === 'status' || segs[2] === 'finalize') && segs.length === 3)) {
    namespace = segs[1]!;
    segs = segs.slice(2);
  }
  const def = reg.get(group, version, segs[0]!);
  if (!def) return undefined;
  if (namespace && !def.namespaced) return undefined;
  const name = segs[1] ?? '';
  const subresource = segs[2] ?? '';
  if (segs.length > 3) return undefined;
  if (subresource === 'status' && !def.hasStatus) return undefined;
  if (subresource === 'eviction' && !def.hasEviction) return undefined;
  if (subresource === 'scale' && !isScalable(def)) return undefined;
  if (subresource === EPHEMERAL_CONTAINERS && !servesEphemeralContainers(def)) return undefined;
  if (NO_RUNTIME.has(subresource) && !(def.group === '' && def.resource === 'pods')) return undefined;
  const known = subresource === 'status' || subresource === 'eviction' || subresource === 'scale' || subresource === EPHEMERAL_CONTAINERS || NO_RUNTIME.has(subresource);
  if (subresource && !known) return undefined;
  return { def, namespace, name, subresource };
}

/** The authorization verb of a request (list vs watch vs get, delete vs deletecollection). */
export function requestVerb(method: string, s: RequestScope): string {
  switch (method) {
    case 'GET':
      if (s.name) return 'get';
      return s.query.get('watch') === 'true' || s.query.get('watch') === '1' ? 'watch' : 'list';
    case 'POST': return 'create';
    case 'PUT': return 'update';
    case 'PATCH': return 'patch';
    case 'DELETE': return s.name ? 'delete' : 'deletecollection';
    default: return method.toLowerCase();
  }
}
