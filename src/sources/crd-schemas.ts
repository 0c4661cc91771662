/**
 * The cluster's CustomResourceDefinitions, watched on every replica so that
 * the rules webhook and the rules' TypeChecked condition can check a rule on
 * a custom kind against that kind's structural schema (issue 33 item 1,
 * src/policy/type-check.ts). The chart grants get/list/watch on
 * customresourcedefinitions for it.
 *
 * Never gates readiness: until it has synced (or when RBAC forbids it), a
 * rule on a custom kind is admitted with its check not done, and its status
 * says so (TypeChecked=Unknown, SchemaUnknown).
 */
import type { Logger } from 'pino';
import { CrdSchemaStore } from '../policy/kind-schemas/crd-schemas.ts';
import type { KubeObject } from '../types/kubernetes.ts';
import type { KubeClient } from '../kube/client.ts';
import { ResilientInformer } from '../kube/informer.ts';

/** Only what the schemas are built from is cached: a CRD's other fields (status, descriptions' siblings) stay out of memory. */
function slim<O extends KubeObject>(crd: O): O {
  const spec = (crd as { spec?: { group?: unknown; names?: { kind?: unknown; plural?: unknown }; versions?: unknown } }).spec;
  const versions = Array.isArray(spec?.versions) ? (spec.versions as { name?: unknown; served?: unknown; schema?: unknown }[]) : [];
  return {
    apiVersion: crd.apiVersion,
    kind: crd.kind,
    metadata: { name: crd.metadata?.name, resourceVersion: crd.metadata?.resourceVersion },
    spec: { group: spec?.group, names: { kind: spec?.names?.kind, plural: spec?.names?.plural }, versions: versions.map((v) => ({ name: v.name, served: v.served, schema: v.schema })) },
  } as unknown as O;
}

export class CrdSchemaSource {
  readonly name = 'crd-schemas';
  readonly schemas = new CrdSchemaStore();
  readonly #informer: ResilientInformer;

  constructor(client: KubeClient, logger: Logger) {
    this.#informer = new ResilientInformer(
      client,
      {
        name: 'customresourcedefinitions',
        path: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        transform: slim,
      },
      logger,
    );
    this.#informer.onEvent((e) => {
      const name = e.object.metadata?.name ?? '';
      if (e.type === 'delete') this.schemas.delete(name);
      else this.schemas.set(name, e.object);
    });
  }

  start(signal: AbortSignal): Promise<void> {
    return this.#informer.start(signal);
  }

  stats(): Record<string, unknown> {
    return { synced: this.#informer.hasSynced(), crds: this.schemas.size, failure: this.#informer.failure()?.message ?? null };
  }
}
