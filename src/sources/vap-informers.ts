/**
 * ValidatingAdmissionPolicies, their bindings and their params, read through
 * ResilientInformers into a VapSet, for the audit on every replica (docs/design.md
 * §8): the same evaluation as `portal test` and the embedded API server, over
 * the informer caches.
 *
 * Params: when a policy names a paramKind, the kind is resolved through
 * discovery (`/api/v1` or `/apis/G/V`) and an informer for it is started;
 * until it has synced the source is not ready, so the audit never reports a
 * verdict computed without the params. A paramKind the API server does not
 * serve is reported by the evaluation (`paramKind kind ... not known`), as the
 * API server reports it.
 */
import type { Logger } from 'pino';
import type { KubeObject } from '../policy/types.ts';
import {
  ParamStore,
  paramKindKey,
  VapSet,
  VAP_API_VERSION,
  VAP_BINDING_KIND,
  VAP_GROUP,
  VAP_KIND,
  VAP_VERSION,
  type BindingEvaluation,
  type ParamKind,
  type PolicyCompileError,
  type ValidatingAdmissionPolicy,
  type ValidatingAdmissionPolicyBinding,
  type VapAttributes,
} from '../policy/vap/index.ts';
import type { KubeClient } from '../kube/client.ts';
import { ResilientInformer, type InformerConfig, type InformerEvent } from '../kube/informer.ts';
import { kubeGetJson } from '../kube/raw-get.ts';
import { LogKey } from '../observability/log-keys.ts';
import { toError } from '../observability/errors.ts';

export type VapInformerSourceOptions = Pick<InformerConfig, 'staleAfterMs' | 'backoff' | 'watchTimeoutSeconds'>;

type ParamState =
  | { kind: 'resolving'; settled: Promise<void> }
  | { kind: 'informer'; informer: ResilientInformer<KubeObject>; namespaced: boolean; done: Promise<void> }
  | { kind: 'unknown'; error: string };

interface ApiResourceList {
  resources?: { name: string; kind: string; namespaced: boolean }[];
}

export class VapInformerSource {
  readonly set = new VapSet();
  /** Param objects of every resolved paramKind (fed by the param informers; mirrored into evaluation workers). */
  readonly params = new ParamStore();
  readonly policies: ResilientInformer<KubeObject>;
  readonly bindings: ResilientInformer<KubeObject>;
  readonly #client: KubeClient;
  readonly #logger: Logger;
  readonly #options: VapInformerSourceOptions;
  readonly #params = new Map<string, ParamState>();
  readonly #compileErrors = new Map<string, PolicyCompileError[]>();
  readonly #compileListeners: ((policy: ValidatingAdmissionPolicy, errors: readonly PolicyCompileError[]) => void)[] = [];
  #signal: AbortSignal | undefined;
  /** Bumped on every change of policies, bindings or params (for the audit's re-evaluation). */
  revision = 0;

  constructor(client: KubeClient, logger: Logger, options: VapInformerSourceOptions = {}) {
    this.#client = client;
    this.#logger = logger.child({ [LogKey.subcomponent]: 'vap-source' });
    this.#options = options;
    const base = `/apis/${VAP_GROUP}/${VAP_VERSION}`;
    this.policies = new ResilientInformer(
      client,
      { name: 'validatingadmissionpolicies', path: `${base}/validatingadmissionpolicies`, apiVersion: VAP_API_VERSION, kind: VAP_KIND, ...options },
      logger,
    );
    this.bindings = new ResilientInformer(
      client,
      { name: 'validatingadmissionpolicybindings', path: `${base}/validatingadmissionpolicybindings`, apiVersion: VAP_API_VERSION, kind: VAP_BINDING_KIND, ...options },
      logger,
    );
    this.policies.onEvent((e) => this.#onPolicy(e));
    this.bindings.onEvent((e) => this.#onBinding(e));
  }

  #onPolicy(e: InformerEvent<KubeObject>): void {
    const p = e.object as unknown as ValidatingAdmissionPolicy;
    const name = p.metadata.name;
    this.revision++;
    if (e.type === 'delete') {
      this.set.deletePolicy(name);
      this.#compileErrors.delete(name);
      return;
    }
    const errors = this.set.upsertPolicy(p);
    if (errors.length > 0) {
      this.#compileErrors.set(name, errors);
      for (const l of this.#compileListeners) l(p, errors);
    } else this.#compileErrors.delete(name);
    if (p.spec.paramKind) this.#ensureParams(p.spec.paramKind);
  }

  #onBinding(e: InformerEvent<KubeObject>): void {
    const b = e.object as unknown as ValidatingAdmissionPolicyBinding;
    this.revision++;
    if (e.type === 'delete') this.set.deleteBinding(b.metadata.name);
    else this.set.upsertBinding(b);
  }

  #ensureParams(kind: ParamKind): void {
    const key = paramKindKey(kind);
    if (this.#params.has(key) || !this.#signal) return;
    const signal = this.#signal;
    const settled = this.#resolve(kind, signal).then(
      (state) => {
        this.#params.set(key, state);
        if (state.kind === 'unknown') this.params.setScope(key, { ok: false, error: state.error });
        this.revision++;
      },
      (err: unknown) => {
        // Discovery failed (not "not served"): try again on the next policy event.
        this.#params.delete(key);
        if (!signal.aborted) this.#logger.warn({ [LogKey.error]: toError(err), [LogKey.paramKind]: key }, 'discovery for a paramKind failed');
      },
    );
    this.#params.set(key, { kind: 'resolving', settled });
  }

