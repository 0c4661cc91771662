/**
 * `portal/dev-api`: everything packages/devcluster (`@portal/devcluster`,
 * ADR 0015) may use of the product, and the only way it reaches it. The root
 * package.json's `exports` map declares this module; the dev cluster depends
 * on `portal` (`file:../..`) and imports `portal/dev-api`, never a path into
 * src/. A new need of the dev cluster is a line here, so what the two share
 * stays visible in one place (test/architecture/imports.test.ts checks it).
 *
 * It sits in its own top layer, beside cli/: it re-exports from any layer
 * below, and nothing in src/ imports it.
 */

// The flag parser both CLIs use.
export { parseArgs, type FlagDef, type ParsedArgs } from '../config/args.ts';

// Leaf helpers.
export { backoffDelay } from '../util/backoff.ts';
export { parseDuration } from '../util/duration.ts';

// Errors and log keys, so the dev cluster's failures and logs read like the product's.
export { ErrorCode, isPortalError, PortalError, toError } from '../observability/errors.ts';
export { LogKey } from '../observability/log-keys.ts';

// The policy engine: rules, label selectors, quantities, ValidatingAdmissionPolicy.
export { RuleSet, type PortalRuleObject } from '../policy/index.ts';
export { requirementsMatch, selectorMatches, selectorRequirements, type LabelRequirement } from '../policy/label-selector.ts';
export { portalKindResources } from '../policy/portal-kinds.ts';
export { quantityValue } from '../policy/quantity.ts';
export type { KubeObject, LabelSelector } from '../policy/types.ts';
export {
  admissionOutcome,
  validateBinding,
  validatePolicy,
  VapSet,
  type FieldError,
  type ParamProvider,
  type ValidatingAdmissionPolicy,
  type ValidatingAdmissionPolicyBinding,
  type VapAttributes,
} from '../policy/vap/index.ts';

// Manifest and chart readers: the rule files and limits `portal serve` uses, the webhook configuration the chart renders.
export { readManifests, type ReadLimits } from '../config/manifests.ts';
export { RULE_FILE_LIMITS } from '../sources/rule-files.ts';
export { policyCompileProblems } from '../sources/vap-files.ts';
export { buildValidatingWebhookConfiguration, loadChartWebhookValues, type WebhookValues } from '../config/webhook-configuration.ts';

// The pieces of the webhook server and the audit the dev cluster runs too.
export { generateCA, generateServingCert } from '../admission/certs.ts';
export { WorkQueue } from '../audit/work-queue.ts';
