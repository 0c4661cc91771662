/**
 * The validating admission chain of the embedded API server, behaving like
 * kube-apiserver's `ValidatingAdmissionWebhook` plugin:
 *
 * - every webhook of every ValidatingWebhookConfiguration (configurations
 *   sorted by name) whose rules, namespaceSelector and objectSelector match is
 *   called, all in parallel, over HTTPS verified against its caBundle;
 * - a denial answers the client with `admission webhook "<name>" denied the
 *   request: <message>` and the webhook's status code (at least 400);
 * - a call failure (connection, TLS, timeout, non-2xx, undecodable or invalid
 *   response) rejects with 500 `Internal error occurred: failed calling webhook
 *   "<name>": <reason>` under failurePolicy Fail and is skipped under Ignore;
 * - warnings of every webhook are returned for `Warning` headers;
 * - auditAnnotations of every webhook that answered are returned for the
 *   audit log, each key prefixed with `<webhook name>/` (the dispatcher's
 *   `AddAnnotation(h.Name + "/" + k, v)`), also when the request is denied.
 *
 * Differences from upstream, on purpose: when several webhooks reject, the
 * first in configuration order wins (upstream: the first to finish), so the
 * answer is deterministic; matchPolicy Equivalent is treated as Exact because
 * the embedded server serves one version per resource; matchConditions (CEL)
 * are not evaluated, so such a webhook is called for every rule match (more
 * calls, never fewer: fail closed).
 */
import { randomUUID } from 'node:crypto';
import https from 'node:https';
import type { Logger } from 'pino';
import type { AdmissionAttributes, AdmissionContext, AdmissionHook, AdmissionOutcome } from './apiserver/admission-hook.ts';
import { ADMISSION_REGISTRATION_GROUP, collectWebhooks, type ValidatingWebhook } from './webhook/config.ts';
import { matchesAnyRule, matchesNamespaceSelector, matchesObjectSelector } from './webhook/match.ts';
import { postAdmissionReview, WebhookCallError, type WebhookTarget } from './webhook/call.ts';
import { buildAdmissionReview, pickReviewVersion, rejectionStatus, verifyAdmissionResponse } from './webhook/review.ts';
import { LogKey } from 'portal/dev-api';

export interface WebhookAdmissionOptions {
  /** Where call failures and Ignore-skips are logged. @default silent */
  logger?: Logger;
  /** Used when a webhook has no `timeoutSeconds`. @default 10 (admissionregistration/v1 default) */
  defaultTimeoutSeconds?: number;
  /**
   * Where a service-referenced webhook is reached: `host:port` for the service
   * `name.namespace` on `port`. There is no cluster DNS in dev; the
   * certificate is still verified against `<name>.<namespace>.svc`. Without
   * it the DNS name itself is dialled.
   */
  resolveService?: (namespace: string, name: string, port: number) => string | Promise<string>;
}

export interface WebhookAdmission extends AdmissionHook {
  /** Closes idle keep-alive connections to webhooks. Idempotent. */
  close(): void;
}

type Status = { code: number; reason: string; message: string };
type CallResult = { kind: 'allow'; warnings: string[]; annotations?: Record<string, string> } | { kind: 'reject'; warnings: string[]; status: Status; annotations?: Record<string, string> };

/** Resources kube-apiserver never sends to webhooks, so a broken configuration can always be fixed. */
const NEVER_ADMITTED = new Set([
  'validatingwebhookconfigurations',
  'mutatingwebhookconfigurations',
  'validatingadmissionpolicies',
  'validatingadmissionpolicybindings',
]);

/** kube's `apierrors.NewInternalError` wording. */
function internalError(message: string): Status {
  return { code: 500, reason: 'InternalError', message: `Internal error occurred: ${message}` };
}

/** Where a webhook is called: its URL, or its Service's name (and, with `resolveService`, the address that stands for it). */
async function webhookTarget(hook: ValidatingWebhook, resolveService: WebhookAdmissionOptions['resolveService']): Promise<WebhookTarget> {
  const { url, service } = hook.clientConfig;
  if (url !== undefined) return { url: new URL(url) };
  if (!service) throw new WebhookCallError('webhook has neither clientConfig.url nor clientConfig.service');
  const path = service.path.startsWith('/') ? service.path : `/${service.path}`;
  const u = new URL(`https://${service.name}.${service.namespace}.svc:${service.port}${path}`);
  if (!resolveService) return { url: u };
  const hostPort = await resolveService(service.namespace, service.name, service.port);
  const i = hostPort.lastIndexOf(':');
  return { url: u, connect: { host: hostPort.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(hostPort.slice(i + 1)) } };
}

