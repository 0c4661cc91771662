/**
 * The ValidatingWebhookConfiguration, built from the chart's `webhook:` values.
 *
 * The Helm chart (charts/portal/templates/webhook.yaml) and `portal dev` must
 * register the same webhook, so this builder mirrors the template line for
 * line; test/chart/webhook-parity.test.ts renders the chart and compares.
 * Pure: no I/O except `loadChartWebhookValues`.
 */
import { join } from 'node:path';
import { ErrorCode, PortalError } from '../observability/errors.ts';
import { ALWAYS_EXCLUDED_NAMESPACES } from './options.ts';
import { readBoundedFile } from './read-file.ts';
import { parseYamlDocument } from './yaml.ts';

export type WebhookOperation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT' | '*';

/** One entry of `webhooks[].rules` (admissionregistration.k8s.io/v1 RuleWithOperations). */
export interface WebhookRule {
  apiGroups: string[];
  apiVersions: string[];
  /** Plural resource names, optionally `resource/subresource`. */
  resources: string[];
  operations: WebhookOperation[];
  /** @default "*" */
  scope?: 'Namespaced' | 'Cluster' | '*';
}

/** The chart's `webhook:` values (charts/portal/values.yaml documents each key). */
export interface WebhookValues {
  /** @default "validate.portal.dev" */
  name: string;
  /** @default "/validate" */
  path: string;
  /** @default "Fail" */
  failurePolicy: 'Fail' | 'Ignore';
  /** @default "None" */
  sideEffects: 'None' | 'NoneOnDryRun';
  /** @default 5 */
  timeoutSeconds: number;
  /** @default ["v1"] */
  admissionReviewVersions: string[];
  /** @default "Equivalent" */
  matchPolicy: 'Exact' | 'Equivalent';
  /** Namespaces excluded in addition to the always-excluded ones. */
  excludedNamespaces: string[];
  rules: WebhookRule[];
  /** The second webhook, for Portal's own kinds (adr/0011). @default DEFAULT_PORTAL_KINDS_WEBHOOK */
  portalKinds?: PortalKindsWebhookValues;
}

/** The chart's `webhook.portalKinds:` values. */
export interface PortalKindsWebhookValues {
  /** @default true */
  enabled: boolean;
  /** @default "validate-kinds.portal.dev" */
  name: string;
}

export const DEFAULT_PORTAL_KINDS_WEBHOOK: Readonly<PortalKindsWebhookValues> = Object.freeze({ enabled: true, name: 'validate-kinds.portal.dev' });

/** Where every replica serves the webhook for Portal's own kinds (src/admission/portal-kinds.ts). */
export const PORTAL_KINDS_WEBHOOK_PATH = '/validate-portal-kinds';

export type WebhookClientConfig =
  | { url: string }
  | { service: { name: string; namespace: string; port: number; path: string } };

export interface BuildWebhookOptions {
  /** metadata.name of the ValidatingWebhookConfiguration. */
  name: string;
  /** Portal's own namespace: always excluded (self-lockout protection). */
  namespace: string;
  /** Base64 of the PEM CA that signed the serving certificate. */
  caBundle: string;
  clientConfig: WebhookClientConfig;
  values: WebhookValues;
  /**
   * The plural resources of Portal's own kinds that the second webhook is
   * sent (src/policy/portal-kinds.ts `portalKindResources()`; the chart's
   * template lists the same).
   */
  portalKindResources: readonly string[];
}


/**
 * Resources that must never be sent to Portal (docs/design.md §3): intercepting
 * them could stop leader election, event recording, node heartbeats,
 * authentication, or the repair of Portal itself. Same list as the chart's
 * `portal.forbiddenWebhookResources`.
 */
export const FORBIDDEN_WEBHOOK_RESOURCES: readonly string[] = [
  'leases',
  'events',
  'nodes',
  'tokenreviews',
  'subjectaccessreviews',
  'selfsubjectaccessreviews',
  'localsubjectaccessreviews',
  'portalrules',
  'portalclusterrules',
  'portalexceptions',
  'validatingwebhookconfigurations',
  'mutatingwebhookconfigurations',
];

