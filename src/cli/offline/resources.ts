/**
 * Manifests as the objects `portal test` evaluates offline: which documents
 * are resources (not rules or policies), what is missing from one that cannot
 * be evaluated, and the namespace an object lands in when there is no API
 * server to ask. Shared by the ad-hoc mode (`--policies DIR FILE...`) and the
 * suites (`*.portal-test.yaml`).
 */
import { isVapDocument } from '../../sources/vap-files.ts';
import { RULE_GROUP, type EvaluationInput, type KubeObject } from '../../policy/index.ts';
import type { ResourceRef } from '../../policy/report-format.ts';
import { isObject } from '../../util/is-object.ts';

/**
 * Built-in cluster-scoped kinds that appear in manifests; any other kind
 * without metadata.namespace is taken to be namespaced. Offline there is no
 * discovery to ask, so this list is the documented assumption.
 */
export const CLUSTER_SCOPED_KINDS: ReadonlySet<string> = new Set([
  'Namespace',
  'Node',
  'PersistentVolume',
  'ClusterRole',
  'ClusterRoleBinding',
  'StorageClass',
  'CSIDriver',
  'CSINode',
  'VolumeAttachment',
  'PriorityClass',
  'RuntimeClass',
  'IngressClass',
  'CustomResourceDefinition',
  'APIService',
  'MutatingWebhookConfiguration',
  'ValidatingWebhookConfiguration',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
  'CertificateSigningRequest',
  'FlowSchema',
  'PriorityLevelConfiguration',
  'ClusterPolicyReport',
  'PortalClusterRule',
]);

/** Where a namespaced object without metadata.namespace lands, as with `kubectl apply`. */
export const DEFAULT_NAMESPACE = 'default';
/** The immutable label every namespace carries (the API server sets it). */
export const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/** `v1`, `apps/v1`, `example.com/v1beta2`: what a resource's apiVersion looks like. */
const API_VERSION = /^([a-z0-9]([a-z0-9.-]*[a-z0-9])?\/)?v[0-9]+((alpha|beta)[0-9]+)?$/;
/** Kinds are CamelCase identifiers. */
const KIND = /^[A-Z][A-Za-z0-9]*$/;

/** One object to evaluate: what reports name it by, and the evaluator's input (operation AUDIT until a caller says otherwise). */
export interface Resource {
  ref: ResourceRef;
  input: Omit<EvaluationInput, 'namespaceLabels'>;
}

export function isRuleObject(o: Record<string, unknown>): boolean {
  const apiVersion = o['apiVersion'];
  return typeof apiVersion === 'string' && apiVersion.startsWith(`${RULE_GROUP}/`) && (o['kind'] === 'PortalRule' || o['kind'] === 'PortalClusterRule' || o['kind'] === 'PortalException');
}

/** Rules and policies among resource files are not evaluated as resources. */
export function isPolicyObject(o: Record<string, unknown>): boolean {
  return isRuleObject(o) || isVapDocument(o);
}

/** Why an input document cannot be evaluated, or undefined when it can. */
export function unsupported(o: Record<string, unknown>): string | undefined {
  const missing: string[] = [];
  const apiVersion = o['apiVersion'];
  const kind = o['kind'];
  const metadata = o['metadata'];
  const name = isObject(metadata) ? metadata['name'] : undefined;
  if (typeof apiVersion !== 'string' || apiVersion === '') missing.push('apiVersion');
  if (typeof kind !== 'string' || kind === '') missing.push('kind');
  if (typeof name !== 'string' || name === '') missing.push('metadata.name');
  if (missing.length > 0) {
    return `not a Kubernetes object: missing ${missing.join(', ')} (generated names are not supported offline)`;
  }
  if (!API_VERSION.test(apiVersion as string)) return `unknown apiVersion "${String(apiVersion)}" (expected "v1" or "group/version")`;
  if (!KIND.test(kind as string)) return `unknown kind "${String(kind)}" (kinds are CamelCase, e.g. Deployment)`;
  const namespace = isObject(metadata) ? metadata['namespace'] : undefined;
  if (namespace !== undefined && typeof namespace !== 'string') return 'metadata.namespace must be a string';
  return undefined;
}

/** The namespace an object lives in: its own, else "" for a cluster-scoped kind, else "default". */
export function namespaceOf(o: KubeObject): string {
  const declared = o.metadata?.namespace;
  return typeof declared === 'string' && declared !== '' ? declared : CLUSTER_SCOPED_KINDS.has(String(o.kind)) ? '' : DEFAULT_NAMESPACE;
}

/** A document that passed unsupported() as a resource to evaluate. */
export function toResource(o: Record<string, unknown>): Resource {
  const apiVersion = o['apiVersion'] as string;
  const kind = o['kind'] as string;
  const metadata = o['metadata'] as Record<string, unknown>;
  const name = metadata['name'] as string;
  const slash = apiVersion.indexOf('/');
  const group = slash === -1 ? '' : apiVersion.slice(0, slash);
  const version = slash === -1 ? apiVersion : apiVersion.slice(slash + 1);
  const namespace = namespaceOf(o as KubeObject);
  const ref: ResourceRef = { apiVersion, kind, namespace, name };
  if (typeof metadata['uid'] === 'string') ref.uid = metadata['uid'];
  return {
    ref,
    input: {
      operation: 'AUDIT',
      kind: { group, version, kind },
      subResource: '',
      namespace,
      name,
      object: o as KubeObject,
      oldObject: null,
    },
  };
}

/** The string-valued labels of an object (others are not labels Kubernetes would accept). */
export function stringLabels(o: Record<string, unknown>): Record<string, string> {
  const metadata = o['metadata'];
  const labels = isObject(metadata) ? metadata['labels'] : undefined;
  const out: Record<string, string> = {};
  if (isObject(labels)) for (const [k, v] of Object.entries(labels)) if (typeof v === 'string') out[k] = v;
  return out;
}