  async #resolve(kind: ParamKind, signal: AbortSignal): Promise<ParamState> {
    const path = kind.apiVersion.includes('/') ? `/apis/${kind.apiVersion}` : `/api/${kind.apiVersion}`;
    let list: ApiResourceList;
    try {
      list = await kubeGetJson<ApiResourceList>(this.#client, path, signal);
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return { kind: 'unknown', error: `paramKind kind \`${kind.apiVersion}, Kind=${kind.kind}\` not known` };
      throw err;
    }
    const r = (list.resources ?? []).find((x) => x.kind === kind.kind && !x.name.includes('/'));
    if (!r) return { kind: 'unknown', error: `paramKind kind \`${kind.apiVersion}, Kind=${kind.kind}\` not known` };
    const informer = new ResilientInformer<KubeObject>(
      this.#client,
      { name: `params:${r.name}`, path: `${path}/${r.name}`, apiVersion: kind.apiVersion, kind: kind.kind, ...this.#options },
      this.#logger,
    );
    const key = paramKindKey(kind);
    this.params.setScope(key, { ok: true, namespaced: r.namespaced });
    informer.onEvent((e) => {
      if (e.type === 'delete') this.params.delete(key, e.object.metadata?.namespace ?? '', e.object.metadata?.name ?? '');
      else this.params.put(key, e.object);
      this.revision++;
    });
    const done = informer.start(signal);
    return { kind: 'informer', informer, namespaced: r.namespaced, done };
  }

  /** Every bound policy's result for an existing object (operation AUDIT). */
  evaluate(a: VapAttributes, namespaceObject: KubeObject | null): BindingEvaluation[] {
    return this.set.evaluate(a, { namespaceObject, params: this.params });
  }

  /** Called with a policy (each version of it) whose expressions do not compile here. */
  onCompileErrors(listener: (policy: ValidatingAdmissionPolicy, errors: readonly PolicyCompileError[]) => void): void {
    this.#compileListeners.push(listener);
  }

  /** Policies whose expressions do not compile (for Events on the policy and a metric). */
  compileErrors(): ReadonlyMap<string, PolicyCompileError[]> {
    return this.#compileErrors;
  }

  async start(signal: AbortSignal): Promise<void> {
    this.#signal = signal;
    // Listed at last: a new revision, so the audit reads what exists now even when the lists were empty
    // (no event): a PortalException naming no VAP is then known to name nothing (RuleNotFound).
    Promise.all([this.policies.waitForSync(signal), this.bindings.waitForSync(signal)]).then(() => void this.revision++, () => {});
    await Promise.all([this.policies.start(signal), this.bindings.start(signal)]);
    await Promise.all([...this.#params.values()].map((s) => (s.kind === 'informer' ? s.done : undefined)));
  }

  async waitForSync(signal?: AbortSignal): Promise<void> {
    await Promise.all([this.policies.waitForSync(signal), this.bindings.waitForSync(signal)]);
    // Param kinds are discovered from the policies: make sure every cached
    // policy's kind is being resolved (its event may not have been handled yet), then wait for them too.
    for (const o of this.policies.list()) {
      const kind = (o as unknown as ValidatingAdmissionPolicy).spec?.paramKind;
      if (kind) this.#ensureParams(kind);
    }
    for (;;) {
      const states = [...this.#params.values()];
      await Promise.all(states.map((s) => (s.kind === 'resolving' ? s.settled : s.kind === 'informer' ? s.informer.waitForSync(signal) : undefined)));
      if ([...this.#params.values()].every((s) => s.kind !== 'resolving' && (s.kind !== 'informer' || s.informer.hasSynced()))) return;
    }
  }

  /** For /debug/vars: what is loaded, and every policy whose expressions do not compile here. */
  debugVars(): Record<string, unknown> {
    return {
      ...this.set.size,
      synced: this.policies.hasSynced() && this.bindings.hasSynced(),
      paramKinds: Object.fromEntries([...this.#params].map(([k, s]) => [k, s.kind === 'informer' ? (s.informer.hasSynced() ? 'synced' : 'syncing') : s.kind === 'unknown' ? s.error : 'resolving'])),
      compileErrors: Object.fromEntries([...this.#compileErrors].map(([name, errors]) => [name, errors.map((e) => `${e.field}: ${e.error}`)])),
      // Estimated worst-case CEL cost per expression (against the 1,000,000 per-call limit), as for PortalRules under `cel`.
      expressionCosts: this.set.expressionCosts(),
    };
  }

  /** Policies, bindings and every param informer synced and fresh. */
  ready(): boolean {
    if (!this.policies.ready() || !this.bindings.ready()) return false;
    for (const s of this.#params.values()) {
      if (s.kind === 'resolving') return false;
      if (s.kind === 'informer' && !s.informer.ready()) return false;
    }
    return true;
  }
}