/** Throws PortalError(ConfigInvalid) listing every rule that could lock the cluster out. */
export function checkWebhookRules(rules: readonly WebhookRule[]): void {
  const problems: string[] = [];
  for (const rule of rules) {
    for (const resource of rule.resources) {
      const base = resource.split('/')[0] ?? resource;
      if (base === '*' || FORBIDDEN_WEBHOOK_RESOURCES.includes(base)) {
        problems.push(`"${resource}" must never be sent to Portal (self-lockout protection)`);
      }
    }
    if (rule.apiGroups.includes('*')) problems.push('apiGroups "*" would match Leases, Events and Portal\'s own resources');
    if (rule.apiGroups.includes('portal.dev')) problems.push("Portal's own resources (portal.dev) must never be sent to Portal");
  }
  if (problems.length > 0) {
    throw new PortalError(ErrorCode.ConfigInvalid, `webhook.rules: ${problems.join('; ')}`);
  }
}

/** The webhook configuration object exactly as the chart renders it (minus Helm's labels). */
export function buildValidatingWebhookConfiguration(opts: BuildWebhookOptions): Record<string, unknown> {
  const { values } = opts;
  checkWebhookRules(values.rules);
  const excluded = [...new Set([...ALWAYS_EXCLUDED_NAMESPACES, opts.namespace, ...values.excludedNamespaces])];
  const clientConfig: Record<string, unknown> = {};
  // The chart omits caBundle when cert-manager's cainjector fills it in.
  if (opts.caBundle !== '') clientConfig['caBundle'] = opts.caBundle;
  if ('url' in opts.clientConfig) clientConfig['url'] = opts.clientConfig.url;
  else clientConfig['service'] = { ...opts.clientConfig.service };
  const kinds = values.portalKinds ?? DEFAULT_PORTAL_KINDS_WEBHOOK;
  const kindsClientConfig: Record<string, unknown> = { ...clientConfig };
  if ('url' in opts.clientConfig) {
    const url = new URL(opts.clientConfig.url);
    url.pathname = PORTAL_KINDS_WEBHOOK_PATH;
    kindsClientConfig['url'] = url.toString();
  } else kindsClientConfig['service'] = { ...opts.clientConfig.service, path: PORTAL_KINDS_WEBHOOK_PATH };
  // Portal's own kinds (adr/0011): refused at apply when they would not compile. failurePolicy
  // Ignore on this entry only, so that a Portal that is down never stops anyone fixing or
  // deleting a rule; no namespaceSelector, so rules in Portal's own namespace are checked too.
  const portalKindsWebhook = {
    name: kinds.name,
    admissionReviewVersions: [...values.admissionReviewVersions],
    sideEffects: 'None',
    failurePolicy: 'Ignore',
    timeoutSeconds: values.timeoutSeconds,
    matchPolicy: 'Equivalent',
    clientConfig: kindsClientConfig,
    rules: [{ apiGroups: ['portal.dev'], apiVersions: ['*'], resources: [...opts.portalKindResources], operations: ['CREATE', 'UPDATE'], scope: '*' }],
  };
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name: opts.name },
    webhooks: [
      {
        name: values.name,
        admissionReviewVersions: [...values.admissionReviewVersions],
        sideEffects: values.sideEffects,
        failurePolicy: values.failurePolicy,
        timeoutSeconds: values.timeoutSeconds,
        matchPolicy: values.matchPolicy,
        clientConfig,
        namespaceSelector: {
          matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: excluded }],
        },
        rules: values.rules.map((r) => ({
          apiGroups: [...r.apiGroups],
          apiVersions: [...r.apiVersions],
          resources: [...r.resources],
          operations: [...r.operations],
          scope: r.scope ?? '*',
        })),
      },
      ...(kinds.enabled ? [portalKindsWebhook] : []),
    ],
  };
}

/** Reads `webhook:` from `<chartDir>/values.yaml` (the chart's defaults). */
export async function loadChartWebhookValues(chartDir: string): Promise<WebhookValues> {
  const file = join(chartDir, 'values.yaml');
  // A chart's values.yaml is a few KiB; 1 MiB as for a rule file.
  const read = await readBoundedFile(file, { maxBytes: 1024 * 1024, what: 'chart values file' });
  if (!read.ok) throw new PortalError(ErrorCode.ConfigInvalid, `cannot read chart values ${file}: ${read.message}`);
  const parsed = parseYamlDocument(read.bytes.toString('utf8'));
  if (!parsed.ok) throw new PortalError(ErrorCode.ConfigInvalid, `${file}: ${parsed.message}`);
  const doc = parsed.value;
  const webhook = (doc as { webhook?: unknown } | null)?.webhook;
  if (typeof webhook !== 'object' || webhook === null || !Array.isArray((webhook as { rules?: unknown }).rules)) {
    throw new PortalError(ErrorCode.ConfigInvalid, `${file}: no "webhook" section with "rules"`);
  }
  return webhook as WebhookValues;
}
