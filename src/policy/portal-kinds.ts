/**
 * Portal's own kinds, as the webhook for them checks them on CREATE and UPDATE
 * (issue 15 item 2; adr/0011): the same validation the RuleSet and `portal
 * test` use, so what is refused at apply is exactly what would not compile.
 *
 * A new kind plugs in with one entry here (its plural resource, for the
 * webhook configuration, and its validation); the chart's webhook template
 * lists the same resources (test/chart/webhook-parity.test.ts keeps them in
 * step).
 */
import type { ExceptionOptions } from './exceptions.ts';
import { validateExceptionShape } from './exception-shape.ts';
import { builtinSchemas, type KindSchemaSource } from './kind-schemas/catalogue.ts';
import { validateRule } from './validate-rule.ts';

/** `warnings`: admitted, with what kubectl should show (an Audit rule's type-check problems). */
export type KindValidation = { ok: true; warnings?: string[] } | { ok: false; problems: string[] };

/** The review an object came in, for a check that runs elsewhere (a thread) and is sent the review's text rather than the object. */
export interface KindReview {
  /** The AdmissionReview's text, as received. */
  body: string;
  kind: string;
  namespace: string;
  name: string;
  /** The remote address it came from: a check queued per namespace is queued per sender too (evaluation/flows.ts). */
  peer?: string | undefined;
}

/**
 * A rule's check run elsewhere (src/evaluation/rule-check.ts: on a thread,
 * queued per namespace). Rejects with QueueFull when it cannot be run now
 * (overload: the caller says to retry).
 */
export type RuleCheck = (obj: unknown, review: KindReview) => Promise<KindValidation>;

export interface PortalKind {
  /** Plural resource name (what a webhook rule names). */
  readonly resource: string;
  /**
   * Every problem at once, each naming the field and saying what to change.
   * Given the review, a kind whose check runs on a thread answers later.
   */
  validate(obj: unknown, review?: KindReview): KindValidation | Promise<KindValidation>;
}

export const PORTAL_KINDS: Readonly<Record<string, PortalKind>> = portalKinds();

/**
 * The registry as a replica serves it: a PortalException is also refused
 * when it outlives `--max-exception-lifetime` (judged now, from its
 * creationTimestamp, which the API server sets before admission), the same
 * judgement that would otherwise leave it in force as `LifetimeExceeded`,
 * and (given `exceptionNamespaces`) when its match names namespaces it may
 * not exempt in, which would otherwise hold it `Invalid`. Rules are
 * type-checked against `schemas` (the cluster's CRDs beside the built-in
 * catalogue, on a replica in cluster mode). With `check`, a rule that
 * comes in a review is checked by it (a replica: on a thread, off the main
 * thread; issue 31 item 5); a PortalException's check is cheap and stays
 * here.
 */
export function portalKinds(exceptions: ExceptionOptions = {}, schemas: KindSchemaSource = builtinSchemas(), check?: RuleCheck): Readonly<Record<string, PortalKind>> {
  const { maxLifetimeMs, exceptionNamespaces } = exceptions;
  const rule = (obj: unknown, review?: KindReview): KindValidation | Promise<KindValidation> => (check && review ? check(obj, review) : validateRuleKind(obj, schemas));
  return Object.freeze({
    PortalRule: { resource: 'portalrules', validate: rule },
    PortalClusterRule: { resource: 'portalclusterrules', validate: rule },
    PortalException: {
      resource: 'portalexceptions',
      validate: (obj: unknown): KindValidation => {
        const r = validateExceptionShape(obj, { maxLifetimeMs, exceptionNamespaces });
        return r.ok ? { ok: true } : r;
      },
    },
  });
}

/** A PortalRule's or PortalClusterRule's check, as the webhook answers it (validateRule without the object it returns). */
export function validateRuleKind(obj: unknown, schemas: KindSchemaSource): KindValidation {
  const r = validateRule(obj, schemas);
  if (!r.ok) return r;
  return r.warnings ? { ok: true, warnings: r.warnings } : { ok: true };
}

/** The resources of {@link PORTAL_KINDS}, in a stable order. */
export function portalKindResources(): string[] {
  return Object.values(PORTAL_KINDS).map((k) => k.resource);
}

/**
 * The refusal in kube-apiserver's words for an invalid object (as for a
 * ValidatingAdmissionPolicy): `PortalClusterRule "x" is invalid: <problem>`,
 * or a bracketed list when there are several.
 */
export function invalidMessage(kind: string, name: string, problems: readonly string[]): string {
  const list = problems.length === 1 ? problems[0] : `[${problems.join(', ')}]`;
  return `${kind} "${name}" is invalid: ${list}`;
}
