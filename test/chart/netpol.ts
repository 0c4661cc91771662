/**
 * A small NetworkPolicy evaluator (networking.k8s.io/v1 ingress semantics)
 * for the chart's rendered policy, in the spirit of rbac.ts: which sources can
 * open a TCP connection to a port of a pod. Semantics from the Kubernetes
 * documentation: a pod selected by any policy with Ingress in policyTypes is
 * isolated and accepts only what some rule of those policies allows (rules
 * are ORed; inside a rule, ports AND peers; an empty `ports` or `from` means
 * all); a peer with both podSelector and namespaceSelector needs both;
 * podSelector alone means the policy's own namespace; named ports resolve
 * against the destination container's ports. Traffic from the pod's own node
 * is always allowed (that is how kubelet probes get through).
 */
import type { Manifest } from './helm.ts';

interface Selector { matchLabels?: Record<string, string>; matchExpressions?: { key: string; operator: string; values?: string[] }[] }
interface Peer { podSelector?: Selector; namespaceSelector?: Selector; ipBlock?: { cidr: string; except?: string[] } }
interface Rule { ports?: { port?: number | string; protocol?: string }[]; from?: Peer[] }

export type Source =
  | { node: true }
  | { namespace: string; namespaceLabels: Record<string, string>; podLabels: Record<string, string> }
  | { ip: string };

export interface Destination {
  namespace: string;
  labels: Record<string, string>;
  /** Container ports by name. */
  namedPorts: Record<string, number>;
}

function selects(sel: Selector | undefined, labels: Record<string, string>): boolean {
  if (!sel) return true;
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const v = labels[e.key];
    const ok = e.operator === 'In' ? has && (e.values ?? []).includes(v!)
      : e.operator === 'NotIn' ? !has || !(e.values ?? []).includes(v!)
        : e.operator === 'Exists' ? has : !has;
    if (!ok) return false;
  }
  return true;
}

function ipToInt(ip: string): number {
  return ip.split('.').reduce((n, o) => n * 256 + Number(o), 0);
}

function inCidr(ip: string, cidr: string): boolean {
  const [base, bits] = cidr.split('/');
  const mask = Number(bits) === 0 ? 0 : 2 ** 32 - 2 ** (32 - Number(bits));
  return (ipToInt(ip) & mask) >>> 0 === (ipToInt(base!) & mask) >>> 0;
}

function peerAllows(peer: Peer, policyNamespace: string, src: Source): boolean {
  if ('node' in src) return false;
  if ('ip' in src) return peer.ipBlock !== undefined && inCidr(src.ip, peer.ipBlock.cidr) && !(peer.ipBlock.except ?? []).some((c) => inCidr(src.ip, c));
  if (peer.ipBlock) return false;
  const nsOk = peer.namespaceSelector ? selects(peer.namespaceSelector, src.namespaceLabels) : src.namespace === policyNamespace;
  return nsOk && selects(peer.podSelector, src.podLabels);
}

/** Whether `src` may connect to TCP `port` of `dst` under `policies` (all NetworkPolicies of the release). */
export function allowed(policies: Manifest[], dst: Destination, port: number, src: Source): boolean {
  if ('node' in src) return true;
  const selecting = policies.filter((p) => {
    const spec = p['spec'] as { podSelector: Selector; policyTypes?: string[] };
    return p.metadata.namespace === dst.namespace && selects(spec.podSelector, dst.labels) && (spec.policyTypes ?? ['Ingress']).includes('Ingress');
  });
  if (selecting.length === 0) return true;
  return selecting.some((p) => ((p['spec'] as { ingress?: Rule[] }).ingress ?? []).some((rule) => {
    const portOk = !rule.ports || rule.ports.length === 0 || rule.ports.some((rp) => {
      if ((rp.protocol ?? 'TCP') !== 'TCP') return false;
      if (rp.port === undefined) return true;
      return (typeof rp.port === 'number' ? rp.port : dst.namedPorts[rp.port]) === port;
    });
    const fromOk = !rule.from || rule.from.length === 0 || rule.from.some((peer) => peerAllows(peer, p.metadata.namespace ?? '', src));
    return portOk && fromOk;
  }));
}
