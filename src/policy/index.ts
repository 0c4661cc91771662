/** The public API of the rule engine (no I/O, no Kubernetes client). */
export * from './types.ts';
export { RuleSet, type RuleSetChange } from './rule-set.ts';
export { ruleKey, type PreparedMatch, type RuleState } from './rule-entry.ts';
export type { ExceptionState } from './exception-store.ts';
export { ChangeFeed, type Replicated } from './replicated.ts';
export { exceptionCovers, type CompiledException, type Coverage, type CoverageContext, type ExceptionOptions } from './exceptions.ts';
export { exceptionKey, type RuleRef } from './match-keys.ts';
export { validateExceptionShape, exceptionShapeProblems, lifetimeProblem, parseRfc3339, type ExceptionValidation } from './exception-shape.ts';
export { exemptVerdicts } from './exemption.ts';
export { EXCEPTION_CRD_OPENAPI_SCHEMA } from './exception-crd-schema.generated.ts';
export { evaluate, decideAdmission } from './evaluator.ts';
export { violationMessage, abandonedMessage, MESSAGE_VIOLATIONS, type EvaluationBudget, type RuleResultSink } from './verdicts.ts';
export { decide, MAX_WARNING_LENGTH, type AdmissionDecision, type Exempted } from './decision.ts';
export { validateRule, validateRuleShape, matchesPods, type RuleValidation } from './validate-rule.ts';
export { compileSchema, SchemaCompiler, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH, type CompileResult, type Validator } from './compiler.ts';
export { MAX_EXPANDED_SCHEMA, MAX_UNIQUE_ITEMS, schemaExpandedSize } from './schema-bounds.ts';
export { MAX_ELEMENTS, MAX_OBJECT_BYTES, MAX_SCHEMA_COST, schemaCost, type SchemaCost } from './schema-cost.ts';
export { compileLinear, newRegexClock, withDeadline, RegexLimitError, MAX_PROGRAM_SIZE, MAX_TEST_COST, type LinearRegExp } from './re2.ts';
export { selectorMatches, selectorProblems } from './label-selector.ts';
export { namespaceGlobMatches } from './namespace-glob.ts';
export { POD_TEMPLATE_KINDS, podTemplateKind, templatePod, type PodTemplateKind } from './pod-templates.ts';
export { RULE_CRD_OPENAPI_SCHEMA } from './crd-schema.generated.ts';
export {
  POD_SECURITY_VERSION_LABEL,
  MIN_VERSION_KEYWORD,
  parsePodSecurityVersion,
  podSecurityVersionProblem,
  resolvePodSecurityVersion,
} from './pod-security-version.ts';
export { isCostOverrun, type CelExpressionCost } from './cel-rule.ts';
export { PER_CALL_COST_LIMIT } from './cel/index.ts';
export { hasCandidates } from './candidates.ts';
