/**
 * The ValidatingWebhookConfiguration Portal is served through (`serve
 * --webhook-configuration NAME`; the chart passes its own), watched on every
 * replica so each rule's Covered condition can say whether the API server
 * sends Portal the rule's kinds and operations (src/audit/coverage.ts).
 *
 * One object: a list+watch with a `metadata.name` field selector, which the
 * API server authorizes as that name (the chart grants get/list/watch on it
 * alone). Never gates readiness: admission does not depend on it.
 */
import type { Logger } from 'pino';
import type { KubeObject } from '../types/kubernetes.ts';
import type { KubeClient } from './client.ts';
import { ResilientInformer } from './informer.ts';

/** What the coverage check reads of the configuration (admissionregistration.k8s.io/v1). */
export interface WebhookConfigurationObject extends KubeObject {
  webhooks?: {
    name?: string;
    clientConfig?: { url?: string; service?: { path?: string } };
    rules?: { apiGroups?: string[]; apiVersions?: string[]; resources?: string[]; operations?: string[]; scope?: string }[];
  }[];
}

/** `undefined`: not known yet (not listed, or not configured); `config: null`: listed and absent. */
export type WebhookConfigurationView = { name: string; config: WebhookConfigurationObject | null; resourceVersion: string } | undefined;

export class WebhookConfigSource {
  readonly name = 'webhook-configuration';
  readonly #informer: ResilientInformer<WebhookConfigurationObject>;
  readonly #configName: string;

  constructor(client: KubeClient, configName: string, logger: Logger) {
    this.#configName = configName;
    this.#informer = new ResilientInformer<WebhookConfigurationObject>(
      client,
      {
        name: 'validatingwebhookconfiguration',
        path: '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations',
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingWebhookConfiguration',
        fieldSelector: `metadata.name=${configName}`,
      },
      logger,
    );
  }

  start(signal: AbortSignal): Promise<void> {
    return this.#informer.start(signal);
  }

  view(): WebhookConfigurationView {
    if (!this.#informer.hasSynced()) return undefined;
    const config = this.#informer.get(this.#configName) ?? null;
    return { name: this.#configName, config, resourceVersion: config?.metadata?.resourceVersion ?? '' };
  }

  stats(): Record<string, unknown> {
    return { name: this.#configName, synced: this.#informer.hasSynced(), failure: this.#informer.failure()?.message ?? null };
  }
}
