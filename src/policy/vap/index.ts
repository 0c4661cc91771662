/** ValidatingAdmissionPolicy + Binding semantics (pure: no I/O). */
export * from './types.ts';
export { validatePolicy, validateBinding, formatFieldError, MAX_MATCH_CONDITIONS, type FieldError, type VapValidation, type ExpressionCheck, type ExpressionKind } from './validate.ts';
export { matchResources, ruleMatches, defaultEquivalents, isNamespaceRequest, type MatchResult, type EquivalentResources } from './match.ts';
export { evaluatePolicies, plan, type EvaluateOptions } from './evaluate.ts';
export { COST_BUDGET_MESSAGE } from './run.ts';
export { admissionOutcome, verdictOf, reasonToCode, denialMessage, warningMessage, VALIDATION_FAILURE_ANNOTATION, type VapAdmissionOutcome, type VapDenial } from './outcome.ts';
export { PER_CALL_COST_LIMIT, RUNTIME_COST_BUDGET, type ExpressionEngine, type Activation, type CompileEnv, type CostBudget, type RunOutcome } from './engine.ts';
export { celEngine } from './cel-adapter.ts';
export { compilePolicy, compileErrors, expressionCosts, type CompiledPolicy, type PolicyCompileError, type BindingEvaluation, type ValidationFailure, type ExpressionCost } from './compiled.ts';
export { VapSet, type VapSetChange } from './vap-set.ts';
export { ParamStore, paramKindKey, type ParamChange, type ParamScope } from './param-store.ts';
export { vapVerdicts, SEVERITY_ANNOTATION, CATEGORY_ANNOTATION } from './verdicts.ts';
export { guessResource } from './resources.ts';
export { parseAuditActions, AUDIT_ACTIONS_ANNOTATION, type AuditActionsParse } from './audit-actions.ts';
