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
import { validateExceptionShape, type ExceptionOptions } from './exceptions.ts';
import { validateRule } from './validate-rule.ts';

export type KindValidation = { ok: true } | { ok: false; problems: string[] };

export interface PortalKind {
  /** Plural resource name (what a webhook rule names). */
  readonly resource: string;
  /** Every problem at once, each naming the field and saying what to change. */
  validate(obj: unknown): KindValidation;
}

export const PORTAL_KINDS: Readonly<Record<string, PortalKind>> = portalKinds();

/**
 * The registry as a replica serves it: a PortalException is also refused
 * when it outlives `--max-exception-lifetime` (judged now, from its
 * creationTimestamp, which the API server sets before admission), the same
 * judgement that would otherwise leave it in force as `LifetimeExceeded`,
 * and (given `exceptionNamespaces`) when its match names namespaces it may
 * not exempt in, which would otherwise hold it `Invalid`.
 */
export function portalKinds(exceptions: ExceptionOptions = {}): Readonly<Record<string, PortalKind>> {
  const { maxLifetimeMs, exceptionNamespaces } = exceptions;
  return Object.freeze({
    PortalRule: { resource: 'portalrules', validate: validateRule },
    PortalClusterRule: { resource: 'portalclusterrules', validate: validateRule },
    PortalException: {
      resource: 'portalexceptions',
      validate: (obj: unknown): KindValidation => {
        const r = validateExceptionShape(obj, { maxLifetimeMs, exceptionNamespaces });
        return r.ok ? { ok: true } : r;
      },
    },
  });
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