export function createWebhookAdmission(opts: WebhookAdmissionOptions = {}): WebhookAdmission {
  const defaultTimeoutSeconds = opts.defaultTimeoutSeconds ?? 10;
  const log = opts.logger?.child({ [LogKey.component]: 'webhook-admission' });
  // Keep-alive like kube-apiserver's cached clients; idle sockets are dropped
  // after 4 s, under Node's default 5 s server keep-alive, so we do not write
  // into a socket the webhook is closing.
  let agent: https.Agent | undefined;
  const getAgent = (): https.Agent => (agent ??= new https.Agent({ keepAlive: true, timeout: 4000, scheduling: 'lifo' }));

  async function call(hook: ValidatingWebhook, a: AdmissionAttributes, signal: AbortSignal): Promise<CallResult> {
    let warnings: string[] = [];
    try {
      const version = pickReviewVersion(hook.admissionReviewVersions);
      if (!version) throw new WebhookCallError('webhook does not accept known AdmissionReview versions');
      const t = await webhookTarget(hook, opts.resolveService);
      // `?timeout=` is the whole-second deadline the webhook has; kube rounds up.
      t.url.searchParams.set('timeout', `${hook.timeoutSeconds}s`);
      const uid = randomUUID();
      const body = JSON.stringify(buildAdmissionReview(a, version, uid));
      const ca = hook.clientConfig.caBundle ? Buffer.from(hook.clientConfig.caBundle, 'base64').toString('utf8') : undefined;
      const decoded = await postAdmissionReview({ target: t, ca, body, timeoutMs: hook.timeoutSeconds * 1000, signal, agent: getAgent() });
      let result;
      try {
        result = verifyAdmissionResponse(decoded, version, uid);
      } catch (err) {
        throw new WebhookCallError(`received invalid webhook response: ${(err as Error).message}`);
      }
      warnings = result.warnings;
      const annotations = Object.fromEntries(Object.entries(result.auditAnnotations).map(([k, v]) => [`${hook.name}/${k}`, v]));
      if (result.allowed) return { kind: 'allow', warnings, annotations };
      return { kind: 'reject', warnings, status: rejectionStatus(hook.name, result.status), annotations };
    } catch (err) {
      const reason = err instanceof WebhookCallError ? err.message : `failed to call webhook: ${(err as Error).message}`;
      const message = `failed calling webhook "${hook.name}": ${reason}`;
      if (hook.failurePolicy === 'Ignore') {
        log?.warn({ [LogKey.webhook]: hook.name, [LogKey.reason]: reason }, 'failed calling webhook, failing open');
        return { kind: 'allow', warnings };
      }
      log?.warn({ [LogKey.webhook]: hook.name, [LogKey.reason]: reason }, 'failed calling webhook, failing closed');
      return { kind: 'reject', warnings, status: internalError(message) };
    }
  }

  return {
    async admit(a: AdmissionAttributes, ctx: AdmissionContext): Promise<AdmissionOutcome> {
      if (a.resource.group === ADMISSION_REGISTRATION_GROUP && NEVER_ADMITTED.has(a.resource.resource)) {
        return { allowed: true, warnings: [] };
      }
      const selected: ValidatingWebhook[] = [];
      for (const hook of collectWebhooks(ctx.validatingWebhookConfigurations(), defaultTimeoutSeconds)) {
        if (!matchesAnyRule(hook.rules, a)) continue;
        try {
          const ns = matchesNamespaceSelector(hook, a, (name) => ctx.namespaceLabels(name));
          if ('error' in ns) return { allowed: false, warnings: [], status: ns.error };
          if (!ns.match || !matchesObjectSelector(hook, a)) continue;
        } catch (err) {
          return { allowed: false, warnings: [], status: internalError((err as Error).message) };
        }
        selected.push(hook);
      }
      if (selected.length === 0) return { allowed: true, warnings: [] };
      const results = await Promise.all(selected.map((hook) => call(hook, a, ctx.signal)));
      const warnings = results.flatMap((r) => r.warnings);
      const annotations = Object.assign({}, ...results.map((r) => r.annotations ?? {})) as Record<string, string>;
      const audit = Object.keys(annotations).length > 0 ? { auditAnnotations: annotations } : {};
      const rejected = results.find((r) => r.kind === 'reject');
      return rejected?.kind === 'reject' ? { allowed: false, warnings, status: rejected.status, ...audit } : { allowed: true, warnings, ...audit };
    },
    close(): void {
      agent?.destroy();
      agent = undefined;
    },
  };
}
