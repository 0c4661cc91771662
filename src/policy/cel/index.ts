/**
 * Portal's CEL engine: Kubernetes' CEL (variables, optional types, the
 * Kubernetes libraries, cost limits, RE2 regexes) on cel-js.
 */
export {
  ACTIVATION_VARIABLES,
  MAX_EXPRESSION_LENGTH,
  PER_CALL_COST_LIMIT,
  PER_REQUEST_COST_BUDGET,
  compile,
  evaluate,
  celContext,
  classify,
  failureMessage,
  newBudget,
  type Activation,
  type Budget,
  type CompileError,
  type CompileOptions,
  type CompileResult,
  type EvalError,
  type EvalResult,
  type EvalValue,
  type Program,
  type ResultType,
  type SourcePosition,
} from './engine.ts';
export {
  MAX_MATCH_CONDITIONS,
  checkComposition,
  compileComposition,
  contextFor,
  evaluateComposition,
  runComposition,
  type Composition,
  type CompositionOutcome,
  type CompositionResult,
  type CompositionSpec,
  type FieldCompileError,
  type NamedExpression,
  type ValidationOutcome,
  type ValidationSpec,
} from './composition.ts';
export { fromCel, toCel } from './values.ts';
export { celValuesOnly } from './values-marks.ts';
export type { Exec } from './codegen.ts';
export { meteredStep } from './metered-step.ts';
export { sourceTag } from './source-tag.ts';
