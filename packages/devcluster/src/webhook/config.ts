/**
 * The parts of `admissionregistration.k8s.io/v1` ValidatingWebhookConfiguration
 * the admission chain reads, and their normalisation from stored JSON with the
 * API server's defaults applied (the embedded server stores objects as sent,
 * so defaulting happens here, once per call).
 */
import { isObject } from '../is-object.ts';
import type { LabelSelector } from './label-selector.ts';

export const ADMISSION_REGISTRATION_GROUP = 'admissionregistration.k8s.io';

export interface RuleWithOperations {
  operations: string[];
  apiGroups: string[];
  apiVersions: string[];
  resources: string[];
  /** "Cluster" | "Namespaced" | "*" */
  scope: string;
}

export interface ServiceReference {
  namespace: string;
  name: string;
  /** @default "/" */
  path: string;
  /** @default 443 */
  port: number;
}

export interface ValidatingWebhook {
  /** Name of the owning configuration (for logs and ordering). */
  configuration: string;
  name: string;
  clientConfig: { url?: string; service?: ServiceReference; caBundle?: string };
  rules: RuleWithOperations[];
  /** @default "Fail" */
  failurePolicy: 'Fail' | 'Ignore';
  /** @default "Equivalent" (treated as Exact: the embedded server serves one version per resource) */
  matchPolicy: string;
  /** @default {} (every namespace) */
  namespaceSelector: LabelSelector;
  /** @default {} (every object) */
  objectSelector: LabelSelector;
  /** @default 10 (kube-apiserver's default for admissionregistration/v1) */
  timeoutSeconds: number;
  admissionReviewVersions: string[];
}

type Json = Record<string, unknown>;

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/**
 * Every webhook of every configuration, configurations sorted by name (as
 * kube-apiserver's configuration manager does), webhooks in declared order.
 */
export function collectWebhooks(configurations: readonly Record<string, unknown>[], defaultTimeoutSeconds: number): ValidatingWebhook[] {
  const sorted = [...configurations].sort((a, b) => configName(a).localeCompare(configName(b)));
  const out: ValidatingWebhook[] = [];
  for (const config of sorted) {
    const webhooks = Array.isArray(config['webhooks']) ? config['webhooks'] : [];
    for (const raw of webhooks) {
      if (isObject(raw)) out.push(normalizeWebhook(configName(config), raw, defaultTimeoutSeconds));
    }
  }
  return out;
}

function configName(config: Record<string, unknown>): string {
  const meta = config['metadata'];
  return isObject(meta) && typeof meta['name'] === 'string' ? meta['name'] : '';
}

function normalizeWebhook(configuration: string, raw: Json, defaultTimeoutSeconds: number): ValidatingWebhook {
  const cc = isObject(raw['clientConfig']) ? raw['clientConfig'] : {};
  const clientConfig: ValidatingWebhook['clientConfig'] = {};
  if (typeof cc['url'] === 'string') clientConfig.url = cc['url'];
  if (typeof cc['caBundle'] === 'string' && cc['caBundle'] !== '') clientConfig.caBundle = cc['caBundle'];
  if (isObject(cc['service'])) {
    const s = cc['service'];
    clientConfig.service = {
      namespace: String(s['namespace'] ?? ''),
      name: String(s['name'] ?? ''),
      path: typeof s['path'] === 'string' ? s['path'] : '/',
      port: typeof s['port'] === 'number' ? s['port'] : 443,
    };
  }
  const rules = (Array.isArray(raw['rules']) ? raw['rules'] : []).filter(isObject).map((r) => ({
    operations: strings(r['operations']),
    apiGroups: strings(r['apiGroups']),
    apiVersions: strings(r['apiVersions']),
    resources: strings(r['resources']),
    scope: typeof r['scope'] === 'string' ? r['scope'] : '*',
  }));
  const timeout = raw['timeoutSeconds'];
  return {
    configuration,
    name: String(raw['name'] ?? ''),
    clientConfig,
    rules,
    failurePolicy: raw['failurePolicy'] === 'Ignore' ? 'Ignore' : 'Fail',
    matchPolicy: typeof raw['matchPolicy'] === 'string' ? raw['matchPolicy'] : 'Equivalent',
    namespaceSelector: isObject(raw['namespaceSelector']) ? (raw['namespaceSelector'] as LabelSelector) : {},
    objectSelector: isObject(raw['objectSelector']) ? (raw['objectSelector'] as LabelSelector) : {},
    timeoutSeconds: typeof timeout === 'number' && timeout > 0 ? timeout : defaultTimeoutSeconds,
    admissionReviewVersions: strings(raw['admissionReviewVersions']),
  };
}
